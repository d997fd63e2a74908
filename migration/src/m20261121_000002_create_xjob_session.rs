//! Creates `xjob_session`: console login sessions, shared by every admin node of a cluster.
//!
//! A session row holds the SHA-256 of the bearer token (never the token itself), the user and
//! the expiry, so a token issued by one node is accepted by all of them and a stolen database
//! dump does not contain usable tokens.

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
            .table(t("xjob_session"))
            .if_not_exists()
            .col(string_len(t("token_hash"), 64).primary_key())
            .col(integer(t("user_id")))
            .col(big_integer(t("expires_at")))
            .to_owned();
        if m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql {
            stmt.engine("InnoDB").character_set("utf8mb4");
        }
        m.create_table(stmt).await?;
        m.create_index(
            Index::create()
                .name("i_session_user")
                .table(t("xjob_session"))
                .col(t("user_id"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(
            Table::drop()
                .table(t("xjob_session"))
                .if_exists()
                .to_owned(),
        )
        .await
    }
}
