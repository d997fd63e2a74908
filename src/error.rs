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
    /// A handler name was registered twice.
    #[error("job handler `{name}` is registered twice")]
    DuplicateHandler {
        /// The handler's name.
        name: String,
    },
    /// The cluster schedule lock row is missing: the database was not migrated.
    #[error("the `schedule_lock` row is missing from xxl_job_lock; run `xjob migrate`")]
    LockRowMissing,
    /// A database error.
    #[error("database: {0}")]
    Db(#[from] sea_orm::DbErr),
    /// An actor is gone (the engine is stopping).
    #[error("engine is stopped: {0}")]
    Stopped(&'static str),
    /// Configuration is invalid.
    #[error("config: {0}")]
    Config(String),
    /// An I/O error.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl From<actix::MailboxError> for Error {
    fn from(_: actix::MailboxError) -> Self {
        Error::Stopped("mailbox closed")
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
