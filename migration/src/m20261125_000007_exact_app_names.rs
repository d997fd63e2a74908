//! Makes executor appNames and registry keys compare exactly on MySQL/MariaDB, whose tables use
//! a case-insensitive collation: `app-tok` and `APP-TOK` are two groups, and a registration
//! for one can never refresh or remove the other's (with a group token, a case variant could
//! otherwise delete a group's registrations with the global token). PostgreSQL and SQLite
//! already compare text exactly: nothing to do there.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

const EXACT: &[&str] = &[
    "ALTER TABLE xxl_job_group MODIFY app_name VARCHAR(64) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_bin NOT NULL",
    "ALTER TABLE xxl_job_registry \
     MODIFY registry_group VARCHAR(50) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, \
     MODIFY registry_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, \
     MODIFY registry_value VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
];

const FOLDED: &[&str] = &[
    "ALTER TABLE xxl_job_group MODIFY app_name VARCHAR(64) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_unicode_ci NOT NULL",
    "ALTER TABLE xxl_job_registry \
     MODIFY registry_group VARCHAR(50) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, \
     MODIFY registry_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL, \
     MODIFY registry_value VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::only_on(m, DbBackend::MySql, EXACT).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::only_on(m, DbBackend::MySql, FOLDED).await
    }
}
