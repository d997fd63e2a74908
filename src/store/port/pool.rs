//! The store port through the sea-orm pool: statements in a transaction or, one each, on the
//! pool (PostgreSQL, MySQL/MariaDB, and SQLite where the run-row writer does not hold the file).

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, QueryResult,
    Statement, TransactionTrait,
};

use super::{FromRow, Row, Value, statement};
use crate::error::Result;

/// Where a pool port's statements go.
#[derive(Clone, Copy)]
pub(crate) enum Sea<'a> {
    Tx(&'a DatabaseTransaction),
    Db(&'a DatabaseConnection),
}

/// `$e` with `$c` the connection `$sea` stands for (a transaction or the pool).
macro_rules! on {
    ($sea:expr, $c:ident => $e:expr) => {
        match $sea {
            Sea::Tx($c) => $e,
            Sea::Db($c) => $e,
        }
    };
}

impl Sea<'_> {
    pub(super) fn backend(self) -> DbBackend {
        on!(self, c => c.get_database_backend())
    }

    async fn exec(self, st: Statement) -> std::result::Result<sea_orm::ExecResult, DbErr> {
        on!(self, c => c.execute_raw(st).await)
    }

    async fn one(self, st: Statement) -> std::result::Result<Option<QueryResult>, DbErr> {
        on!(self, c => c.query_one_raw(st).await)
    }

    pub(super) async fn execute(self, st: Statement) -> Result<u64> {
        Ok(self.exec(st).await?.rows_affected())
    }

    pub(super) async fn insert(self, sql: &str, args: &[Value]) -> Result<i64> {
        let backend = self.backend();
        if backend != DbBackend::Postgres {
            let st = statement(backend, sql, args);
            return Ok(self.exec(st).await?.last_insert_id() as i64);
        }
        let sql = format!("{sql} RETURNING id");
        let row = self
            .one(statement(backend, &sql, args))
            .await?
            .ok_or(DbErr::RecordNotInserted)?;
        // `id` is BIGINT on the run tables, INTEGER on the definitions
        match row.try_get_by_index::<i64>(0) {
            Ok(id) => Ok(id),
            Err(_) => Ok(i64::from(row.try_get_by_index::<i32>(0)?)),
        }
    }

    pub(super) async fn insert_undone(self, sql: &str, args: &[Value]) -> Result<i64> {
        let inner = on!(self, c => c.begin().await?);
        let st = statement(inner.get_database_backend(), sql, args);
        let first = inner.execute_raw(st).await?.last_insert_id() as i64;
        inner.rollback().await?;
        Ok(first)
    }

    pub(super) async fn rows<T: FromRow>(self, st: Statement) -> Result<Vec<T>> {
        let rows = on!(self, c => c.query_all_raw(st).await?);
        rows.iter().map(|q| T::from_row(&Row::Pool(q))).collect()
    }

    pub(super) async fn row<T: FromRow>(self, st: Statement) -> Result<Option<T>> {
        self.one(st)
            .await?
            .map(|q| T::from_row(&Row::Pool(&q)))
            .transpose()
    }
}
