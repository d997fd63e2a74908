//! Makes the fail monitor's read cost proportional to unhandled runs, not to the log table.
//!
//! The monitor looks for failed runs with `alarm_status = 0`. A successful run now gets
//! `alarm_status = 1` ("no alarm needed", XXL-JOB's own value for a run that needs none) when
//! its result is recorded, so rows still at 0 are only runs in flight and failures not yet
//! handled; the index `i_alarm_fire` (`alarm_status`, `fire_state`) finds exactly those. This
//! migration backfills the successful runs already recorded.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.exec_stmt(
            Query::update()
                .table(t("xxl_job_log"))
                .value(t("alarm_status"), 1)
                .and_where(Expr::col(t("alarm_status")).eq(0))
                .and_where(Expr::col(t("handle_code")).eq(200))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("i_alarm_fire")
                .table(t("xxl_job_log"))
                .col(t("alarm_status"))
                .col(t("fire_state"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(
            Index::drop()
                .name("i_alarm_fire")
                .table(t("xxl_job_log"))
                .to_owned(),
        )
        .await
    }
}
