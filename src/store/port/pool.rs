//! The store port through the sea-orm pool: statements in a transaction or, one each, on the
//! pool (PostgreSQL, MySQL/MariaDB, and SQLite where the run-row writer does not hold the file).

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, QueryResult,
    Statement,
};

use super::{FromRow, Row, Value, statement};
use crate::error::Result;

/// Where a pool port's statements go.
#[derive(Clone, Copy)]
pub(crate) enum Sea<'a> {
    Tx(&'a DatabaseTransaction),
    Db(&'a DatabaseConnection),
}

impl Sea<'_> {
    pub(super) fn backend(self) -> DbBackend {
        match self {
            Sea::Tx(t) => t.get_database_backend(),
            Sea::Db(d) => d.get_database_backend(),
        }
    }

    async fn exec(self, st: Statement) -> std::result::Result<sea_orm::ExecResult, DbErr> {
        match self {
            Sea::Tx(t) => t.execute_raw(st).await,
            Sea::Db(d) => d.execute_raw(st).await,
        }
    }

    async fn one(self, st: Statement) -> std::result::Result<Option<QueryResult>, DbErr> {
        match self {
            Sea::Tx(t) => t.query_one_raw(st).await,
            Sea::Db(d) => d.query_one_raw(st).await,
        }
    }

    pub(super) async fn execute(self, st: Statement) -> Result<u64> {
        Ok(self.exec(st).await?.rows_affected())
    }

    pub(super) async fn insert(self, sql: &str, args: &[Value]) -> Result<i64> {
        let backend = self.backend();
        if backend != DbBackend::Postgres {
            return Ok(self
                .exec(statement(backend, sql, args))
                .await?
                .last_insert_id() as i64);
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

    pub(super) async fn rows<T: FromRow>(self, st: Statement) -> Result<Vec<T>> {
        let rows = match self {
            Sea::Tx(t) => t.query_all_raw(st).await?,
            Sea::Db(d) => d.query_all_raw(st).await?,
        };
        rows.iter().map(|q| T::from_row(&Row::Pool(q))).collect()
    }

    pub(super) async fn row<T: FromRow>(self, st: Statement) -> Result<Option<T>> {
        self.one(st)
            .await?
            .map(|q| T::from_row(&Row::Pool(&q)))
            .transpose()
    }
}
