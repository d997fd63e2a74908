//! Adds `xxl_job_group.access_token` (XXL-JOB 3.5's column): a group's own access token. When
//! set, executors of that appName register, call back and are called with it, and the global
//! token no longer works for the group. NULL keeps the global token. A taken-over XXL-JOB 3.5
//! database has the column already.

use sea_orm_migration::prelude::*;

use crate::{add_column_once, drop_column};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        add_column_once(
            m,
            "xxl_job_group",
            ColumnDef::new(Alias::new("access_token"))
                .string_len(255)
                .null()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        drop_column(m, "xxl_job_group", "access_token").await
    }
}
