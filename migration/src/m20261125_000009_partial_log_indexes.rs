//! On PostgreSQL, the two indexes of `xxl_job_log` that serve the scheduler's own reads keep
//! only the rows those reads look for: `i_fire_state` the fires not yet dispatched
//! (`fire_state <> 0`), `i_alarm_fire` the runs whose alarm state is unchecked (in flight, and
//! failures the fail monitor has not handled). A run's final update (a non-HOT update, which
//! writes an entry into every index its new row belongs to) then adds two index entries fewer:
//! a dispatched, successful run belongs to neither. Every query of these indexes names a value
//! the predicate holds (`fire_state = 1`, `fire_state > 1`, `alarm_status = 0`). MySQL has no
//! partial indexes and keeps the full ones; SQLite has them since migration 000015.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const UP: &[&str] = &[
    "DROP INDEX IF EXISTS i_fire_state",
    "CREATE INDEX i_fire_state ON xxl_job_log (fire_state, fire_time) WHERE fire_state <> 0",
    "DROP INDEX IF EXISTS i_alarm_fire",
    "CREATE INDEX i_alarm_fire ON xxl_job_log (alarm_status, fire_state) WHERE alarm_status = 0",
];

const DOWN: &[&str] = &[
    "DROP INDEX IF EXISTS i_fire_state",
    "CREATE INDEX i_fire_state ON xxl_job_log (fire_state, fire_time)",
    "DROP INDEX IF EXISTS i_alarm_fire",
    "CREATE INDEX i_alarm_fire ON xxl_job_log (alarm_status, fire_state)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::only_on(m, DbBackend::Postgres, UP).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::only_on(m, DbBackend::Postgres, DOWN).await
    }
}
