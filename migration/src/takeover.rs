//! Taking over an XXL-JOB database in place: the first migration finds XXL-JOB's tables already
//! there (an XXL-JOB 2.4, 3.0–3.4 or 3.5 database) and brings them to the shape it would have
//! created, keeping every row, before creating what is missing.
//!
//! What differs between XXL-JOB's schemas and xjob's (docs/protocol.md §8, §10.1):
//! - 3.5 renamed `xxl_job_group.title` and `xxl_job_info.job_desc` to `name`: renamed back;
//! - 3.5's `xxl_job_group.access_token` is xjob's per-group token and stays — except XXL-JOB's
//!   published seed value `default_token`, which is cleared (the group then takes the node's
//!   own token) and named in a warning;
//! - 2.4 lacks `xxl_job_user.token`; neither has xjob's columns (`time_zone`, `retry_interval`,
//!   `alarm_webhook` on jobs; `fire_time`, `fire_state`, `trigger_type`, `chain_depth` on runs):
//!   added with their defaults;
//! - columns too narrow for what xjob stores (2.4's 12-character group title, 50-character
//!   password column — an argon2 hash is ~100 — and 512-character params; an `int` registry or
//!   run id on PostgreSQL) are widened; on PostgreSQL the flag columns are made `smallint`;
//! - the run table's secondary indexes carry a different name in every XXL-JOB version: they are
//!   dropped and xjob's made by the caller; the registry's `i_g_k_v` becomes unique (it was not
//!   in 2.4) after its rows are cleared — they are heartbeats, renewed within 30 s;
//! - on PostgreSQL the id sequences are moved past the rows (a database loaded with explicit ids
//!   has sequences behind them).
//!
//! Console passwords stay as XXL-JOB hashed them (MD5 in 2.x, SHA-256 from 3.2): a user signs
//! in with the old password once and it is re-hashed with argon2id. Times XXL-JOB wrote stay as
//! written (its JVM's time zone); xjob writes UTC.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

/// Which XXL-JOB schema the tables are, as far as the migration cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Schema {
    /// 2.x – 3.1: MD5 passwords, no login token column.
    Two,
    /// 3.2 – 3.4: SHA-256 passwords, `xxl_job_user.token`.
    Three,
    /// 3.5 (upstream master): `name` columns and group tokens.
    ThreeFive,
}

/// XXL-JOB's published seed token (its sample configuration's and 3.5's seed groups').
const SEED_TOKEN: &str = "default_token";

/// Whether the first migration is taking over XXL-JOB's tables (they exist before it ran).
pub(crate) async fn found(m: &SchemaManager<'_>) -> Result<bool, DbErr> {
    m.has_table("xxl_job_info").await
}

/// Brings XXL-JOB's tables to the shape the first migration creates; the caller then creates
/// the indexes and rows that are missing.
pub(crate) async fn prepare(m: &SchemaManager<'_>) -> Result<(), DbErr> {
    let backend = m.get_database_backend();
    let schema = if m.has_column("xxl_job_group", "name").await?
        && !m.has_column("xxl_job_group", "title").await?
    {
        Schema::ThreeFive
    } else if m.has_column("xxl_job_user", "token").await? {
        Schema::Three
    } else {
        Schema::Two
    };
    if backend == DbBackend::Sqlite {
        sqlite_log_ids_are_never_reused(m).await?;
    }
    if schema == Schema::ThreeFive {
        rename(m, "xxl_job_group", "name", "title").await?;
        rename(m, "xxl_job_info", "name", "job_desc").await?;
    }
    let added: [(&str, ColumnDef); 8] = [
        (
            "xxl_job_user",
            ColumnDef::new(Alias::new("token"))
                .string_len(100)
                .null()
                .to_owned(),
        ),
        (
            "xxl_job_info",
            ColumnDef::new(Alias::new("time_zone"))
                .string_len(64)
                .null()
                .to_owned(),
        ),
        (
            "xxl_job_info",
            ColumnDef::new(Alias::new("retry_interval"))
                .integer()
                .not_null()
                .default(0)
                .to_owned(),
        ),
        (
            "xxl_job_info",
            ColumnDef::new(Alias::new("alarm_webhook"))
                .string_len(255)
                .null()
                .to_owned(),
        ),
        (
            "xxl_job_log",
            ColumnDef::new(Alias::new("fire_time"))
                .big_integer()
                .null()
                .to_owned(),
        ),
        (
            "xxl_job_log",
            ColumnDef::new(Alias::new("fire_state"))
                .big_integer()
                .not_null()
                .default(0)
                .to_owned(),
        ),
        (
            "xxl_job_log",
            ColumnDef::new(Alias::new("trigger_type"))
                .string_len(16)
                .null()
                .to_owned(),
        ),
        (
            "xxl_job_log",
            ColumnDef::new(Alias::new("chain_depth"))
                .small_integer()
                .not_null()
                .default(0)
                .to_owned(),
        ),
    ];
    for (table, mut col) in added {
        if !m.has_column(table, col.get_column_name()).await? {
            m.alter_table(
                Table::alter()
                    .table(Alias::new(table))
                    .add_column(&mut col)
                    .to_owned(),
            )
            .await?;
        }
    }
    widen(m).await?;
    let seeded = clear_seed_tokens(m).await?;
    // heartbeats: executors register again within 30 s; the index becomes unique below
    m.get_connection()
        .execute_unprepared("DELETE FROM xxl_job_registry")
        .await?;
    drop_secondary_indexes(m, "xxl_job_registry").await?;
    drop_secondary_indexes(m, "xxl_job_log").await?;
    if backend == DbBackend::Postgres {
        for table in [
            "xxl_job_group",
            "xxl_job_registry",
            "xxl_job_info",
            "xxl_job_logglue",
            "xxl_job_log",
            "xxl_job_log_report",
            "xxl_job_user",
        ] {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
                 (SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false) \
                 WHERE pg_get_serial_sequence('{table}', 'id') IS NOT NULL"
            );
            m.get_connection().execute_unprepared(&sql).await?;
        }
    }
    let note = match schema {
        Schema::Two => "XXL-JOB 2.x–3.1",
        Schema::Three => "XXL-JOB 3.2–3.4",
        Schema::ThreeFive => "XXL-JOB 3.5",
    };
    tracing::info!(
        schema = note,
        "took over an XXL-JOB database: its jobs, groups, runs, GLUE history and users are \
         xjob's now (stop every XXL-JOB admin on it); executors register again within 30 s"
    );
    if !seeded.is_empty() {
        tracing::warn!(
            groups = %seeded.join(", "),
            "these executor groups had XXL-JOB's published token `{SEED_TOKEN}`; it was \
             cleared, so their executors need this node's access token (or give each group a \
             token of its own in the console)"
        );
    }
    Ok(())
}

/// Renames a column (3.5's `name` back to 2.4's name).
async fn rename(m: &SchemaManager<'_>, table: &str, from: &str, to: &str) -> Result<(), DbErr> {
    m.alter_table(
        Table::alter()
            .table(Alias::new(table))
            .rename_column(Alias::new(from), Alias::new(to))
            .to_owned(),
    )
    .await
}

/// Widens the columns XXL-JOB made narrower than what xjob stores; on PostgreSQL also the
/// integer types the entities read (a port of XXL-JOB's MySQL tables may have used `integer`
/// for ids and flags). SQLite stores any length in any column: nothing to do.
async fn widen(m: &SchemaManager<'_>) -> Result<(), DbErr> {
    let statements: &[&str] = match m.get_database_backend() {
        DbBackend::MySql => &[
            "ALTER TABLE xxl_job_group MODIFY title VARCHAR(64) NOT NULL",
            "ALTER TABLE xxl_job_user MODIFY password VARCHAR(255) NOT NULL",
            "ALTER TABLE xxl_job_info MODIFY executor_param TEXT NULL",
            "ALTER TABLE xxl_job_log MODIFY executor_param TEXT NULL",
            "ALTER TABLE xxl_job_registry MODIFY id BIGINT NOT NULL AUTO_INCREMENT",
        ],
        DbBackend::Postgres => &[
            "ALTER TABLE xxl_job_group ALTER COLUMN title TYPE VARCHAR(64), \
             ALTER COLUMN address_type TYPE SMALLINT",
            "ALTER TABLE xxl_job_user ALTER COLUMN password TYPE VARCHAR(255), \
             ALTER COLUMN role TYPE SMALLINT",
            "ALTER TABLE xxl_job_info ALTER COLUMN executor_param TYPE TEXT, \
             ALTER COLUMN trigger_status TYPE SMALLINT",
            "ALTER TABLE xxl_job_log ALTER COLUMN executor_param TYPE TEXT, \
             ALTER COLUMN id TYPE BIGINT, ALTER COLUMN alarm_status TYPE SMALLINT",
            "ALTER TABLE xxl_job_registry ALTER COLUMN id TYPE BIGINT",
        ],
        _ => &[],
    };
    for s in statements {
        m.get_connection().execute_unprepared(s).await?;
    }
    Ok(())
}

/// Clears XXL-JOB's published seed token from the groups that carry it; answers their app
/// names.
async fn clear_seed_tokens(m: &SchemaManager<'_>) -> Result<Vec<String>, DbErr> {
    if !m.has_column("xxl_job_group", "access_token").await? {
        return Ok(Vec::new());
    }
    let c = m.get_connection();
    let backend = m.get_database_backend();
    let rows = c
        .query_all_raw(Statement::from_string(
            backend,
            format!("SELECT app_name FROM xxl_job_group WHERE access_token = '{SEED_TOKEN}'"),
        ))
        .await?;
    let mut apps = Vec::with_capacity(rows.len());
    for r in rows {
        apps.push(r.try_get_by_index::<String>(0)?);
    }
    c.execute_unprepared(&format!(
        "UPDATE xxl_job_group SET access_token = NULL WHERE access_token = '{SEED_TOKEN}'"
    ))
    .await?;
    Ok(apps)
}

/// Drops every index of `table` but its primary key (XXL-JOB's versions name them
/// differently; the first migration then creates xjob's).
async fn drop_secondary_indexes(m: &SchemaManager<'_>, table: &str) -> Result<(), DbErr> {
    let c = m.get_connection();
    let backend = m.get_database_backend();
    let names = |sql: String| async move {
        let rows = c
            .query_all_raw(Statement::from_string(backend, sql))
            .await?;
        rows.iter()
            .map(|r| r.try_get_by_index::<String>(0))
            .collect::<Result<Vec<_>, _>>()
    };
    match backend {
        DbBackend::MySql => {
            let found = names(format!(
                "SELECT DISTINCT CAST(INDEX_NAME AS CHAR) FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}' \
                 AND INDEX_NAME <> 'PRIMARY'"
            ))
            .await?;
            for name in found {
                c.execute_unprepared(&format!("ALTER TABLE {table} DROP INDEX `{name}`"))
                    .await?;
            }
        }
        DbBackend::Postgres => {
            // unique constraints own their indexes: dropped as constraints
            let constraints = names(format!(
                "SELECT conname::text FROM pg_constraint \
                 WHERE conrelid = '{table}'::regclass AND contype = 'u'"
            ))
            .await?;
            for name in constraints {
                c.execute_unprepared(&format!("ALTER TABLE {table} DROP CONSTRAINT \"{name}\""))
                    .await?;
            }
            let found = names(format!(
                "SELECT i.relname::text FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
                 WHERE x.indrelid = '{table}'::regclass AND NOT x.indisprimary"
            ))
            .await?;
            for name in found {
                c.execute_unprepared(&format!("DROP INDEX \"{name}\""))
                    .await?;
            }
        }
        _ => {
            // (a UNIQUE written in the table's definition has an index without SQL, which
            // cannot be dropped; it stays beside xjob's)
            let found = names(format!(
                "SELECT name FROM sqlite_master WHERE type = 'index' \
                 AND tbl_name = '{table}' AND sql IS NOT NULL"
            ))
            .await?;
            for name in found {
                c.execute_unprepared(&format!("DROP INDEX \"{name}\""))
                    .await?;
            }
        }
    }
    Ok(())
}

/// On a SQLite file xjob reserves run ids by moving the run table's AUTOINCREMENT counter; a
/// run table declared without AUTOINCREMENT has none, and its ids could be handed out twice.
async fn sqlite_log_ids_are_never_reused(m: &SchemaManager<'_>) -> Result<(), DbErr> {
    let row = m
        .get_connection()
        .query_one_raw(Statement::from_string(
            DbBackend::Sqlite,
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'xxl_job_log'",
        ))
        .await?;
    let sql = match row {
        Some(r) => r.try_get_by_index::<String>(0)?,
        None => String::new(),
    };
    if sql.to_ascii_uppercase().contains("AUTOINCREMENT") {
        Ok(())
    } else {
        Err(DbErr::Migration(
            "xxl_job_log must be declared with `id INTEGER PRIMARY KEY AUTOINCREMENT` to be \
             taken over on SQLite (xjob reserves run ids through its counter)"
                .into(),
        ))
    }
}
