//! Partitioned scheduling on a shared database (PostgreSQL, MySQL): `xjob_node` (the live
//! nodes, each with a heartbeat) and `xjob_lease` (one row per bucket of jobs: who schedules
//! it, at which epoch, until when, and up to which nominal second its fires were handed to
//! executors). Times are epoch milliseconds taken from the database's clock, never a node's.
//! A SQLite file serves one node and never reads these tables.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// Buckets jobs fall into (by job id); never changed once a database has them.
pub const BUCKETS: i32 = 1024;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

async fn create(m: &SchemaManager<'_>, mut stmt: TableCreateStatement) -> Result<(), DbErr> {
    if m.get_database_backend() == DbBackend::MySql {
        stmt.engine("InnoDB")
            .character_set("utf8mb4")
            .collate("utf8mb4_bin");
    }
    m.create_table(stmt).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        create(
            m,
            Table::create()
                .table(t("xjob_node"))
                .if_not_exists()
                .col(string_len(t("id"), 64).primary_key())
                .col(string_len(t("address"), 255).default(""))
                .col(big_integer(t("started_ms")))
                .col(big_integer(t("heartbeat_ms")))
                .to_owned(),
        )
        .await?;
        create(
            m,
            Table::create()
                .table(t("xjob_lease"))
                .if_not_exists()
                .col(integer(t("bucket")).primary_key())
                .col(string_len_null(t("owner"), 64))
                .col(big_integer(t("epoch")).default(0))
                .col(big_integer(t("expires_ms")).default(0))
                .col(big_integer(t("dispatched_through")).default(0))
                .to_owned(),
        )
        .await?;
        // every bucket has its row from the start: taking a lease is always an update
        let values: Vec<String> = (0..BUCKETS).map(|b| format!("({b})")).collect();
        m.get_connection()
            .execute_unprepared(&format!(
                "INSERT INTO xjob_lease (bucket) VALUES {}",
                values.join(", ")
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(t("xjob_lease")).to_owned())
            .await?;
        m.drop_table(Table::drop().table(t("xjob_node")).to_owned())
            .await
    }
}
