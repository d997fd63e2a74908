//! Drops two indexes of `xxl_job_log` that every fire paid for and no statement needs.
//!
//! Each pending fire inserts a row into every index of the table, and its final update moves
//! it in every index whose column it changes. `I_jobid` (`job_id`) is the prefix of the unique
//! `uk_job_fire` (`job_id`, `fire_time`), which serves every lookup by job. `I_handle_code`
//! served the reads of running runs (lost results); those now go through `i_alarm_fire`
//! (a run in flight has `alarm_status = 0` and `fire_state = 0`), which holds only runs in
//! flight and unhandled failures. Measured with the load bench (BENCHMARKS.md).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

const DROPPED: [(&str, &str); 2] = [("I_jobid", "job_id"), ("I_handle_code", "handle_code")];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, _) in DROPPED {
            // a taken-over XXL-JOB database may lack them; MySQL has no DROP INDEX IF EXISTS
            if m.has_index("xxl_job_log", name).await? {
                m.drop_index(Index::drop().name(name).table(t("xxl_job_log")).to_owned())
                    .await?;
            }
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for (name, col) in DROPPED {
            m.create_index(
                Index::create()
                    .name(name)
                    .table(t("xxl_job_log"))
                    .col(t(col))
                    .to_owned(),
            )
            .await?;
        }
        Ok(())
    }
}
