//! Adds `xjob_node.dispatched_through`: a node's dispatch mark is its own row's,
//! covering every bucket it holds (epoch milliseconds of nominal time), written once before
//! each batch of fires goes out, instead of the same value into the row of every bucket the
//! batch touches (up to 1,024 rows each second). Whatever takes a bucket from its holder folds
//! the holder's mark into the bucket's `xjob_lease.dispatched_through` (never lowering it), so
//! the next holder reads the bucket's row as before. 0 for a node that never wrote one. (MySQL
//! and MariaDB kept the mark per bucket until later the same day.)

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
            ColumnDef::new(Alias::new("dispatched_through"))
                .big_integer()
                .not_null()
                .default(0)
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        drop_column(m, "xjob_node", "dispatched_through").await
    }
}
