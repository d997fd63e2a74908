//! Adds `xjob_node.dispatched_through`: a node's dispatch mark is its own row's,
//! covering every bucket it holds (epoch milliseconds of nominal time), written once before
//! each batch of fires goes out, instead of the same value into the row of every bucket the
//! batch touches (up to 1,024 rows each second). Whatever takes a bucket from its holder folds
//! the holder's mark into the bucket's `xjob_lease.dispatched_through` (never lowering it), so
//! the next holder reads the bucket's row as before. 0 for a node that never wrote one. (MySQL
//! and MariaDB kept the mark per bucket until later the same day.)

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.has_column("xjob_node", "dispatched_through").await? {
            return Ok(());
        }
        m.alter_table(
            Table::alter()
                .table(t("xjob_node"))
                .add_column(
                    ColumnDef::new(t("dispatched_through"))
                        .big_integer()
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
                .drop_column(t("dispatched_through"))
                .to_owned(),
        )
        .await
    }
}
