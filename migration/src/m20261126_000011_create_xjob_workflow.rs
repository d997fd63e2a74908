//! Creates `xjob_workflow` (a workflow: its group, name and current version's DAG) and
//! `xjob_workflow_version` (every saved version's DAG, unique per workflow and version, so a run
//! can always name the exact DAG it follows).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let mysql = m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql;
        let mut workflow = Table::create()
            .table(t("xjob_workflow"))
            .if_not_exists()
            .col(pk_auto(t("id")))
            .col(integer(t("job_group")))
            .col(string_len(t("name"), 255))
            .col(string_len_null(t("description"), 1024))
            .col(string_len(t("author"), 64))
            .col(integer(t("version")))
            .col(text(t("definition")))
            .col(big_integer(t("created_at")))
            .col(big_integer(t("updated_at")))
            .to_owned();
        let mut version = Table::create()
            .table(t("xjob_workflow_version"))
            .if_not_exists()
            .col(pk_auto(t("id")))
            .col(integer(t("workflow_id")))
            .col(integer(t("version")))
            .col(text(t("definition")))
            .col(string_len(t("author"), 64))
            .col(big_integer(t("created_at")))
            .to_owned();
        if mysql {
            workflow.engine("InnoDB").character_set("utf8mb4");
            version.engine("InnoDB").character_set("utf8mb4");
        }
        m.create_table(workflow).await?;
        m.create_table(version).await?;
        m.create_index(
            Index::create()
                .name("i_workflow_group")
                .table(t("xjob_workflow"))
                .col(t("job_group"))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("u_workflow_version")
                .table(t("xjob_workflow_version"))
                .col(t("workflow_id"))
                .col(t("version"))
                .unique()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for name in ["xjob_workflow_version", "xjob_workflow"] {
            m.drop_table(Table::drop().table(t(name)).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
