//! Adds `xjob_node.lease_rules`: which rules a node follows to keep its leases, its dispatch
//! mark and its fences (a number the code raises whenever nodes of the new rules cannot safely
//! share a database with nodes of the old; see `LEASE_RULES` in `src/store/leases.rs`). A node
//! joins only while every other live node follows the same rules, so a cluster upgraded one
//! node at a time waits for the last node of the old build to stop instead of sending a fire
//! twice. 0 for a node of a build before this column (they could not tell).

use sea_orm_migration::prelude::*;

use crate::{add_column_once, drop_column};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        add_column_once(
            m,
            "xjob_node",
            ColumnDef::new(Alias::new("lease_rules"))
                .integer()
                .not_null()
                .default(0)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        drop_column(m, "xjob_node", "lease_rules").await
    }
}
