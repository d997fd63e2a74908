//! Creates `xjob_audit`: one row per change made through the console (and the engine's API),
//! and per login, failed login, logout and password change. Shared by every admin node of a
//! cluster; kept for the run-log retention (`log_retention_days`).

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
        let mut stmt = Table::create()
            .table(t("xjob_audit"))
            .if_not_exists()
            .col(big_integer(t("id")).auto_increment().primary_key())
            .col(date_time(t("time")))
            .col(string_len(t("username"), 50))
            .col(string_len(t("client_ip"), 64))
            .col(string_len(t("action"), 32))
            .col(string_len(t("target_type"), 16))
            .col(string_len(t("target_id"), 64))
            .col(string_len(t("detail"), 1000))
            .to_owned();
        if m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql {
            stmt.engine("InnoDB").character_set("utf8mb4");
        }
        m.create_table(stmt).await?;
        m.create_index(
            Index::create()
                .name("i_audit_time")
                .table(t("xjob_audit"))
                .col(t("time"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(t("xjob_audit")).if_exists().to_owned())
            .await
    }
}
