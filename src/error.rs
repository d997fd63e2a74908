//! The crate's error type: one `#[non_exhaustive]` enum with context fields, and a `Result` alias.

use thiserror::Error;

/// Everything that can go wrong inside xjob.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A schedule expression (cron or fixed rate) is invalid.
    #[error("invalid schedule `{conf}`: {reason}")]
    InvalidSchedule {
        /// The expression as given.
        conf: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A field of some input is invalid.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field's name as the user wrote it.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// No job has this id.
    #[error("job {job_id} not found")]
    JobNotFound {
        /// The id asked for.
        job_id: i32,
    },
    /// No executor group has this id.
    #[error("executor group {group_id} not found")]
    GroupNotFound {
        /// The id asked for.
        group_id: i32,
    },
    /// No log row has this id.
    #[error("log {log_id} not found")]
    LogNotFound {
        /// The id asked for.
        log_id: i64,
    },
    /// No record of this kind has this id.
    #[error("{what} {id} not found")]
    NotFound {
        /// What was looked for (`user`, …).
        what: &'static str,
        /// The id asked for.
        id: i64,
    },
    /// The request contradicts the current state (a duplicate name, a group still in use, …).
    #[error("conflict: {reason}")]
    Conflict {
        /// What is in the way.
        reason: String,
    },
    /// The request is well-formed but not allowed (by role, group permission or configuration).
    #[error("forbidden: {reason}")]
    Forbidden {
        /// The field concerned, if one is.
        field: Option<&'static str>,
        /// Why.
        reason: String,
    },
    /// No valid login token came with the request.
    #[error("authentication required")]
    Unauthenticated,
    /// Too many failed logins from this client (for this user, or for any), or too many logins
    /// being checked at once.
    #[error("too many login attempts; retry in {retry_after_secs} s")]
    TooManyAttempts {
        /// Seconds until a login is accepted again.
        retry_after_secs: u64,
    },
    /// A handler name was registered twice.
    #[error("job handler `{name}` is registered twice")]
    DuplicateHandler {
        /// The handler's name.
        name: String,
    },
    /// The cluster schedule lock row is missing: the database was not migrated.
    #[error("the `schedule_lock` row is missing from xxl_job_lock; run `xjob migrate`")]
    LockRowMissing,
    /// This node no longer holds a lease its work depended on (another node took the bucket
    /// over); the work was rolled back and belongs to that node now.
    #[error("a bucket lease moved to another node; this pass was rolled back")]
    LeaseLost,
    /// A database error.
    #[error("database: {0}")]
    Db(#[source] sea_orm::DbErr),
    /// An actor is gone (the engine is stopping).
    #[error("engine is stopped: {0}")]
    Stopped(&'static str),
    /// Configuration is invalid.
    #[error("config: {0}")]
    Config(String),
    /// An I/O error.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Another node holds this SQLite database (SQLite serves exactly one node).
    #[error(
        "the SQLite database {path} is in use by another xjob node; SQLite serves one node \
         (stop the other one, or use PostgreSQL or MySQL for a cluster)"
    )]
    DatabaseInUse {
        /// The database file.
        path: String,
    },
    /// The hot-path writer's own SQLite connection failed.
    #[error("sqlite writer: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A request body larger than its route takes.
    #[error("the request body is larger than {limit} bytes")]
    TooLarge {
        /// The most the route takes, bytes.
        limit: usize,
    },
}

impl From<actix::MailboxError> for Error {
    fn from(_: actix::MailboxError) -> Self {
        Error::Stopped("mailbox closed")
    }
}

/// `Result` with [`Error`](enum@Error).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every database error on its way up notes whether its connection was lost
/// ([`crate::store::note_error`]): the pools then test the connections that went idle before
/// it before handing them out.
impl From<sea_orm::DbErr> for Error {
    fn from(e: sea_orm::DbErr) -> Self {
        crate::store::note_error(&e);
        Error::Db(e)
    }
}
