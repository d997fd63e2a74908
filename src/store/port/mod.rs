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

mod file;
mod pool;

use std::borrow::Cow;

use sea_orm::{DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, QueryResult, Statement};

pub(crate) use sea_orm::Value;

pub(crate) use self::file::{File, file_tx, file_tx_begun};
use self::pool::Sea;
use crate::error::Result;

/// A write transaction on one of the store's two connections (see the module docs). No method
/// commits: the owner of the transaction does.
pub(crate) enum Port<'a> {
    /// Statements through sea-orm, in a transaction or (one statement each) on the pool.
    Pool(Sea<'a>),
    /// Cached statements on the run-row writer's connection, in a transaction [`file_tx`]
    /// began.
    File(File<'a>),
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

    /// The pool, for statements on it outside any transaction (`None` in a transaction).
    pub(crate) fn pool(&self) -> Option<&'a DatabaseConnection> {
        match self {
            Port::Pool(Sea::Db(db)) => Some(db),
            _ => None,
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
            Port::File(c) => Some(c.with(f)),
            Port::Pool(_) => None,
        }
    }

    /// Runs `sql`; answers the rows it changed.
    pub(crate) async fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        match self {
            Port::Pool(t) => t.execute(statement(t.backend(), sql, args)).await,
            Port::File(c) => c.execute(sql, args),
        }
    }

    /// Runs `sql` once for each of `items`, bound to the values `args` gives it ([`Arg`]s
    /// borrowed from the item: on a file each is bound as it is, the statement prepared once);
    /// answers the rows each run changed.
    pub(crate) async fn execute_each<'r, T>(
        &self,
        sql: &str,
        items: &'r [T],
        args: impl Fn(&'r T, &mut Vec<Arg<'r>>),
    ) -> Result<Vec<u64>> {
        match self {
            Port::Pool(t) => {
                let mut out = Vec::with_capacity(items.len());
                let mut row = Vec::new();
                for item in items {
                    row.clear();
                    args(item, &mut row);
                    let values: Vec<Value> = row.iter().map(|a| a.value()).collect();
                    out.push(t.execute(statement(t.backend(), sql, &values)).await?);
                }
                Ok(out)
            }
            Port::File(c) => c.execute_each(sql, items, args),
        }
    }

    /// Runs the `INSERT` `sql` of a table whose key is `id`; answers the new row's id.
    pub(crate) async fn insert(&self, sql: &str, args: &[Value]) -> Result<i64> {
        match self {
            Port::Pool(t) => t.insert(sql, args).await,
            Port::File(c) => c.insert(sql, args),
        }
    }

    /// Runs the multi-row `INSERT` `sql` and undoes it at once (a savepoint rolled back, or a
    /// transaction of its own on the pool); answers the first id it took. On MySQL/MariaDB the
    /// auto-increment values it took stay taken: InnoDB never hands one out again, which is
    /// how ids are reserved there (`workflow_runs::pass`). Not on a file.
    pub(crate) async fn insert_undone(&self, sql: &str, args: &[Value]) -> Result<i64> {
        match self {
            Port::Pool(t) => t.insert_undone(sql, args).await,
            Port::File(_) => Err(crate::Error::Conflict {
                reason: "ids are not reserved on a SQLite file".into(),
            }),
        }
    }

    /// The rows `sql` answers.
    pub(crate) async fn rows<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Vec<T>> {
        match self {
            Port::Pool(t) => t.rows(statement(t.backend(), sql, args)).await,
            Port::File(c) => c.rows(sql, args),
        }
    }

    /// The first row `sql` answers, if any.
    pub(crate) async fn row<T: FromRow>(&self, sql: &str, args: &[Value]) -> Result<Option<T>> {
        match self {
            Port::Pool(t) => t.row(statement(t.backend(), sql, args)).await,
            Port::File(c) => c.row(sql, args),
        }
    }

    /// Runs a statement sea-query built (for [`Port::backend`]); answers the rows it changed.
    pub(crate) async fn run(&self, q: &impl sea_orm::QueryTrait) -> Result<u64> {
        let st = q.build(self.backend());
        match self {
            Port::Pool(t) => t.execute(st).await,
            Port::File(c) => c.execute(&st.sql, &values_of(st.values)),
        }
    }

    /// The rows of a query sea-query built, its columns in `T`'s order.
    pub(crate) async fn select<T: FromRow>(&self, q: &impl sea_orm::QueryTrait) -> Result<Vec<T>> {
        let st = q.build(self.backend());
        match self {
            Port::Pool(t) => t.rows(st).await,
            Port::File(c) => c.rows(&st.sql, &values_of(st.values)),
        }
    }
}

fn values_of(v: Option<sea_orm::Values>) -> Vec<Value> {
    v.map(|v| v.0).unwrap_or_default()
}

/// A value of a row [`Port::execute_each`] binds, borrowed from the caller.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Text(Option<&'a str>),
    /// A DATETIME, as epoch milliseconds.
    Time(i64),
}

impl Arg<'_> {
    fn value(self) -> Value {
        match self {
            Arg::Int(v) => v.into(),
            Arg::Text(s) => s.map(str::to_string).into(),
            Arg::Time(ms) => crate::clock::ms_to_naive(ms).into(),
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
        // DATETIME is text on a SQLite file, read as chrono reads what sqlx wrote
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
