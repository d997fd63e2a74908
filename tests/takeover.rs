//! Taking over an XXL-JOB database in place (docs/protocol.md §8, §10.1): XXL-JOB's tables of
//! 2.4, 3.4 and 3.5 — written here from the schema's facts, in each database's dialect (XXL-JOB
//! ships MySQL DDL; its PostgreSQL and SQLite equivalents are what a port looks like) — with
//! seed rows, then xjob's migration and engine on them: the seed administrator signs in with
//! XXL-JOB's seed password (MD5 in 2.4, SHA-256 from 3.2), which is re-hashed; the seed jobs,
//! groups and past runs are there; 3.5's own group tokens carry over and its published seed
//! token does not; new rows get fresh ids; a second migration changes nothing.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use xjob::console::jobs::JobQuery;
use xjob::console::{Console, Paging};
use xjob::prelude::*;

/// XXL-JOB's schema versions as the migration tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V24,
    V34,
    V35,
}

/// A column type, rendered per database.
#[derive(Clone, Copy)]
enum Ty {
    /// `int` auto-increment primary key.
    Id,
    /// `bigint` auto-increment primary key.
    BigId,
    Int,
    BigInt,
    Tiny,
    Varchar(u32),
    Text,
    MediumText,
    DateTime,
}

/// One column: name, type, NOT NULL, default.
type Col = (&'static str, Ty, bool, Option<&'static str>);

fn render(db: DbBackend, ty: Ty) -> String {
    match (db, ty) {
        (DbBackend::MySql, Ty::Id) => "INT NOT NULL AUTO_INCREMENT PRIMARY KEY".into(),
        (DbBackend::MySql, Ty::BigId) => "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY".into(),
        (DbBackend::Postgres, Ty::Id) => "SERIAL PRIMARY KEY".into(),
        (DbBackend::Postgres, Ty::BigId) => "BIGSERIAL PRIMARY KEY".into(),
        (_, Ty::Id | Ty::BigId) => "INTEGER PRIMARY KEY AUTOINCREMENT".into(),
        (DbBackend::MySql, Ty::Int) => "INT(11)".into(),
        (_, Ty::Int) => "INTEGER".into(),
        (DbBackend::MySql, Ty::BigInt) => "BIGINT(13)".into(),
        (_, Ty::BigInt) => "BIGINT".into(),
        (DbBackend::MySql, Ty::Tiny) => "TINYINT(4)".into(),
        (_, Ty::Tiny) => "SMALLINT".into(),
        (_, Ty::Varchar(n)) => format!("VARCHAR({n})"),
        (DbBackend::MySql, Ty::MediumText) => "MEDIUMTEXT".into(),
        (_, Ty::Text | Ty::MediumText) => "TEXT".into(),
        (DbBackend::Postgres, Ty::DateTime) => "TIMESTAMP".into(),
        (_, Ty::DateTime) => "DATETIME".into(),
    }
}

/// XXL-JOB's tables of `v`: (table, columns, indexes (name, columns, unique)).
#[allow(clippy::type_complexity)]
fn tables(
    v: Version,
) -> Vec<(
    &'static str,
    Vec<Col>,
    Vec<(&'static str, &'static str, bool)>,
)> {
    use Ty::*;
    let (title, name_35) = match v {
        Version::V24 => (("title", Varchar(12)), false),
        Version::V34 => (("title", Varchar(64)), false),
        Version::V35 => (("name", Varchar(64)), true),
    };
    let param = if v == Version::V24 {
        Varchar(512)
    } else {
        Text
    };
    let mut group: Vec<Col> = vec![
        ("id", Id, true, None),
        ("app_name", Varchar(64), true, None),
        (title.0, title.1, true, None),
        ("address_type", Tiny, true, Some("0")),
        ("address_list", Text, false, None),
        ("update_time", DateTime, false, None),
    ];
    if name_35 {
        group.push(("access_token", Varchar(255), false, None));
    }
    let group_idx = if name_35 {
        vec![("i_app_name", "app_name", true)]
    } else {
        vec![]
    };
    let registry: Vec<Col> = vec![
        ("id", if v == Version::V24 { Id } else { BigId }, true, None),
        ("registry_group", Varchar(50), true, None),
        ("registry_key", Varchar(255), true, None),
        ("registry_value", Varchar(255), true, None),
        ("update_time", DateTime, false, None),
    ];
    let registry_idx = vec![(
        "i_g_k_v",
        "registry_group, registry_key, registry_value",
        v != Version::V24,
    )];
    let info: Vec<Col> = vec![
        ("id", Id, true, None),
        ("job_group", Int, true, None),
        (
            if name_35 { "name" } else { "job_desc" },
            Varchar(255),
            true,
            None,
        ),
        ("add_time", DateTime, false, None),
        ("update_time", DateTime, false, None),
        ("author", Varchar(64), false, None),
        ("alarm_email", Varchar(255), false, None),
        ("schedule_type", Varchar(50), true, Some("'NONE'")),
        ("schedule_conf", Varchar(128), false, None),
        ("misfire_strategy", Varchar(50), true, Some("'DO_NOTHING'")),
        ("executor_route_strategy", Varchar(50), false, None),
        ("executor_handler", Varchar(255), false, None),
        ("executor_param", param, false, None),
        ("executor_block_strategy", Varchar(50), false, None),
        ("executor_timeout", Int, true, Some("0")),
        ("executor_fail_retry_count", Int, true, Some("0")),
        ("glue_type", Varchar(50), true, None),
        ("glue_source", MediumText, false, None),
        ("glue_remark", Varchar(128), false, None),
        ("glue_updatetime", DateTime, false, None),
        ("child_jobid", Varchar(255), false, None),
        ("trigger_status", Tiny, true, Some("0")),
        ("trigger_last_time", BigInt, true, Some("0")),
        ("trigger_next_time", BigInt, true, Some("0")),
    ];
    let glue: Vec<Col> = vec![
        ("id", Id, true, None),
        ("job_id", Int, true, None),
        ("glue_type", Varchar(50), false, None),
        ("glue_source", MediumText, false, None),
        ("glue_remark", Varchar(128), true, None),
        ("add_time", DateTime, false, None),
        ("update_time", DateTime, false, None),
    ];
    let log: Vec<Col> = vec![
        ("id", BigId, true, None),
        ("job_group", Int, true, None),
        ("job_id", Int, true, None),
        ("executor_address", Varchar(255), false, None),
        ("executor_handler", Varchar(255), false, None),
        ("executor_param", param, false, None),
        ("executor_sharding_param", Varchar(20), false, None),
        ("executor_fail_retry_count", Int, true, Some("0")),
        ("trigger_time", DateTime, false, None),
        ("trigger_code", Int, true, None),
        ("trigger_msg", Text, false, None),
        ("handle_time", DateTime, false, None),
        ("handle_code", Int, true, None),
        ("handle_msg", Text, false, None),
        ("alarm_status", Tiny, true, Some("0")),
    ];
    let log_idx = match v {
        Version::V24 => vec![
            ("I_trigger_time", "trigger_time", false),
            ("I_handle_code", "handle_code", false),
        ],
        Version::V34 => vec![
            ("I_trigger_time", "trigger_time", false),
            ("I_handle_code", "handle_code", false),
            ("I_jobgroup", "job_group", false),
            ("I_jobid", "job_id", false),
        ],
        Version::V35 => vec![
            ("i_trigger_time", "trigger_time", false),
            ("i_handle_code", "handle_code", false),
            ("i_job_group", "job_group", false),
            ("i_job_id", "job_id", false),
        ],
    };
    let report: Vec<Col> = vec![
        ("id", Id, true, None),
        ("trigger_day", DateTime, false, None),
        ("running_count", Int, true, Some("0")),
        ("suc_count", Int, true, Some("0")),
        ("fail_count", Int, true, Some("0")),
        ("update_time", DateTime, false, None),
    ];
    let mut user: Vec<Col> = vec![
        ("id", Id, true, None),
        ("username", Varchar(50), true, None),
        (
            "password",
            Varchar(if v == Version::V24 { 50 } else { 100 }),
            true,
            None,
        ),
    ];
    if v != Version::V24 {
        user.push(("token", Varchar(100), false, None));
    }
    user.push(("role", Tiny, true, None));
    user.push(("permission", Varchar(255), false, None));
    let lock: Vec<Col> = vec![("lock_name", Varchar(50), true, None)];
    vec![
        ("xxl_job_group", group, group_idx),
        ("xxl_job_registry", registry, registry_idx),
        ("xxl_job_info", info, vec![]),
        ("xxl_job_logglue", glue, vec![]),
        ("xxl_job_log", log, log_idx),
        (
            "xxl_job_log_report",
            report,
            vec![("i_trigger_day", "trigger_day", true)],
        ),
        ("xxl_job_user", user, vec![("i_username", "username", true)]),
        ("xxl_job_lock", lock, vec![]),
    ]
}

/// XXL-JOB's seed password `123456`, as `v` stores it.
fn seed_hash(v: Version) -> &'static str {
    match v {
        Version::V24 => "e10adc3949ba59abbe56e057f20f883e",
        _ => "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
    }
}

/// The statements that make `v`'s tables and seed rows on `db`.
fn ddl(db: DbBackend, v: Version) -> Vec<String> {
    let mut out = Vec::new();
    for (table, cols, idx) in tables(v) {
        let body = cols
            .iter()
            .map(|(name, ty, not_null, default)| {
                let mut c = format!("{name} {}", render(db, *ty));
                if *not_null && !matches!(ty, Ty::Id | Ty::BigId) {
                    c.push_str(" NOT NULL");
                }
                if let Some(d) = default {
                    c.push_str(&format!(" DEFAULT {d}"));
                }
                c
            })
            .collect::<Vec<_>>()
            .join(", ");
        let pk = if table == "xxl_job_lock" {
            ", PRIMARY KEY (lock_name)"
        } else {
            ""
        };
        let tail = if db == DbBackend::MySql {
            " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
        } else {
            ""
        };
        out.push(format!("CREATE TABLE {table} ({body}{pk}){tail}"));
        for (name, cols, unique) in idx {
            let u = if unique { "UNIQUE " } else { "" };
            out.push(format!("CREATE {u}INDEX {name} ON {table} ({cols})"));
        }
    }
    let (title, desc) = if v == Version::V35 {
        ("name", "name")
    } else {
        ("title", "job_desc")
    };
    // (recent: older runs would be the retention's to delete)
    let at = (chrono::Utc::now() - chrono::Duration::hours(1))
        .format("'%Y-%m-%d %H:%M:%S'")
        .to_string();
    let at = at.as_str();
    if v == Version::V35 {
        out.push(format!(
            "INSERT INTO xxl_job_group (id, app_name, {title}, address_type, address_list, \
             access_token, update_time) VALUES \
             (1, 'xxl-job-executor-sample', 'Sample', 0, NULL, 'default_token', {at}), \
             (2, 'own-token-app', 'Own token', 0, NULL, 'tok-own-0123456789abcdef', {at})"
        ));
    } else {
        out.push(format!(
            "INSERT INTO xxl_job_group (id, app_name, {title}, address_type, address_list, \
             update_time) VALUES (1, 'xxl-job-executor-sample', 'Sample', 0, NULL, {at})"
        ));
    }
    out.push(format!(
        "INSERT INTO xxl_job_info (id, job_group, {desc}, add_time, update_time, author, \
         alarm_email, schedule_type, schedule_conf, misfire_strategy, executor_route_strategy, \
         executor_handler, executor_param, executor_block_strategy, executor_timeout, \
         executor_fail_retry_count, glue_type, glue_source, glue_remark, glue_updatetime, \
         child_jobid) VALUES (1, 1, 'demo job one', {at}, {at}, 'XXL', '', 'CRON', \
         '0 0 0 * * ? *', 'DO_NOTHING', 'FIRST', 'demoJobHandler', '', 'SERIAL_EXECUTION', \
         0, 0, 'BEAN', '', 'GLUE init', {at}, '')"
    ));
    out.push(format!(
        "INSERT INTO xxl_job_log (id, job_group, job_id, executor_address, executor_handler, \
         executor_param, executor_fail_retry_count, trigger_time, trigger_code, trigger_msg, \
         handle_time, handle_code, handle_msg, alarm_status) VALUES (7, 1, 1, \
         'http://10.0.0.5:9999/', 'demoJobHandler', '', 0, {at}, 200, 'sent', {at}, 200, \
         'done under XXL-JOB', 1)"
    ));
    out.push(format!(
        "INSERT INTO xxl_job_registry (id, registry_group, registry_key, registry_value, \
         update_time) VALUES (1, 'EXECUTOR', 'xxl-job-executor-sample', \
         'http://10.0.0.5:9999/', {at})"
    ));
    out.push(format!(
        "INSERT INTO xxl_job_logglue (id, job_id, glue_type, glue_source, glue_remark, \
         add_time, update_time) VALUES (1, 1, 'GLUE_SHELL', 'echo hi', 'first version', {at}, \
         {at})"
    ));
    out.push(format!(
        "INSERT INTO xxl_job_user (id, username, password, role, permission) VALUES \
         (1, 'admin', '{}', 1, NULL)",
        seed_hash(v)
    ));
    out.push("INSERT INTO xxl_job_lock (lock_name) VALUES ('schedule_lock')".into());
    out
}

async fn scalar(db: &DatabaseConnection, sql: &str) -> Option<String> {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .expect(sql)?;
    row.try_get_by_index::<Option<String>>(0).expect(sql)
}

/// Loads `v`'s tables into the empty database at `url`, then runs xjob on it.
async fn take_over(url: &str, v: Version, dir: &std::path::Path) {
    let db = sea_orm::Database::connect(url).await.expect("connect");
    let backend = db.get_database_backend();
    for s in ddl(backend, v) {
        db.execute_unprepared(&s).await.expect(&s);
    }
    xjob::testing::store::migrate(&db)
        .await
        .expect("the migration takes the tables over");

    let mut cfg = test_config(dir);
    cfg.database.url = url.to_string();
    let engine = Engine::builder(cfg)
        .database(db.clone())
        .log_dir(dir.join("joblogs"))
        .start()
        .await
        .expect("engine starts on the taken-over database");
    let console = Console::new(engine.clone());

    // the seed administrator signs in with XXL-JOB's seed password; the hash is re-hashed
    let login = console
        .login("admin", "123456", "127.0.0.1")
        .await
        .expect("the seed administrator signs in");
    let stored = scalar(
        &db,
        "SELECT password FROM xxl_job_user WHERE username = 'admin'",
    )
    .await
    .expect("password");
    assert!(
        stored.starts_with("$argon2id$"),
        "{v:?}: re-hashed, {stored}"
    );
    assert!(
        console
            .login("admin", "1234567", "127.0.0.1")
            .await
            .is_err(),
        "{v:?}"
    );

    // the seed job and group, by their 2.4 names whatever the version called them
    let who = console.authenticate(&login.token).await.expect("session");
    let jobs = console
        .list_jobs(&who, &JobQuery::default())
        .await
        .expect("jobs");
    let job = jobs.items.iter().find(|j| j.id == 1).expect("seed job");
    assert_eq!(job.job_desc, "demo job one", "{v:?}");
    let title = scalar(&db, "SELECT title FROM xxl_job_group WHERE id = 1").await;
    assert_eq!(title.as_deref(), Some("Sample"), "{v:?}");

    // 3.5's own token carries over; its published seed token does not
    let token = |id: i32| {
        let db = db.clone();
        async move {
            scalar(
                &db,
                &format!("SELECT access_token FROM xxl_job_group WHERE id = {id}"),
            )
            .await
        }
    };
    assert_eq!(token(1).await, None, "{v:?}: `default_token` is cleared");
    if v == Version::V35 {
        assert_eq!(token(2).await.as_deref(), Some("tok-own-0123456789abcdef"));
    }

    // heartbeats are cleared (executors register again); the past run is there
    let registered = db
        .query_one_raw(Statement::from_string(
            backend,
            "SELECT COUNT(*) FROM xxl_job_registry WHERE registry_key = 'xxl-job-executor-sample'",
        ))
        .await
        .expect("count")
        .expect("a row")
        .try_get_by_index::<i64>(0)
        .expect("a number");
    assert_eq!(registered, 0, "{v:?}");
    let runs = engine.runs(1, Paging::first(10)).await.expect("runs");
    let old = runs
        .items
        .iter()
        .find(|r| r.id == 7)
        .unwrap_or_else(|| panic!("{v:?}: the past run, in {:?}", runs.items));
    assert_eq!(old.handle_msg.as_deref(), Some("done under XXL-JOB"));

    // new rows take fresh ids: a run (the group has no executor yet: a trigger failure) and a
    // group
    engine
        .trigger_job(1, Some("after takeover".into()), None)
        .await
        .expect("trigger");
    eventually("the new run is recorded", 20, || {
        let engine = engine.clone();
        async move {
            engine
                .runs(1, Paging::first(10))
                .await
                .is_ok_and(|p| p.items.iter().any(|r| r.id > 7 && r.trigger_code != 0))
        }
    })
    .await;
    let extra = engine
        .ensure_group("another-app", "Another")
        .await
        .expect("a new group");
    assert!(
        extra > if v == Version::V35 { 2 } else { 1 },
        "{v:?}: {extra}"
    );

    // a second migration finds nothing to do
    xjob::testing::store::migrate(&db)
        .await
        .expect("migrating again");
    engine
        .stop(std::time::Duration::from_secs(5))
        .await
        .expect("stop");
    db.close().await.expect("close");
}

const VERSIONS: [Version; 3] = [Version::V24, Version::V34, Version::V35];

#[actix_rt::test]
async fn xxl_job_databases_are_taken_over_on_sqlite() {
    for v in VERSIONS {
        let dir = tempfile::tempdir().unwrap();
        take_over(&sqlite_url(dir.path()), v, dir.path()).await;
    }
}

#[test]
fn xxl_job_databases_are_taken_over_on_postgresql() {
    let Some(base) = database_url("XJOB_TEST_PG_URL") else {
        return;
    };
    for v in VERSIONS {
        let url = fresh_database(&base);
        let dir = tempfile::tempdir().unwrap();
        actix_rt::System::new().block_on(take_over(&url, v, dir.path()));
    }
}

#[test]
fn xxl_job_databases_are_taken_over_on_mysql() {
    let Some(base) = database_url("XJOB_TEST_MYSQL_URL") else {
        return;
    };
    for v in VERSIONS {
        let url = fresh_database(&base);
        let dir = tempfile::tempdir().unwrap();
        actix_rt::System::new().block_on(take_over(&url, v, dir.path()));
    }
}

/// A SQLite run table without AUTOINCREMENT cannot be taken over (xjob reserves run ids through
/// its counter): the migration says so and changes nothing the engine would use.
#[actix_rt::test]
async fn a_sqlite_run_table_without_autoincrement_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = sea_orm::Database::connect(&sqlite_url(dir.path()))
        .await
        .unwrap();
    for s in ddl(DbBackend::Sqlite, Version::V24) {
        let s = if s.starts_with("CREATE TABLE xxl_job_log (") {
            s.replacen(
                "INTEGER PRIMARY KEY AUTOINCREMENT",
                "INTEGER PRIMARY KEY",
                1,
            )
        } else {
            s
        };
        db.execute_unprepared(&s).await.unwrap();
    }
    let err = xjob::testing::store::migrate(&db)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("AUTOINCREMENT"), "{err}");
    assert!(
        scalar(&db, "SELECT job_desc FROM xxl_job_info WHERE id = 1")
            .await
            .is_some()
    );
    db.close().await.unwrap();
}
