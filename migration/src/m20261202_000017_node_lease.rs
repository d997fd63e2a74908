//! Adds `xjob_node.lease_until_ms`: a node's leases on buckets last as long as its own row says
//! (epoch milliseconds on the database's clock), so a node renews every lease it holds with one
//! update of its row instead of one row update per bucket. A bucket row keeps its owner and
//! epoch; `xjob_lease.expires_ms` is no longer read. A node started before this column existed
//! has 0 here: a node of this version refuses to join while such a node is live.

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
            ColumnDef::new(Alias::new("lease_until_ms"))
                .big_integer()
                .not_null()
                .default(0)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        drop_column(m, "xjob_node", "lease_until_ms").await
    }
}
