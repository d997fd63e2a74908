//! `xjob_fire_journal` (SQLite only): the pending fires a scan pass on a SQLite file recorded,
//! one row per page of the pass (`first_log_id` and the page's fires packed in `fires`).
//!
//! On a SQLite file a pass no longer inserts a pending `xxl_job_log` row per fire (an entry in
//! each of the table's five indexes, moved again by the run's final update): it appends one
//! journal row per page, and the run's row is inserted once, complete, when its outcome is
//! written. The log ids are reserved when the page is journalled, so the executor sees its run's
//! final id. A page's row is deleted once all its runs have their rows; at start the writer turns
//! whatever a stopped node left here into pending `xxl_job_log` rows, which recovery handles as
//! before. PostgreSQL and MySQL (shared by several nodes) keep pending rows.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        m.create_table(
            Table::create()
                .table(Alias::new("xjob_fire_journal"))
                .if_not_exists()
                .col(
                    ColumnDef::new(Alias::new("id"))
                        .integer()
                        .not_null()
                        .primary_key(),
                )
                .col(
                    ColumnDef::new(Alias::new("first_log_id"))
                        .big_integer()
                        .not_null(),
                )
                .col(ColumnDef::new(Alias::new("fires")).blob().not_null())
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if m.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        m.drop_table(
            Table::drop()
                .table(Alias::new("xjob_fire_journal"))
                .if_exists()
                .to_owned(),
        )
        .await
    }
}
