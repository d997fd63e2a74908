//! Creates `xjob_api_key`: named keys for automation on the `/v1` API, shared by every admin
//! node of a cluster.
//!
//! A row holds the SHA-256 of the key (never the key, which is shown once), its first
//! characters to tell keys apart, the user it acts for, the role and groups it is limited to
//! (never more than its user's), and when it was created and expires.

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
            .table(t("xjob_api_key"))
            .if_not_exists()
            .col(pk_auto(t("id")))
            .col(string_len(t("name"), 64))
            .col(string_len(t("key_hash"), 64).unique_key())
            .col(string_len(t("prefix"), 16))
            .col(integer(t("user_id")))
            .col(small_integer(t("role")))
            .col(string_len_null(t("permission"), 1024))
            .col(big_integer(t("created_at")))
            .col(big_integer(t("expires_at")))
            .to_owned();
        if m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql {
            stmt.engine("InnoDB").character_set("utf8mb4");
        }
        m.create_table(stmt).await?;
        m.create_index(
            Index::create()
                .name("i_api_key_user")
                .table(t("xjob_api_key"))
                .col(t("user_id"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(
            Table::drop()
                .table(t("xjob_api_key"))
                .if_exists()
                .to_owned(),
        )
        .await
    }
}
