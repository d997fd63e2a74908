//! Adds `xxl_job_group.access_token` (XXL-JOB 3.5's column): a group's own access token. When
//! set, executors of that appName register, call back and are called with it, and the global
//! token no longer works for the group. NULL keeps the global token. A taken-over XXL-JOB 3.5
//! database has the column already.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // an XXL-JOB 3.5 database taken over has it already
        if m.has_column("xxl_job_group", "access_token").await? {
            return Ok(());
        }
        m.alter_table(
            Table::alter()
                .table(t("xxl_job_group"))
                .add_column(ColumnDef::new(t("access_token")).string_len(255).null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(t("xxl_job_group"))
                .drop_column(t("access_token"))
                .to_owned(),
        )
        .await
    }
}
