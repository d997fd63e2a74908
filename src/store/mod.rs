//! Every SQL statement xjob runs. Actors and routes call these; they never build queries.
//!
//! Console reads and one-off writes are functions over `&impl ConnectionTrait` (sea-orm, on
//! SQLite, PostgreSQL and MySQL alike). The rules of the scheduling path are written once on
//! the store's transaction port ([`port`]), which runs the same statements either through the
//! pool or, on a SQLite file this node holds, on the run-row writer's own synchronous
//! connection (rusqlite, cached statements, no thread hop): workflow transitions
//! ([`workflow_runs`]), job creation and start, the single-node scan page, claims. Where a
//! transaction runs is chosen where each store is built ([`scan::ScanStore`],
//! [`workflow_runs::Runs`]). The run-row writer's loop and its batch are written once too
//! (`writer::batches`, with [`run_rows`] rendering [`rules`]: how rows travel differs by
//! database, single-row statements on SQLite, JSON rows on PostgreSQL, upserts on MySQL, not
//! by connection). What is still written per connection: the writer's two small connection
//! types (a file's thread, a pool's transactions), the fire journal of a file against pending
//! rows on a pool, and the cluster scan's takeover and fencing ([`scan`]'s `pool`).
//! `.ci/store-lines.sh` counts those lines. Fires that may have been sent are settled over the
//! pool on every backend ([`in_doubt`]). DATETIME columns hold UTC.

pub(crate) mod api_keys;
pub(crate) mod audit;
pub(crate) mod glue;
pub(crate) mod groups;
pub(crate) mod in_doubt;
pub(crate) mod jobs;
pub(crate) mod leases;
pub(crate) mod log_by_job;
pub(crate) mod log_pages;
pub(crate) mod logs;
pub(crate) mod pg_columns;
pub(crate) mod port;
pub(crate) mod registry;
pub(crate) mod reports;
pub(crate) mod rules;
pub(crate) mod run_rows;
pub(crate) mod scan;
pub(crate) mod sqlite_text;
pub(crate) mod table_stats;
pub(crate) mod users;
pub(crate) mod workflow_runs;
pub(crate) mod workflows;
pub(crate) mod writer;

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::config::DatabaseConfig;
use crate::error::{Error, Result};

/// Prepared statements each SQLite connection keeps (sqlx's default is 100). The hot path's
/// batched statements are large (a 256-row CASE update compiles to a big program) and each
/// connection caches its own copies: at 100 the caches of an 8-connection pool held about
/// 50 MB under load with no CPU gained over 32 (measured with the load bench, BENCHMARKS.md).
pub(crate) const SQLITE_STATEMENT_CACHE: usize = 32;

/// The page cache of each pooled SQLite connection, in KiB (SQLite's default is 2 MiB). On a
/// SQLite file the hot writes and the scan go through the writer's own connection (2 MiB); the
/// pool serves the console and the executors' API, whose reads (a page of logs, a count)
/// fill a 2 MiB cache per connection and keep it for the process's life.
pub(crate) const SQLITE_POOL_CACHE_KIB: i64 = 512;

/// How long a session may stay idle inside a transaction on a shared database before the
/// server ends it (a stalled node's locks go with it).
pub(crate) const IDLE_IN_TRANSACTION_MS: u64 = 2_000;
/// How long a statement waits for another session's row locks on a shared database.
pub(crate) const LOCK_WAIT_MS: u64 = 2_000;

/// A pooled connection idle this long is pinged before it is handed out.
pub(crate) const POOL_PING_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// When a statement last failed because its connection was gone (ms of [`process_ms`]; 0:
/// never). A server restart, a failover or a proxy's cut ends every pooled connection at once,
/// and each is only found dead when used: without this, each would fail one more statement
/// (a dispatch mark's three tries could all meet dead ones, and its buckets be given up).
static CONNECTION_LOST_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Milliseconds on a monotonic clock since the process first asked, from 1.
fn process_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1
}

/// Notes `e` if it says the statement's connection was gone (the server ended it, the socket
/// broke, no connection could be had).
pub(crate) fn note_error(e: &sea_orm::DbErr) {
    if connection_lost(e) {
        CONNECTION_LOST_AT.store(process_ms(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `e` says the connection was gone rather than that the statement failed.
pub(crate) fn connection_lost(e: &sea_orm::DbErr) -> bool {
    use sea_orm::sqlx::Error as X;
    use sea_orm::{DbErr, RuntimeErr};
    match e {
        DbErr::Conn(_) | DbErr::ConnectionAcquire(_) => true,
        DbErr::Exec(RuntimeErr::SqlxError(x)) | DbErr::Query(RuntimeErr::SqlxError(x)) => {
            match &**x {
                X::Io(_) | X::Protocol(_) | X::Tls(_) | X::PoolClosed => true,
                // SQLSTATE class 08 (connection exception); PostgreSQL's 57P01–57P03 (the
                // server ended the session: shutdown, crash, not accepting); MySQL's 70100
                // (the connection was killed)
                X::Database(d) => d.code().is_some_and(|c| {
                    c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03" | "70100")
                }),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether a pooled connection idle for `idle_for` went idle no later than the last lost
/// connection was noted (`lost_at`, at `now`, both of [`process_ms`]): it may be dead too, so it
/// is pinged before it is handed out. One returned to the pool since passed the pool's own ping
/// at its return.
fn idle_since_a_loss(lost_at: u64, now: u64, idle_for: std::time::Duration) -> bool {
    lost_at != 0 && now.saturating_sub(idle_for.as_millis() as u64) <= lost_at
}

/// The pools' test of a connection before it is handed out, beside the ping after
/// [`POOL_PING_IDLE`]: a ping for one that went idle before a connection was last found lost.
fn test_after_a_loss<'c, C: sea_orm::sqlx::Connection>(
    conn: &'c mut C,
    meta: sea_orm::sqlx::pool::PoolConnectionMetadata,
) -> futures::future::BoxFuture<'c, std::result::Result<bool, sea_orm::sqlx::Error>> {
    let lost_at = CONNECTION_LOST_AT.load(std::sync::atomic::Ordering::Relaxed);
    let suspect = idle_since_a_loss(lost_at, process_ms(), meta.idle_for);
    Box::pin(async move {
        if suspect {
            conn.ping().await?;
        }
        Ok(true)
    })
}

/// Opens a pool. SQLite files get WAL mode, `synchronous=NORMAL` and a busy timeout, and the
/// parent directory of the file is created.
pub async fn connect(cfg: &DatabaseConfig) -> Result<DatabaseConnection> {
    if let Some(path) = sqlite_path(&cfg.url)
        && let Some(dir) = std::path::Path::new(&path).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = ConnectOptions::new(cfg.url.clone());
    opts.max_connections(cfg.pool_size())
        .min_connections(1)
        .sqlx_logging(false)
        // a connection in use is known alive: only one idle for a while is pinged before it
        // is handed out (a ping on every checkout is a round trip more per transaction and
        // per statement outside one: on a busy server, the wait for its process each time)
        .test_before_acquire_if_idle_for(POOL_PING_IDLE)
        // and after a lost connection, every one that went idle before it was found
        .map_sqlx_postgres_before_acquire(|conn, meta| test_after_a_loss(conn, meta))
        .map_sqlx_mysql_before_acquire(|conn, meta| test_after_a_loss(conn, meta))
        .map_sqlx_sqlite_opts(|o| {
            use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(std::time::Duration::from_secs(10))
                .statement_cache_capacity(SQLITE_STATEMENT_CACHE)
                .pragma("cache_size", (-SQLITE_POOL_CACHE_KIB).to_string())
        })
        // a node that stalls (or is stopped) inside a transaction must not hold the rows other
        // nodes need: the server ends such a session after a moment, and a statement waits
        // for another's row locks at most as long
        .map_sqlx_postgres_opts(|o| {
            o.options([
                (
                    "idle_in_transaction_session_timeout",
                    IDLE_IN_TRANSACTION_MS.to_string(),
                ),
                ("lock_timeout", LOCK_WAIT_MS.to_string()),
            ])
        })
        .map_sqlx_mysql_pool_opts(|o| {
            o.after_connect(|conn, _| {
                Box::pin(async move {
                    use sea_orm::sqlx::Executor;
                    // (seconds: LOCK_WAIT_MS and IDLE_IN_TRANSACTION_MS)
                    conn.execute("SET SESSION innodb_lock_wait_timeout = 2")
                        .await?;
                    // MariaDB only (MySQL has no such variable): the same as PostgreSQL's
                    let _ = conn
                        .execute("SET SESSION idle_transaction_timeout = 2")
                        .await;
                    Ok(())
                })
            })
        });
    Ok(Database::connect(opts).await?)
}

fn sqlite_path(url: &str) -> Option<String> {
    let rest = url.strip_prefix("sqlite://")?;
    let path = rest.split('?').next()?;
    (!path.is_empty() && !path.starts_with(':')).then(|| path.to_string())
}

/// Applies every pending migration.
pub async fn migrate(db: &DatabaseConnection) -> Result<()> {
    use migration::MigratorTrait;
    migration::Migrator::up(db, None).await?;
    Ok(())
}

/// Begins a transaction that will write after reading. On SQLite it takes the write lock at
/// once (a no-op UPDATE of the lock table): a deferred transaction reads from a snapshot, and
/// when another connection (the run-row writer's thread, committing all the time under load)
/// commits before its first write, that write fails with `SQLITE_BUSY_SNAPSHOT` (517) instead
/// of waiting — at 50,000 fires/s a node's first scan pass failed that way for seconds on end.
/// Elsewhere a plain transaction.
pub(crate) async fn begin_writing(
    db: &sea_orm::DatabaseConnection,
) -> Result<sea_orm::DatabaseTransaction> {
    use sea_orm::{DbBackend, TransactionTrait};
    let txn = db.begin().await?;
    if txn.get_database_backend() == DbBackend::Sqlite {
        txn.execute_raw(Statement::from_string(
            DbBackend::Sqlite,
            "UPDATE xxl_job_lock SET lock_name = lock_name WHERE 1 = 0",
        ))
        .await?;
    }
    Ok(txn)
}

/// Whether `e` is the database ending a transaction for losing a race with another (a
/// deadlock, a serialization failure: SQLSTATE 40001 or 40P01), so the same work run again
/// can succeed.
pub(crate) fn lost_race(e: &Error) -> bool {
    use sea_orm::{DbErr, RuntimeErr, sqlx};
    match e {
        Error::Db(
            DbErr::Exec(RuntimeErr::SqlxError(s)) | DbErr::Query(RuntimeErr::SqlxError(s)),
        ) => match &**s {
            sqlx::Error::Database(d) => matches!(d.code().as_deref(), Some("40001" | "40P01")),
            _ => false,
        },
        _ => false,
    }
}

/// Takes the cluster's lock row (`xxl_job_lock`, `schedule_lock`) for the rest of `txn`, for
/// one-off work that several nodes starting at once must not each do (the first admin user,
/// the demo group). Never taken by the scheduling itself: nodes scan their own buckets.
///
/// PostgreSQL and MySQL: `SELECT … FOR UPDATE` on the row. SQLite has no row locks: a no-op
/// UPDATE of the row takes the database's write lock instead.
pub(crate) async fn lock_one_off(txn: &impl ConnectionTrait) -> Result<()> {
    use sea_orm::DbBackend;
    let backend = txn.get_database_backend();
    let found = match backend {
        DbBackend::Sqlite => {
            txn.execute_raw(Statement::from_string(
                backend,
                "UPDATE xxl_job_lock SET lock_name = lock_name WHERE lock_name = 'schedule_lock'",
            ))
            .await?
            .rows_affected()
                == 1
        }
        _ => txn
            .query_one_raw(Statement::from_string(
                backend,
                "SELECT lock_name FROM xxl_job_lock WHERE lock_name = 'schedule_lock' FOR UPDATE",
            ))
            .await?
            .is_some(),
    };
    if found {
        Ok(())
    } else {
        Err(Error::LockRowMissing)
    }
}

/// Fails with [`Error::LockRowMissing`] unless the schedule lock row exists.
pub async fn verify_lock_row(db: &impl ConnectionTrait) -> Result<()> {
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_string(
            backend,
            "SELECT lock_name FROM xxl_job_lock WHERE lock_name = 'schedule_lock'",
        ))
        .await?;
    row.map(|_| ()).ok_or(Error::LockRowMissing)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sea_orm::DbBackend;

    /// A server's error with a SQLSTATE, as a driver reports it.
    #[derive(Debug)]
    pub(crate) struct Coded(pub(crate) &'static str);

    impl std::fmt::Display for Coded {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for Coded {}

    impl sea_orm::sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sea_orm::sqlx::error::ErrorKind {
            sea_orm::sqlx::error::ErrorKind::Other
        }
    }

    /// A lost connection is told from a statement's own failure: the server ending the session
    /// (PostgreSQL's 57P01, MySQL's killed connection), a broken socket, a connection class
    /// SQLSTATE or no connection at all count; a constraint, a lock timeout or a missing row
    /// do not.
    #[test]
    fn a_lost_connection_is_told_from_a_failed_statement() {
        use sea_orm::sqlx::Error as X;
        use sea_orm::{DbErr, RuntimeErr};
        let query = |x: X| DbErr::Query(RuntimeErr::SqlxError(std::sync::Arc::new(x)));
        let server = |code| query(X::Database(Box::new(Coded(code))));
        let broken = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "broken pipe");
        for lost in [
            server("57P01"),
            server("70100"),
            server("08006"),
            query(X::Io(broken)),
            query(X::Protocol(
                "expected to read 4 bytes, got 0 bytes at EOF".into(),
            )),
            DbErr::Conn(RuntimeErr::Internal("gone".into())),
        ] {
            assert!(connection_lost(&lost), "{lost}");
        }
        for kept in [
            server("23505"),
            server("55P03"),
            server("40001"),
            query(X::RowNotFound),
            DbErr::RecordNotFound("x".into()),
        ] {
            assert!(!connection_lost(&kept), "{kept}");
        }
    }

    /// A lost connection turned into the crate's error on its way up is noted: a connection
    /// idle since before it is suspect from then on.
    #[test]
    fn a_lost_connection_on_its_way_up_is_noted() {
        use sea_orm::{DbErr, RuntimeErr};
        let before = process_ms();
        let e = crate::Error::from(DbErr::Conn(RuntimeErr::Internal("gone".into())));
        assert!(matches!(e, crate::Error::Db(DbErr::Conn(_))));
        let at = CONNECTION_LOST_AT.load(std::sync::atomic::Ordering::Relaxed);
        assert!(at >= before, "noted at {at}, asked at {before}");
        let idle_since_start = std::time::Duration::from_millis(process_ms());
        assert!(idle_since_a_loss(at, process_ms(), idle_since_start));
    }

    /// After a loss, a connection idle since before it is suspect; one returned since (it passed
    /// the pool's ping at its return) is not, and before any loss none is.
    #[test]
    fn connections_idle_since_a_loss_are_suspect() {
        let ms = std::time::Duration::from_millis;
        assert!(!idle_since_a_loss(0, 10_000, ms(9_000)), "no loss yet");
        assert!(
            idle_since_a_loss(5_000, 6_000, ms(1_500)),
            "idle since 4,500"
        );
        assert!(
            idle_since_a_loss(5_000, 6_000, ms(1_000)),
            "idle since the loss"
        );
        assert!(
            !idle_since_a_loss(5_000, 6_000, ms(200)),
            "returned at 5,800"
        );
        assert!(
            idle_since_a_loss(5_000, 100, ms(200)),
            "clock readings out of order"
        );
    }

    /// The SQL of the statements a connection ran since [`recording`] began to record them.
    pub(crate) type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// Records the SQL of every statement `db` runs from now on.
    pub(crate) fn recording(db: &mut DatabaseConnection) -> Seen {
        let seen = Seen::default();
        let sink = seen.clone();
        db.set_metric_callback(move |i| sink.lock().unwrap().push(i.statement.sql.clone()));
        seen
    }

    /// The fresh PostgreSQL and MySQL/MariaDB databases of [`every_backend`] (none where their
    /// URLs are unset), each recording its statements ([`recording`]).
    pub(crate) async fn servers_recording() -> Vec<(DatabaseConnection, Seen)> {
        let mut out = Vec::new();
        for mut db in every_backend().await {
            if db.get_database_backend() != DbBackend::Sqlite {
                let seen = recording(&mut db);
                out.push((db, seen));
            }
        }
        out
    }

    /// A migrated in-memory SQLite database.
    pub(crate) async fn memory_db() -> DatabaseConnection {
        let cfg = DatabaseConfig {
            url: "sqlite::memory:".into(),
            max_connections: 1,
            ..Default::default()
        };
        let db = connect(&cfg).await.unwrap();
        migrate(&db).await.unwrap();
        db
    }

    /// A migrated SQLite file at `path`, through a pool of one connection.
    pub(crate) async fn file_db(path: &std::path::Path) -> DatabaseConnection {
        let db = connect(&DatabaseConfig {
            url: format!("sqlite://{}?mode=rwc", path.display()),
            max_connections: 1,
            ..Default::default()
        })
        .await
        .unwrap();
        migrate(&db).await.unwrap();
        db
    }

    /// An in-memory SQLite database, plus a fresh migrated PostgreSQL and MySQL/MariaDB
    /// database for each of `XJOB_TEST_PG_URL` / `XJOB_TEST_MYSQL_URL` that is set (CI sets
    /// both): statements whose SQL differs per backend are tested on each.
    pub(crate) async fn every_backend() -> Vec<DatabaseConnection> {
        let mut out = vec![memory_db().await];
        for var in ["XJOB_TEST_PG_URL", "XJOB_TEST_MYSQL_URL"] {
            let Ok(base) = std::env::var(var) else {
                continue;
            };
            let name = format!("xjob_u{}", rand::random::<u32>());
            let admin = Database::connect(&base).await.unwrap();
            admin
                .execute_unprepared(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            admin.close().await.unwrap();
            let (head, _) = base.rsplit_once('/').unwrap();
            let db = connect(&DatabaseConfig {
                url: format!("{head}/{name}"),
                max_connections: 2,
                ..Default::default()
            })
            .await
            .unwrap();
            migrate(&db).await.unwrap();
            out.push(db);
        }
        out
    }

    /// A database migrated by a later build (a migration this build does not know is applied)
    /// keeps this build from starting: its node could keep leases by other rules than the
    /// running nodes' (`leases::LEASE_RULES`), and its writes could miss the later columns.
    #[tokio::test]
    async fn a_build_older_than_the_database_does_not_start() {
        let db = memory_db().await;
        migrate(&db).await.unwrap();
        db.execute_unprepared(
            "INSERT INTO seaql_migrations (version, applied_at) \
             VALUES ('m20991231_000001_from_a_later_build', 0)",
        )
        .await
        .unwrap();
        let err = migrate(&db).await.unwrap_err().to_string();
        assert!(err.contains("m20991231_000001_from_a_later_build"), "{err}");
    }

    /// The newest migrations (columns added to `xjob_node` once, indexes rebuilt) go down and
    /// up again on every backend, leaving the columns as they were; on PostgreSQL the console's
    /// indexes of the run table hold dispatched runs only, and all of them again once down.
    #[tokio::test]
    async fn the_newest_migrations_go_down_and_up_again() {
        use migration::MigratorTrait;
        for db in every_backend().await {
            let b = db.get_database_backend();
            let columns = |db: DatabaseConnection| async move {
                let m = migration::SchemaManager::new(&db);
                let mut out = Vec::new();
                for c in ["lease_until_ms", "dispatched_through", "lease_rules"] {
                    out.push(m.has_column("xjob_node", c).await.unwrap());
                }
                out
            };
            // on PostgreSQL: the predicates of `I_trigger_time` and `I_jobgroup`
            let partial = |db: DatabaseConnection| async move {
                if b != DbBackend::Postgres {
                    return Vec::new();
                }
                db.query_all_raw(Statement::from_string(
                    b,
                    "SELECT indexname, indexdef LIKE '%WHERE (fire_state = 0)' AS p \
                     FROM pg_indexes WHERE indexname IN ('I_trigger_time', 'I_jobgroup') \
                     ORDER BY indexname",
                ))
                .await
                .unwrap()
                .iter()
                .map(|r| r.try_get::<bool>("", "p").unwrap())
                .collect::<Vec<_>>()
            };
            let on_pg = |v: bool| {
                if b == DbBackend::Postgres {
                    vec![v; 2]
                } else {
                    vec![]
                }
            };
            assert_eq!(columns(db.clone()).await, [true; 3], "{b:?}");
            assert_eq!(partial(db.clone()).await, on_pg(true), "{b:?}");
            migration::Migrator::down(&db, Some(5)).await.unwrap();
            assert_eq!(columns(db.clone()).await, [false; 3], "{b:?}");
            assert_eq!(partial(db.clone()).await, on_pg(false), "{b:?}");
            migrate(&db).await.unwrap();
            assert_eq!(columns(db.clone()).await, [true; 3], "{b:?}");
            assert_eq!(partial(db.clone()).await, on_pg(true), "{b:?}");
        }
    }

    /// Two transactions taking two rows' locks in opposite orders: the database ends one of
    /// them, and that error is a lost race (run again); a unique key refusing a row is not.
    #[tokio::test]
    async fn a_deadlock_is_a_lost_race_and_a_refused_row_is_not() {
        use sea_orm::TransactionTrait;
        for db in every_backend().await {
            let backend = db.get_database_backend();
            if backend == DbBackend::Sqlite {
                continue;
            }
            let now = crate::clock::ms_to_naive(1_800_000_000_000);
            let a = groups::insert(&db, "a", "A", 0, None, now).await.unwrap();
            let b = groups::insert(&db, "b", "B", 0, None, now).await.unwrap();
            let touch = |id: i32| {
                Statement::from_sql_and_values(
                    backend,
                    port::placeholders(
                        backend,
                        "UPDATE xxl_job_group SET title = title WHERE id = ?",
                    )
                    .into_owned(),
                    [id.into()],
                )
            };
            let (t1, t2) = (db.begin().await.unwrap(), db.begin().await.unwrap());
            t1.execute_raw(touch(a)).await.unwrap();
            t2.execute_raw(touch(b)).await.unwrap();
            let (r1, r2) = tokio::join!(t1.execute_raw(touch(b)), t2.execute_raw(touch(a)));
            let lost: Vec<Error> = [r1, r2]
                .into_iter()
                .filter_map(|r| r.err().map(Error::from))
                .collect();
            assert_eq!(lost.len(), 1, "{backend:?}: one of them is ended");
            assert!(lost_race(&lost[0]), "{backend:?}: {}", lost[0]);
            let _ = (t1.rollback().await, t2.rollback().await);
            let dup = groups::insert(&db, "a", "A", 0, None, now).await;
            if let Err(e) = dup {
                assert!(!lost_race(&e), "{backend:?}: {e}");
            }
        }
    }

    /// PostgreSQL's generic plan for `stmt` (the plan a prepared statement settles on once its
    /// parameters' values no longer count), its lines joined by "; ".
    pub(crate) async fn pg_generic_plan(db: &DatabaseConnection, stmt: Statement) -> String {
        use sea_orm::{TransactionTrait, Value};
        let txn = db.begin().await.unwrap();
        txn.execute_unprepared("SET LOCAL plan_cache_mode = force_generic_plan")
            .await
            .unwrap();
        txn.execute_unprepared(&format!("PREPARE generic_plan AS {}", stmt.sql))
            .await
            .unwrap();
        // each value as an untyped literal: the server casts it to its parameter's type
        let args: Vec<String> = stmt
            .values
            .map(|v| v.0)
            .unwrap_or_default()
            .into_iter()
            .map(|v| {
                let text = match v {
                    Value::Int(Some(i)) => i.to_string(),
                    Value::BigInt(Some(i)) => i.to_string(),
                    Value::BigUnsigned(Some(i)) => i.to_string(),
                    Value::SmallInt(Some(i)) => i.to_string(),
                    Value::String(Some(s)) => s.to_string(),
                    Value::ChronoDateTime(Some(t)) => t.to_string(),
                    other => panic!("no literal for {other:?}"),
                };
                format!("'{}'", text.replace('\'', "''"))
            })
            .collect();
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("({})", args.join(", "))
        };
        let plan = txn
            .query_all_raw(Statement::from_string(
                DbBackend::Postgres,
                format!("EXPLAIN EXECUTE generic_plan{args}"),
            ))
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get::<String>("", "QUERY PLAN").unwrap())
            .collect::<Vec<_>>()
            .join("; ");
        txn.execute_unprepared("DEALLOCATE generic_plan")
            .await
            .unwrap();
        txn.rollback().await.unwrap();
        plan
    }

    /// SQLite's plan for `stmt`, its steps joined by "; ".
    pub(crate) async fn plan(db: &DatabaseConnection, stmt: Statement) -> String {
        let sql = format!("EXPLAIN QUERY PLAN {}", stmt.sql);
        let explain = Statement::from_sql_and_values(DbBackend::Sqlite, sql, stmt.values.unwrap());
        db.query_all_raw(explain)
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get::<String>("", "detail").unwrap())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// A pooled SQLite connection keeps a small page cache (the writer's own connection, not
    /// pooled, keeps its larger one).
    #[tokio::test]
    async fn pooled_sqlite_connections_keep_a_small_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let db = file_db(&dir.path().join("c.db")).await;
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT cache_size FROM pragma_cache_size",
            ))
            .await
            .unwrap()
            .unwrap();
        let kib: i64 = row.try_get("", "cache_size").unwrap();
        assert_eq!(kib, -SQLITE_POOL_CACHE_KIB);
        db.close().await.unwrap();
    }

    /// A transaction begun with [`begin_writing`] on a SQLite file holds the write lock from
    /// its start: another connection cannot commit between its read and its write, so its
    /// write never meets a stale snapshot (a plain deferred one, the control, fails with 517).
    #[tokio::test]
    async fn a_writing_transaction_on_sqlite_never_meets_a_stale_snapshot() {
        use sea_orm::TransactionTrait;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let db = file_db(&path).await;
        let other = rusqlite::Connection::open(&path).unwrap();
        let read =
            || Statement::from_string(DbBackend::Sqlite, "SELECT COUNT(*) FROM xxl_job_group");
        let write = || {
            Statement::from_string(
                DbBackend::Sqlite,
                "UPDATE xxl_job_lock SET lock_name = lock_name",
            )
        };
        let commit_elsewhere =
            || other.execute("UPDATE xxl_job_lock SET lock_name = lock_name", []);

        // the control: a deferred transaction reads, another connection commits, the write fails
        let txn = db.begin().await.unwrap();
        txn.query_one_raw(read()).await.unwrap();
        commit_elsewhere().unwrap();
        let stale = txn.execute_raw(write()).await;
        assert!(
            stale.as_ref().is_err_and(|e| e.to_string().contains("517")),
            "{stale:?}"
        );
        drop(txn);

        let txn = begin_writing(&db).await.unwrap();
        txn.query_one_raw(read()).await.unwrap();
        other.busy_timeout(std::time::Duration::ZERO).unwrap();
        assert!(
            commit_elsewhere().is_err(),
            "the write lock is this transaction's from its start"
        );
        txn.execute_raw(write()).await.unwrap();
        txn.commit().await.unwrap();
        commit_elsewhere().unwrap();
        db.close().await.unwrap();
    }

    /// SQLite URLs map to their file path; memory databases and other backends to none.
    #[test]
    fn sqlite_paths() {
        assert_eq!(
            sqlite_path("sqlite://data/x.db?mode=rwc").as_deref(),
            Some("data/x.db")
        );
        assert_eq!(sqlite_path("sqlite::memory:"), None);
        assert_eq!(sqlite_path("postgres://h/db"), None);
    }
}
