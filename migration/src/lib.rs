//! Portable schema migrations for xjob: the same migrations run on SQLite, PostgreSQL and MySQL.
//!
//! Tables and columns follow XXL-JOB 2.4 (protocol.md §8) so an existing XXL-JOB database can be taken
//! over; xjob's additions are extra columns and indexes (see the `entity` crate docs).

pub use sea_orm_migration::prelude::*;

mod m20261121_000001_create_tables;
mod m20261121_000002_create_xjob_session;
mod m20261121_000003_index_alarm_scan;
mod m20261123_000004_drop_redundant_log_indexes;
mod m20261124_000005_create_xjob_audit;
mod m20261124_000006_group_access_token;
mod m20261125_000007_exact_app_names;
mod m20261125_000008_create_leases;
mod m20261125_000009_partial_log_indexes;
mod m20261126_000010_create_xjob_api_key;
mod m20261126_000011_create_xjob_workflow;
mod m20261126_000012_create_xjob_workflow_run;
mod m20261126_000013_index_workflow_links_by_run;
mod m20261127_000014_create_fire_journal;
mod m20261127_000015_partial_log_indexes_sqlite;
mod m20261128_000016_log_by_job_sqlite;
mod m20261202_000017_node_lease;
mod m20261203_000018_alarm_index_by_id;
mod m20261203_000019_node_dispatch_mark;
mod m20261203_000020_node_lease_rules;
mod m20261204_000021_dispatched_log_indexes;
mod takeover;

/// Runs `statements` on SQLite, in one call so that every one goes to the same connection of
/// the pool; on any other backend, nothing (the SQLite-only migrations' SQL).
pub(crate) async fn on_sqlite(m: &SchemaManager<'_>, statements: &[&str]) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};
    if m.get_database_backend() != DbBackend::Sqlite {
        return Ok(());
    }
    m.get_connection()
        .execute_unprepared(&statements.join("; "))
        .await?;
    Ok(())
}

/// Runs `statements` one after another on `backend` only; on any other backend, nothing (the
/// migrations whose SQL is one database's: PostgreSQL's partial indexes, MySQL's collations).
pub(crate) async fn only_on(
    m: &SchemaManager<'_>,
    backend: sea_orm_migration::sea_orm::DbBackend,
    statements: &[&str],
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::ConnectionTrait;
    if m.get_database_backend() != backend {
        return Ok(());
    }
    for s in statements {
        m.get_connection().execute_unprepared(s).await?;
    }
    Ok(())
}

/// Adds `column` to `table` unless the table has it already (a database taken over from
/// XXL-JOB, or a migration run again by hand).
pub(crate) async fn add_column_once(
    m: &SchemaManager<'_>,
    table: &str,
    mut column: ColumnDef,
) -> Result<(), DbErr> {
    let name = column.get_column_name();
    if m.has_column(table, &name).await? {
        return Ok(());
    }
    m.alter_table(
        Table::alter()
            .table(Alias::new(table))
            .add_column(&mut column)
            .to_owned(),
    )
    .await
}

/// Drops `column` of `table` (what [`add_column_once`] added).
pub(crate) async fn drop_column(
    m: &SchemaManager<'_>,
    table: &str,
    column: &str,
) -> Result<(), DbErr> {
    m.alter_table(
        Table::alter()
            .table(Alias::new(table))
            .drop_column(Alias::new(column))
            .to_owned(),
    )
    .await
}

/// Every migration, in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_create_tables::Migration),
            Box::new(m20261121_000002_create_xjob_session::Migration),
            Box::new(m20261121_000003_index_alarm_scan::Migration),
            Box::new(m20261123_000004_drop_redundant_log_indexes::Migration),
            Box::new(m20261124_000005_create_xjob_audit::Migration),
            Box::new(m20261124_000006_group_access_token::Migration),
            Box::new(m20261125_000007_exact_app_names::Migration),
            Box::new(m20261125_000008_create_leases::Migration),
            Box::new(m20261125_000009_partial_log_indexes::Migration),
            Box::new(m20261126_000010_create_xjob_api_key::Migration),
            Box::new(m20261126_000011_create_xjob_workflow::Migration),
            Box::new(m20261126_000012_create_xjob_workflow_run::Migration),
            Box::new(m20261126_000013_index_workflow_links_by_run::Migration),
            Box::new(m20261127_000014_create_fire_journal::Migration),
            Box::new(m20261127_000015_partial_log_indexes_sqlite::Migration),
            Box::new(m20261128_000016_log_by_job_sqlite::Migration),
            Box::new(m20261202_000017_node_lease::Migration),
            Box::new(m20261203_000018_alarm_index_by_id::Migration),
            Box::new(m20261203_000019_node_dispatch_mark::Migration),
            Box::new(m20261203_000020_node_lease_rules::Migration),
            Box::new(m20261204_000021_dispatched_log_indexes::Migration),
        ]
    }
}
