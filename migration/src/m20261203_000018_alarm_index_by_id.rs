//! On PostgreSQL, `i_alarm_fire` becomes an index of run ids over the rows its readers look for:
//! dispatched runs whose alarm state is unchecked (`alarm_status = 0 AND fire_state = 0`: runs
//! in flight and failures the fail monitor has not handled).
//!
//! Its readers (the fail monitor's look for failures, the lost-result checks) ask for those rows
//! in id order with a limit. Indexed by `(alarm_status, fire_state)`, every entry had the same
//! key, and the planner preferred walking the primary key in id order, filtering every row of the
//! table: measured at 340,000 runs, 87–124 ms per look that found nothing, every few seconds on
//! every node. Indexed by id, the same look reads only the rows it is after (0.07 ms). Pending
//! fires (`fire_state = 1`) no longer enter the index at all. MySQL keeps its full index (its
//! secondary indexes end with the primary key, so it is already in id order); SQLite keeps the
//! one of migration 000015 (its plans are pinned by a test).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const UP: &[&str] = &[
    "DROP INDEX IF EXISTS i_alarm_fire",
    "CREATE INDEX i_alarm_fire ON xxl_job_log (id) WHERE alarm_status = 0 AND fire_state = 0",
];

const DOWN: &[&str] = &[
    "DROP INDEX IF EXISTS i_alarm_fire",
    "CREATE INDEX i_alarm_fire ON xxl_job_log (alarm_status, fire_state) WHERE alarm_status = 0",
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
