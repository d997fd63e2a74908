//! Indexes `xjob_workflow_node_log` by `run_id`: a run's page and its retention read a run's
//! links by run, which without it read every link of every run.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_index(
            Index::create()
                .name("i_wf_node_log_run")
                .table(Alias::new("xjob_workflow_node_log"))
                .col(Alias::new("run_id"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(
            Index::drop()
                .name("i_wf_node_log_run")
                .table(Alias::new("xjob_workflow_node_log"))
                .to_owned(),
        )
        .await
    }
}
