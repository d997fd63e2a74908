//! Adds `xjob_node.lease_rules`: which rules a node follows to keep its leases, its dispatch
//! mark and its fences (a number the code raises whenever nodes of the new rules cannot safely
//! share a database with nodes of the old; see `LEASE_RULES` in `src/store/leases.rs`). A node
//! joins only while every other live node follows the same rules, so a cluster upgraded one
//! node at a time waits for the last node of the old build to stop instead of sending a fire
//! twice. 0 for a node of a build before this column (they could not tell).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.has_column("xjob_node", "lease_rules").await? {
            return Ok(());
        }
        m.alter_table(
            Table::alter()
                .table(t("xjob_node"))
                .add_column(
                    ColumnDef::new(t("lease_rules"))
                        .integer()
                        .not_null()
                        .default(0),
                )
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(t("xjob_node"))
                .drop_column(t("lease_rules"))
                .to_owned(),
        )
        .await
    }
}
