//! Creates the eight XXL-JOB 2.4 tables, xjob's extra columns and indexes, and the lock row.
//! On an XXL-JOB database (its tables already there) it takes them over in place first
//! ([`crate::takeover`]) and then creates only what is missing.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

/// Creates a table; on MySQL as InnoDB in utf8mb4, as XXL-JOB's schema does (messages hold
/// non-ASCII text whatever the database default is).
async fn create(m: &SchemaManager<'_>, mut stmt: TableCreateStatement) -> Result<(), DbErr> {
    if m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql {
        stmt.engine("InnoDB")
            .character_set("utf8mb4")
            .collate("utf8mb4_unicode_ci");
    }
    m.create_table(stmt).await
}

/// Creates an index unless one of its name is there (a taken-over XXL-JOB database has some of
/// them).
async fn index(
    m: &SchemaManager<'_>,
    table: &str,
    name: &str,
    stmt: IndexCreateStatement,
) -> Result<(), DbErr> {
    if m.has_index(table, name).await? {
        return Ok(());
    }
    m.create_index(stmt).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        if crate::takeover::found(m).await? {
            crate::takeover::prepare(m).await?;
        }
        create(
            m,
            Table::create()
                .table(t("xxl_job_group"))
                .if_not_exists()
                .col(pk_auto(t("id")))
                .col(string_len(t("app_name"), 64))
                .col(string_len(t("title"), 64))
                .col(small_integer(t("address_type")).default(0))
                .col(text_null(t("address_list")))
                .col(date_time_null(t("update_time")))
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_registry"))
                .if_not_exists()
                .col(big_pk_auto(t("id")))
                .col(string_len(t("registry_group"), 50))
                .col(string_len(t("registry_key"), 255))
                .col(string_len(t("registry_value"), 255))
                .col(date_time_null(t("update_time")))
                .to_owned(),
        )
        .await?;
        index(
            m,
            "xxl_job_registry",
            "i_g_k_v",
            Index::create()
                .name("i_g_k_v")
                .table(t("xxl_job_registry"))
                .col(t("registry_group"))
                .col(t("registry_key"))
                .col(t("registry_value"))
                .unique()
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_info"))
                .if_not_exists()
                .col(pk_auto(t("id")))
                .col(integer(t("job_group")))
                .col(string_len(t("job_desc"), 255))
                .col(date_time_null(t("add_time")))
                .col(date_time_null(t("update_time")))
                .col(string_len_null(t("author"), 64))
                .col(string_len_null(t("alarm_email"), 255))
                .col(string_len(t("schedule_type"), 50).default("NONE"))
                .col(string_len_null(t("schedule_conf"), 128))
                .col(string_len(t("misfire_strategy"), 50).default("DO_NOTHING"))
                .col(string_len_null(t("executor_route_strategy"), 50))
                .col(string_len_null(t("executor_handler"), 255))
                .col(text_null(t("executor_param")))
                .col(string_len_null(t("executor_block_strategy"), 50))
                .col(integer(t("executor_timeout")).default(0))
                .col(integer(t("executor_fail_retry_count")).default(0))
                .col(string_len(t("glue_type"), 50))
                .col(text_null(t("glue_source")))
                .col(string_len_null(t("glue_remark"), 128))
                .col(date_time_null(t("glue_updatetime")))
                .col(string_len_null(t("child_jobid"), 255))
                .col(small_integer(t("trigger_status")).default(0))
                .col(big_integer(t("trigger_last_time")).default(0))
                .col(big_integer(t("trigger_next_time")).default(0))
                .col(string_len_null(t("time_zone"), 64))
                .col(integer(t("retry_interval")).default(0))
                .col(string_len_null(t("alarm_webhook"), 255))
                .to_owned(),
        )
        .await?;
        index(
            m,
            "xxl_job_info",
            "i_status_next",
            Index::create()
                .name("i_status_next")
                .table(t("xxl_job_info"))
                .col(t("trigger_status"))
                .col(t("trigger_next_time"))
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_logglue"))
                .if_not_exists()
                .col(pk_auto(t("id")))
                .col(integer(t("job_id")))
                .col(string_len_null(t("glue_type"), 50))
                .col(text_null(t("glue_source")))
                .col(string_len(t("glue_remark"), 128))
                .col(date_time_null(t("add_time")))
                .col(date_time_null(t("update_time")))
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_log"))
                .if_not_exists()
                .col(big_pk_auto(t("id")))
                .col(integer(t("job_group")))
                .col(integer(t("job_id")))
                .col(string_len_null(t("executor_address"), 255))
                .col(string_len_null(t("executor_handler"), 255))
                .col(text_null(t("executor_param")))
                .col(string_len_null(t("executor_sharding_param"), 20))
                .col(integer(t("executor_fail_retry_count")).default(0))
                .col(date_time_null(t("trigger_time")))
                .col(integer(t("trigger_code")))
                .col(text_null(t("trigger_msg")))
                .col(date_time_null(t("handle_time")))
                .col(integer(t("handle_code")))
                .col(text_null(t("handle_msg")))
                .col(small_integer(t("alarm_status")).default(0))
                .col(big_integer_null(t("fire_time")))
                .col(big_integer(t("fire_state")).default(0))
                .col(string_len_null(t("trigger_type"), 16))
                .col(small_integer(t("chain_depth")).default(0))
                .to_owned(),
        )
        .await?;
        for (name, cols, unique) in [
            ("I_trigger_time", &["trigger_time"][..], false),
            ("I_handle_code", &["handle_code"][..], false),
            ("I_jobid", &["job_id"][..], false),
            ("I_jobgroup", &["job_group"][..], false),
            // A scheduled fire is unique per (job, nominal time): no node can record it twice.
            ("uk_job_fire", &["job_id", "fire_time"][..], true),
            // Recovery of pending fires left by a node that died.
            ("i_fire_state", &["fire_state", "fire_time"][..], false),
        ] {
            let mut idx = Index::create();
            idx.name(name).table(t("xxl_job_log"));
            for c in cols {
                idx.col(t(c));
            }
            if unique {
                idx.unique();
            }
            index(m, "xxl_job_log", name, idx.to_owned()).await?;
        }

        create(
            m,
            Table::create()
                .table(t("xxl_job_log_report"))
                .if_not_exists()
                .col(pk_auto(t("id")))
                .col(date_time_null(t("trigger_day")))
                .col(integer(t("running_count")).default(0))
                .col(integer(t("suc_count")).default(0))
                .col(integer(t("fail_count")).default(0))
                .col(date_time_null(t("update_time")))
                .to_owned(),
        )
        .await?;
        index(
            m,
            "xxl_job_log_report",
            "i_trigger_day",
            Index::create()
                .name("i_trigger_day")
                .table(t("xxl_job_log_report"))
                .col(t("trigger_day"))
                .unique()
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_user"))
                .if_not_exists()
                .col(pk_auto(t("id")))
                .col(string_len(t("username"), 50))
                .col(string_len(t("password"), 255))
                .col(string_len_null(t("token"), 100))
                .col(small_integer(t("role")))
                .col(string_len_null(t("permission"), 255))
                .to_owned(),
        )
        .await?;
        index(
            m,
            "xxl_job_user",
            "i_username",
            Index::create()
                .name("i_username")
                .table(t("xxl_job_user"))
                .col(t("username"))
                .unique()
                .to_owned(),
        )
        .await?;

        create(
            m,
            Table::create()
                .table(t("xxl_job_lock"))
                .if_not_exists()
                .col(string_len(t("lock_name"), 50).primary_key())
                .to_owned(),
        )
        .await?;
        let lock_row = m
            .get_connection()
            .query_one_raw(sea_orm_migration::sea_orm::Statement::from_string(
                m.get_database_backend(),
                "SELECT lock_name FROM xxl_job_lock WHERE lock_name = 'schedule_lock'",
            ))
            .await?;
        if lock_row.is_some() {
            return Ok(());
        }
        let seed = Query::insert()
            .into_table(t("xxl_job_lock"))
            .columns([t("lock_name")])
            .values_panic(["schedule_lock".into()])
            .to_owned();
        m.exec_stmt(seed).await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for name in [
            "xxl_job_lock",
            "xxl_job_user",
            "xxl_job_log_report",
            "xxl_job_log",
            "xxl_job_logglue",
            "xxl_job_info",
            "xxl_job_registry",
            "xxl_job_group",
        ] {
            m.drop_table(Table::drop().table(t(name)).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
