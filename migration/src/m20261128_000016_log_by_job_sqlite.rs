//! On SQLite, the log table's rows are found by job through a side index written in sorted
//! batches, not through `uk_job_fire` (`job_id`, `fire_time`), which every run's row paid for.
//!
//! `uk_job_fire` keeps each job's entries together, so with thousands of jobs every new row
//! went into a leaf of its own job's, and every commit wrote one WAL frame (and, later, one
//! checkpoint copy) per job it touched: most of a row's cost once the table is a minute old,
//! and growing with it (BENCHMARKS.md, 2026-11-27, f294331 and 2026-11-27, 3e17be7). Here:
//! - the constraint stays, as `uk_fire_job` (`fire_time`, `job_id`): the same columns, so the
//!   same uniqueness (and `ON CONFLICT (job_id, fire_time)`), kept in time order, so a row's
//!   entry goes where the previous one went;
//! - `xjob_log_by_job` (`job_id`, `fire_key`, `log_id`, `WITHOUT ROWID`) holds every run below
//!   `xjob_log_by_job_mark.next_id`; the writer indexes the runs above it every few seconds,
//!   sorted by job, in one transaction, and moves the mark (`store::log_by_job`). A job's
//!   entries of the interval then share its leaf and one WAL frame;
//! - a read by job takes the index's ids and the runs at or above the mark (a walk of the
//!   last seconds' rows); deleting a row, or moving it to another job or time, moves its entry
//!   (triggers: they run on deletes and on such updates, never on inserts).
//!
//! `fire_key` is `fire_time`, or the smallest 64-bit integer for a run without one (manual
//! triggers, workflow steps): a key column cannot be NULL. PostgreSQL and MySQL, shared by
//! several nodes, keep `uk_job_fire`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const UP: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS xjob_log_by_job (job_id INTEGER NOT NULL, \
     fire_key INTEGER NOT NULL, log_id INTEGER NOT NULL, \
     PRIMARY KEY (job_id, fire_key, log_id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS xjob_log_by_job_mark (id INTEGER PRIMARY KEY CHECK (id = 1), \
     next_id INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO xjob_log_by_job (job_id, fire_key, log_id) \
     SELECT job_id, coalesce(fire_time, -9223372036854775808), id FROM xxl_job_log \
     ORDER BY 1, 2, 3",
    // every row is indexed; a journalled fire without its row yet (left by a stopped node) is
    // at or above the mark, which the writer's first pass indexes
    "INSERT OR IGNORE INTO xjob_log_by_job_mark (id, next_id) VALUES (1, min(\
     coalesce((SELECT max(id) FROM xxl_job_log), 0) + 1, \
     coalesce((SELECT min(first_log_id) FROM xjob_fire_journal), 9223372036854775807)))",
    "CREATE TRIGGER IF NOT EXISTS xjob_log_by_job_delete AFTER DELETE ON xxl_job_log BEGIN \
     DELETE FROM xjob_log_by_job WHERE job_id = old.job_id \
     AND fire_key = coalesce(old.fire_time, -9223372036854775808) AND log_id = old.id; END",
    "CREATE TRIGGER IF NOT EXISTS xjob_log_by_job_update AFTER UPDATE OF id, job_id, fire_time \
     ON xxl_job_log BEGIN \
     DELETE FROM xjob_log_by_job WHERE job_id = old.job_id \
     AND fire_key = coalesce(old.fire_time, -9223372036854775808) AND log_id = old.id; \
     INSERT OR IGNORE INTO xjob_log_by_job (job_id, fire_key, log_id) \
     VALUES (new.job_id, coalesce(new.fire_time, -9223372036854775808), new.id); END",
    "CREATE UNIQUE INDEX IF NOT EXISTS uk_fire_job ON xxl_job_log (fire_time, job_id)",
    "DROP INDEX IF EXISTS uk_job_fire",
];

const DOWN: &[&str] = &[
    "CREATE UNIQUE INDEX IF NOT EXISTS uk_job_fire ON xxl_job_log (job_id, fire_time)",
    "DROP INDEX IF EXISTS uk_fire_job",
    "DROP TRIGGER IF EXISTS xjob_log_by_job_update",
    "DROP TRIGGER IF EXISTS xjob_log_by_job_delete",
    "DROP TABLE IF EXISTS xjob_log_by_job_mark",
    "DROP TABLE IF EXISTS xjob_log_by_job",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::on_sqlite(m, UP).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::on_sqlite(m, DOWN).await
    }
}
