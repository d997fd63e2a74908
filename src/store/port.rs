//! The store's transaction port: one interface in front of the two connections a write
//! transaction runs on, so a storage rule is written once, as SQL with `?` placeholders, and
//! runs on either:
//!
//! - [`Port::Pool`]: a sea-orm transaction (PostgreSQL, MySQL/MariaDB, and SQLite where the
//!   run-row writer does not hold the file). `?` becomes `$1`, `$2`, … on PostgreSQL.
//! - [`Port::File`]: the run-row writer's own rusqlite connection inside `BEGIN IMMEDIATE` (a
//!   SQLite file this node holds; [`file_tx`]), where each statement is a cached prepared
//!   statement and costs no thread hop.
//!
//! Values go in as sea-query [`Value`]s and come out through [`Row::get`], whose [`Cell`]
//! types read the same column on either connection (a DATETIME is text on a SQLite file and
//! is read as chrono reads what sqlx wrote). What differs by database, rather than by
//! connection (`RETURNING`, index hints, row locks), the rules ask [`Port::backend`].

use std::borrow::Cow;

use parking_lot::Mutex;
use rusqlite::types::{ToSql, ToSqlOutput, ValueRef};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, QueryResult,
    Statement,
};

pub(crate) use sea_orm::Value;

use crate::error::Result;

/// A write transaction on one of the store's two connections (see the module docs). No method
/// commits: the owner of the transaction does.
pub(crate) enum Port<'a> {
    /// Statements through sea-orm, in a transaction or (one statement each) on the pool.
    Pool(Sea<'a>),
    /// Cached statements on the run-row writer's connection, in a transaction [`file_tx`]
    /// began. Behind a mutex only so the shared async rules may hold a reference: one thread
    /// uses it, and no lock is held across an await.
    File(Mutex<&'a mut rusqlite::Connection>),
}

/// Where a pool port's statements go.
#[derive(Clone, Copy)]
pub(crate) enum Sea<'a> {
    Tx(&'a DatabaseTransaction),
    Db(&'a DatabaseConnection),
}

impl Sea<'_> {
    fn backend(self) -> DbBackend {
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

    async fn all(self, st: Statement) -> std::result::Result<Vec<QueryResult>, DbErr> {
        match self {
            Sea::Tx(t) => t.query_all_raw(st).await,
            Sea::Db(d) => d.query_all_raw(st).await,
        }
    }
}

impl<'a> Port<'a> {
    /// Statements in sea-orm transaction `txn`.
    pub(crate) fn tx(txn: &'a DatabaseTransaction) -> Self {
        Port::Pool(Sea::Tx(txn))
    }

    /// Statements on the pool, each its own transaction.
    pub(crate) fn db(db: &'a DatabaseConnection) -> Self {
        Port::Pool(Sea::Db(db))
    }
}

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
    let port = Port::File(Mutex::new(conn));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        futures::executor::block_on(f(&port))
    }));
    let Port::File(conn) = port else {
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

impl Port<'_> {
    /// The database the statements run on.
    pub(crate) fn backend(&self) -> DbBackend {
        match self {
            Port::Pool(t) => t.backend(),
            Port::File(_) => DbBackend::Sqlite,
        }
    }

    /// Runs `f` on the run-row writer's connection, in this transaction; `None` on the pool.
    /// For what only a SQLite file has (the fire journal).
    pub(crate) fn on_file<R>(&self, f: impl FnOnce(&rusqlite::Connection) -> R) -> Option<R> {
        match self {
            Port::File(c) => Some(f(&c.lock())),
            Port::Pool(_) => None,
        }
    }

    /// Runs `sql`; answers the rows it changed.
    pub(crate) async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        match self {
            Port::Pool(t) => Ok(t
                .exec(statement(t.backend(), sql, args))
                .await?
                .rows_affected()),
            Port::File(c) => {
                let c = c.lock();
                let n = c
                    .prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(args.iter().map(Lite)))?;
                Ok(n as u64)
            }
        }
    }

    /// Runs the `INSERT` `sql` of a table whose key is `id`; answers the new row's id.
    pub(crate) async fn insert(&self, sql: &str, args: &[Value]) -> Result<i64> {
        match self {
            Port::Pool(t) if t.backend() == DbBackend::Postgres => {
                let sql = format!("{sql} RETURNING id");
                let row = t
                    .one(statement(DbBackend::Postgres, &sql, args))
                    .await?
                    .ok_or_else(|| DbErr::RecordNotInserted)?;
                // `id` is BIGINT on the run tables, INTEGER on the definitions
                match row.try_get_by_index::<i64>(0) {
                    Ok(id) => Ok(id),
                    Err(_) => Ok(i64::from(row.try_get_by_index::<i32>(0)?)),
                }
            }
            Port::Pool(t) => {
                let r = t.exec(statement(t.backend(), sql, args)).await?;
                Ok(r.last_insert_id() as i64)
            }
            Port::File(c) => {
                let c = c.lock();
                c.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(args.iter().map(Lite)))?;
                Ok(c.last_insert_rowid())
            }
        }
    }

    /// The rows `sql` answers.
    pub(crate) async fn rows<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Vec<T>> {
        match self {
            Port::Pool(t) => t
                .all(statement(t.backend(), sql, args))
                .await?
                .iter()
                .map(|q| T::from_row(&Row::Pool(q)))
                .collect(),
            Port::File(c) => {
                let c = c.lock();
                let mut s = c.prepare_cached(sql)?;
                let mut rows = s.query(rusqlite::params_from_iter(args.iter().map(Lite)))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(T::from_row(&Row::File(r))?);
                }
                Ok(out)
            }
        }
    }

    /// The first row `sql` answers, if any.
    pub(crate) async fn row<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Option<T>> {
        match self {
            Port::Pool(t) => t
                .one(statement(t.backend(), sql, args))
                .await?
                .map(|q| T::from_row(&Row::Pool(&q)))
                .transpose(),
            Port::File(c) => {
                let c = c.lock();
                let mut s = c.prepare_cached(sql)?;
                let mut rows = s.query(rusqlite::params_from_iter(args.iter().map(Lite)))?;
                rows.next()?.map(|r| T::from_row(&Row::File(r))).transpose()
            }
        }
    }
}

impl Port<'_> {
    /// Runs a statement sea-query built (for [`Port::backend`]); answers the rows it changed.
    pub(crate) async fn run(&self, q: &impl sea_orm::QueryTrait) -> Result<u64> {
        let st = q.build(self.backend());
        let args = st.values.map(|v| v.0).unwrap_or_default();
        match self {
            Port::Pool(t) => Ok(t
                .exec(Statement::from_sql_and_values(st.db_backend, st.sql, args))
                .await?
                .rows_affected()),
            Port::File(_) => self.execute(&st.sql, &args).await,
        }
    }

    /// The rows of a query sea-query built, its columns in `T`'s order.
    pub(crate) async fn select<T: FromRow>(&self, q: &impl sea_orm::QueryTrait) -> Result<Vec<T>> {
        let st = q.build(self.backend());
        let args = st.values.map(|v| v.0).unwrap_or_default();
        match self {
            Port::Pool(t) => t
                .all(Statement::from_sql_and_values(st.db_backend, st.sql, args))
                .await?
                .iter()
                .map(|q| T::from_row(&Row::Pool(q)))
                .collect(),
            Port::File(_) => self.rows(&st.sql, &args).await,
        }
    }
}

/// `sql` with its `?` placeholders as `backend` spells them, bound to `args`.
pub(crate) fn statement(backend: DbBackend, sql: &str, args: &[Value]) -> Statement {
    Statement::from_sql_and_values(backend, placeholders(backend, sql), args.iter().cloned())
}

/// `sql` with `?` as `$1`, `$2`, … on PostgreSQL (the rules never put `?` in a literal).
pub(crate) fn placeholders(backend: DbBackend, sql: &str) -> Cow<'_, str> {
    if backend != DbBackend::Postgres || !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `?, ?, …` for an `IN` list of `n` values, padded to the next power of two (at most
/// [`IN_CHUNK`]) so a handful of statement texts cover every size and stay prepared; the
/// padding repeats the last value, which changes nothing in an `IN` list.
pub(crate) fn in_list<T: Clone + Into<Value>>(values: &[T]) -> (String, Vec<Value>) {
    let n = values
        .len()
        .next_power_of_two()
        .min(IN_CHUNK.max(values.len()));
    let mut args: Vec<Value> = values.iter().cloned().map(Into::into).collect();
    if let Some(last) = args.last().cloned() {
        args.resize(n, last);
    }
    let marks = vec!["?"; args.len()].join(", ");
    (marks, args)
}

/// Most values one `IN` list of [`in_list`] holds; callers chunk longer lists.
pub(crate) const IN_CHUNK: usize = 512;

/// A row of either connection.
pub(crate) enum Row<'r> {
    Pool(&'r QueryResult),
    File(&'r rusqlite::Row<'r>),
}

impl Row<'_> {
    /// Column `i` as a `T`.
    pub(crate) fn get<T: Cell>(&self, i: usize) -> Result<T> {
        match self {
            Row::Pool(q) => Ok(T::pool(q, i)?),
            Row::File(r) => Ok(T::file(r, i)?),
        }
    }
}

/// A column type both connections read.
pub(crate) trait Cell: Sized {
    fn pool(q: &QueryResult, i: usize) -> std::result::Result<Self, DbErr>;
    fn file(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self>;
}

macro_rules! cells {
    ($($t:ty),*) => {$(
        impl Cell for $t {
            fn pool(q: &QueryResult, i: usize) -> std::result::Result<Self, DbErr> {
                q.try_get_by_index(i)
            }
            fn file(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
        }
    )*};
}

cells!(
    i16,
    i32,
    i64,
    String,
    Option<i16>,
    Option<i32>,
    Option<i64>,
    Option<String>
);

impl Cell for Option<chrono::NaiveDateTime> {
    fn pool(q: &QueryResult, i: usize) -> std::result::Result<Self, DbErr> {
        q.try_get_by_index(i)
    }
    fn file(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        Ok(crate::store::sqlite_text::naive(r.get(i)?))
    }
}

/// A value built from a row.
pub(crate) trait FromRow: Sized {
    fn from_row(r: &Row<'_>) -> Result<Self>;
}

impl<T: Cell> FromRow for T {
    fn from_row(r: &Row<'_>) -> Result<Self> {
        r.get(0)
    }
}

impl<A: Cell, B: Cell> FromRow for (A, B) {
    fn from_row(r: &Row<'_>) -> Result<Self> {
        Ok((r.get(0)?, r.get(1)?))
    }
}

impl<A: Cell, B: Cell, C: Cell> FromRow for (A, B, C) {
    fn from_row(r: &Row<'_>) -> Result<Self> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_numbers_its_placeholders() {
        assert_eq!(
            placeholders(
                DbBackend::Postgres,
                "UPDATE t SET a = ? WHERE id = ? AND b = ?"
            ),
            "UPDATE t SET a = $1 WHERE id = $2 AND b = $3"
        );
        assert_eq!(
            placeholders(DbBackend::MySql, "SELECT ? + ?"),
            "SELECT ? + ?",
            "MySQL and SQLite take `?` as written"
        );
    }

    #[test]
    fn an_in_list_pads_to_a_power_of_two_with_its_last_value() {
        let (marks, args) = in_list(&[1i64, 2, 3]);
        assert_eq!(marks, "?, ?, ?, ?");
        assert_eq!(
            args,
            vec![1i64.into(), 2i64.into(), 3i64.into(), 3i64.into()]
        );
        let (marks, args) = in_list::<i64>(&[]);
        assert_eq!((marks.as_str(), args.len()), ("", 0));
        let many: Vec<i64> = (0..600).collect();
        assert_eq!(in_list(&many).1.len(), 600, "past the chunk, as given");
    }

    /// A statement written once runs on both connections and reads the same values back.
    #[tokio::test]
    async fn one_statement_runs_on_both_connections() {
        use sea_orm::TransactionTrait;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("port.db");
        let db = crate::store::tests::file_db(&path).await;
        let t = chrono::NaiveDate::from_ymd_opt(2026, 12, 2)
            .and_then(|d| d.and_hms_milli_opt(13, 4, 5, 60))
            .unwrap();
        let insert = "INSERT INTO xxl_job_group (app_name, title, address_type, address_list, \
                      update_time) VALUES (?, ?, 0, ?, ?)";
        let read = "SELECT title, address_list, update_time FROM xxl_job_group WHERE id = ?";
        let txn = db.begin().await.unwrap();
        let pool = Port::tx(&txn);
        let a = pool
            .insert(
                insert,
                &["a".into(), "A".into(), Value::String(None), t.into()],
            )
            .await
            .unwrap();
        txn.commit().await.unwrap();
        db.close().await.unwrap();
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let (b, rows) = file_tx(&mut conn, async |port| {
            let b = port
                .insert(insert, &["b".into(), "B".into(), "x:1".into(), t.into()])
                .await?;
            let mut rows = Vec::new();
            for id in [a, b] {
                rows.push(
                    port.row::<(String, Option<String>, Option<chrono::NaiveDateTime>)>(
                        read,
                        &[id.into()],
                    )
                    .await?,
                );
            }
            Ok((b, rows))
        })
        .unwrap();
        assert_ne!(a, b);
        assert_eq!(
            rows,
            vec![
                Some(("A".to_string(), None, Some(t))),
                Some(("B".to_string(), Some("x:1".to_string()), Some(t)))
            ]
        );
    }
}
