//! The pool connection of the run-row writer (PostgreSQL, MySQL/MariaDB, in-memory SQLite):
//! each batch one sea-orm transaction on the store port ([`batches::write_rows`]), written by
//! a task of the engine's runtime.

use super::batches::{self, Rows};
use super::*;
use crate::store::port::Port;
use crate::store::run_rows::Children;

/// The pool as the writer's loop uses it.
pub(super) struct PoolConn {
    db: DatabaseConnection,
    /// When the runs were last indexed by job (a SQLite database in memory).
    indexed: std::time::Instant,
}

impl PoolConn {
    pub(super) fn new(db: DatabaseConnection) -> Self {
        PoolConn {
            db,
            indexed: std::time::Instant::now(),
        }
    }
}

impl batches::Conn for PoolConn {
    async fn write(&mut self, rows: &Rows, children: &mut Children) -> Result<Vec<FinishedRun>> {
        let txn = self.db.begin().await?;
        let (finished, _) = batches::write_rows(&Port::tx(&txn), rows, children, None).await?;
        txn.commit().await?;
        Ok(finished)
    }

    fn refused(&self, e: &Error) -> bool {
        refused_data(e)
    }

    fn closed(&self, e: &Error) -> bool {
        pool_closed(e)
    }

    fn exec(&mut self, _: Exec) {
        // dropped: work for a SQLite file's connection has nowhere to run here
    }

    fn listed(&mut self) -> Vec<crate::store::audit::Entry> {
        Vec::new()
    }

    async fn after_batch(&mut self) {
        let sqlite = self.db.get_database_backend() == DbBackend::Sqlite;
        if sqlite && self.indexed.elapsed() >= crate::store::log_by_job::INDEX_EVERY {
            // a SQLite database in memory: its runs indexed by job as the file writer's are
            match crate::store::log_by_job::index_pooled(&self.db).await {
                Ok(()) => self.indexed = std::time::Instant::now(),
                Err(e) => tracing::warn!(error = %e, "runs not indexed by job yet; retrying"),
            }
        }
    }

    /// A database server's commit waits for its log's flush, and every other commit waits
    /// behind it: a trickle of results is gathered into fewer transactions there too. Not on
    /// a SQLite database in memory (tests, where the wait would be on their paused clock).
    fn lingers(&self) -> bool {
        self.db.get_database_backend() != sea_orm::DbBackend::Sqlite
    }
}

/// Whether `e` is the database refusing the data of a statement (a value too long for its
/// column, a character it cannot store, a constraint), or a bug in a batch: splitting the batch
/// finds the row. Anything else (no connection, a timeout) is the same for every row; so is
/// the server ending the session, which it reports as a database error too (`lost`).
fn refused_data(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            d @ (DbErr::Exec(RuntimeErr::SqlxError(s)) | DbErr::Query(RuntimeErr::SqlxError(s))),
        ) => {
            matches!(**s, sqlx::Error::Database(_) | sqlx::Error::Encode(_))
                && !crate::store::connection_lost(d)
        }
        _ => false,
    }
}

/// Whether `e` says the connection pool is closed (the engine stopped).
fn pool_closed(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            DbErr::Conn(RuntimeErr::SqlxError(s))
            | DbErr::Exec(RuntimeErr::SqlxError(s))
            | DbErr::Query(RuntimeErr::SqlxError(s)),
        ) => matches!(**s, sqlx::Error::PoolClosed),
        Error::Db(DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::ConnectionClosed)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::Coded;
    use sea_orm::{DbErr, RuntimeErr, sqlx};

    fn query(x: sqlx::Error) -> Error {
        Error::Db(DbErr::Query(RuntimeErr::SqlxError(std::sync::Arc::new(x))))
    }

    /// The server ending the session is reported as a database error, like a refused value,
    /// but it is a lost connection: the batch waits for the database rather than being split
    /// and its rows stored reduced with the error's text. A closed pool (the engine stopped,
    /// looked at first) is not refused data either.
    #[test]
    fn a_session_the_server_ended_is_lost_not_refused() {
        let lost = |e: &Error| matches!(e, Error::Db(d) if crate::store::connection_lost(d));
        let server = |code| query(sqlx::Error::Database(Box::new(Coded(code))));
        let ended = server("57P01");
        assert!(lost(&ended) && !refused_data(&ended));
        let too_long = server("22001");
        assert!(!lost(&too_long) && refused_data(&too_long));
        let closed = query(sqlx::Error::PoolClosed);
        assert!(pool_closed(&closed) && !refused_data(&closed));
    }
}
