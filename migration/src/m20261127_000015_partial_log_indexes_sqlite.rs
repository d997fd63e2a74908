//! On SQLite too, the two indexes of `xxl_job_log` that serve the scheduler's own reads keep
//! only the rows those reads look for (as on PostgreSQL since migration 000009): `i_fire_state`
//! the fires not yet dispatched (`fire_state <> 0`), `i_alarm_fire` the runs whose alarm state is
//! unchecked (`alarm_status = 0`). A dispatched, successful run then belongs to neither, so its
//! row is written with two index entries fewer. SQLite uses a partial index only for a query that
//! names its predicate: every read of these indexes names it (`store::logs`), and a test pins
//! their plans. MySQL has no partial indexes and keeps the full ones.

use sea_orm_migration::prelude::*;

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
        crate::on_sqlite(m, UP).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::on_sqlite(m, DOWN).await
    }
}
