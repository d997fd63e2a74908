//! The store port on the run-row writer's own SQLite connection: cached prepared statements
//! in one `BEGIN IMMEDIATE` transaction on the writer's thread (or the caller's, when the
//! writer is between batches), sea-query values bound as rusqlite binds them.

use parking_lot::Mutex;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};

use super::{Arg, FromRow, Port, Row, Value};
use crate::error::Result;

/// The writer's connection inside a transaction. Behind a mutex only so the shared async
/// rules may hold a reference: one thread uses it, and no lock is held across an await.
pub(crate) struct File<'a>(Mutex<&'a mut rusqlite::Connection>);

/// Runs `f` in one write transaction on the run-row writer's connection `conn`: committed
/// when it answers `Ok`, rolled back otherwise. The rules are async (they are shared with the
/// pool); on this connection no statement ever waits, so `f` is driven to its end at once.
pub(crate) fn file_tx<R>(
    conn: &mut rusqlite::Connection,
    f: impl AsyncFnOnce(&Port<'_>) -> Result<R>,
) -> Result<R> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    file_tx_begun(conn, f)
}

/// As [`file_tx`], in the transaction the caller began on `conn`; a panic in `f` rolls it
/// back before it goes on.
pub(crate) fn file_tx_begun<R>(
    conn: &mut rusqlite::Connection,
    f: impl AsyncFnOnce(&Port<'_>) -> Result<R>,
) -> Result<R> {
    let port = Port::File(File(Mutex::new(conn)));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(f(&port))
    }));
    let Port::File(File(conn)) = port else {
        unreachable!("built as a file port above")
    };
    let conn = conn.into_inner();
    match out {
        Ok(Ok(v)) => {
            conn.execute_batch("COMMIT")?;
            Ok(v)
        }
        Ok(Err(e)) => {
            if let Err(r) = conn.execute_batch("ROLLBACK") {
                tracing::error!(error = %r, "transaction on the run-row writer's connection not rolled back");
            }
            Err(e)
        }
        Err(panic) => {
            let _ = conn.execute_batch("ROLLBACK");
            std::panic::resume_unwind(panic)
        }
    }
}

impl File<'_> {
    pub(super) fn with<R>(&self, f: impl FnOnce(&rusqlite::Connection) -> R) -> R {
        f(&self.0.lock())
    }

    pub(super) fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        let c = self.0.lock();
        let n = c
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(args.iter().map(Lite)))?;
        Ok(n as u64)
    }

    pub(super) fn execute_each<'r, T>(
        &self,
        sql: &str,
        items: &'r [T],
        args: impl Fn(&'r T, &mut Vec<Arg<'r>>),
    ) -> Result<Vec<u64>> {
        let c = self.0.lock();
        let mut s = c.prepare_cached(sql)?;
        // one row's values at a time, in one small buffer: a batch's rows never become one
        // large allocation (freed memory goes back to the system at once, and a large buffer
        // per batch was page faults on every batch)
        let mut row = Vec::with_capacity(24);
        items
            .iter()
            .map(|t| {
                row.clear();
                args(t, &mut row);
                Ok(s.execute(rusqlite::params_from_iter(&row))? as u64)
            })
            .collect()
    }

    pub(super) fn insert(&self, sql: &str, args: &[Value]) -> Result<i64> {
        let c = self.0.lock();
        c.prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(args.iter().map(Lite)))?;
        Ok(c.last_insert_rowid())
    }

    pub(super) fn rows<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Vec<T>> {
        let c = self.0.lock();
        let mut s = c.prepare_cached(sql)?;
        let mut rows = s.query(rusqlite::params_from_iter(args.iter().map(Lite)))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(T::from_row(&Row::File(r))?);
        }
        Ok(out)
    }

    pub(super) fn row<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Option<T>> {
        let c = self.0.lock();
        let mut s = c.prepare_cached(sql)?;
        let mut rows = s.query(rusqlite::params_from_iter(args.iter().map(Lite)))?;
        rows.next()?.map(|r| T::from_row(&Row::File(r))).transpose()
    }
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::Value as V;
        Ok(match *self {
            Arg::Int(v) => ToSqlOutput::Owned(V::Integer(v)),
            Arg::Text(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Arg::Text(None) => ToSqlOutput::Owned(V::Null),
            Arg::Time(ms) => ToSqlOutput::Owned(V::Text(crate::store::sqlite_text::naive_text(ms))),
        })
    }
}

/// A sea-query value as rusqlite binds it (DATETIME as the text sqlx writes).
struct Lite<'v>(&'v Value);

impl ToSql for Lite<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::Value as V;
        let int = |v: Option<i64>| ToSqlOutput::Owned(v.map_or(V::Null, V::Integer));
        Ok(match self.0 {
            Value::Bool(v) => int(v.map(i64::from)),
            Value::TinyInt(v) => int(v.map(i64::from)),
            Value::SmallInt(v) => int(v.map(i64::from)),
            Value::Int(v) => int(v.map(i64::from)),
            Value::BigInt(v) => int(*v),
            Value::TinyUnsigned(v) => int(v.map(i64::from)),
            Value::SmallUnsigned(v) => int(v.map(i64::from)),
            Value::Unsigned(v) => int(v.map(i64::from)),
            Value::Double(v) => ToSqlOutput::Owned(v.map_or(V::Null, V::Real)),
            Value::String(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::String(None) => ToSqlOutput::Owned(V::Null),
            Value::ChronoDateTime(v) => ToSqlOutput::Owned(v.map_or(V::Null, |t| {
                V::Text(crate::store::sqlite_text::naive_text(
                    crate::clock::naive_to_ms(t),
                ))
            })),
            other => {
                return Err(rusqlite::Error::ToSqlConversionFailure(
                    format!("no SQLite binding for {other:?}").into(),
                ));
            }
        })
    }
}
