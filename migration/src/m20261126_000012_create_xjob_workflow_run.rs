//! Creates the tables of running workflows: `xjob_workflow_run` (one run of one version: status,
//! context, trigger), `xjob_workflow_node_run` (one attempt of one node of a run, unique on run,
//! node and attempt, so no node run can be recorded twice) and `xjob_workflow_node_log` (the run
//! rows — `xxl_job_log` ids — a node run dispatched, one per shard, and whether each one's result
//! has been applied to the workflow). Adds a workflow's schedule (type, conf, misfire strategy,
//! whether it runs, its next fire time) and concurrency policy to `xjob_workflow`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

fn t(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let mysql = m.get_database_backend() == sea_orm_migration::sea_orm::DbBackend::MySql;
        let mut run = Table::create()
            .table(t("xjob_workflow_run"))
            .if_not_exists()
            .col(big_pk_auto(t("id")))
            .col(integer(t("workflow_id")))
            .col(integer(t("version")))
            .col(integer(t("job_group")))
            .col(string_len(t("status"), 16))
            .col(string_len(t("trigger_type"), 16))
            .col(text_null(t("params")))
            .col(text(t("context")))
            .col(big_integer_null(t("parent_node_run")))
            .col(small_integer(t("depth")).default(0))
            .col(big_integer(t("seq")).default(0))
            .col(big_integer(t("start_time")))
            .col(big_integer_null(t("end_time")))
            .col(text_null(t("message")))
            .to_owned();
        let mut node = Table::create()
            .table(t("xjob_workflow_node_run"))
            .if_not_exists()
            .col(big_pk_auto(t("id")))
            .col(big_integer(t("run_id")))
            .col(string_len(t("node_key"), 64))
            .col(integer(t("attempt")))
            .col(integer(t("max_attempts")).default(1))
            .col(string_len(t("state"), 16))
            .col(small_integer_null(t("decision")))
            .col(integer(t("shards_total")).default(0))
            .col(integer(t("shards_done")).default(0))
            .col(integer(t("shards_failed")).default(0))
            .col(big_integer_null(t("child_run")))
            .col(big_integer(t("start_time")))
            .col(big_integer_null(t("end_time")))
            .col(text_null(t("message")))
            // 1 once a re-run cleared it (kept as history; the node runs again)
            .col(small_integer(t("cleared")).default(0))
            .to_owned();
        let mut link = Table::create()
            .table(t("xjob_workflow_node_log"))
            .if_not_exists()
            .col(big_integer(t("log_id")).primary_key())
            .col(big_integer(t("node_run_id")))
            .col(big_integer(t("run_id")))
            .col(integer(t("shard")).default(0))
            .col(small_integer(t("done")).default(0))
            .to_owned();
        if mysql {
            for tb in [&mut run, &mut node, &mut link] {
                tb.engine("InnoDB").character_set("utf8mb4");
            }
        }
        // one column per statement: SQLite alters one at a time
        for col in [
            string_len(t("schedule_type"), 16)
                .default("NONE")
                .to_owned(),
            string_len_null(t("schedule_conf"), 128).to_owned(),
            string_len(t("misfire_strategy"), 16)
                .default("DO_NOTHING")
                .to_owned(),
            small_integer(t("trigger_status")).default(0).to_owned(),
            big_integer(t("trigger_next_time")).default(0).to_owned(),
            string_len(t("concurrency"), 16)
                .default("PARALLEL")
                .to_owned(),
            integer(t("max_queued")).default(10).to_owned(),
        ] {
            let mut col = col;
            m.alter_table(
                Table::alter()
                    .table(t("xjob_workflow"))
                    .add_column(&mut col)
                    .to_owned(),
            )
            .await?;
        }
        m.create_index(
            Index::create()
                .name("i_workflow_next")
                .table(t("xjob_workflow"))
                .col(t("trigger_status"))
                .col(t("trigger_next_time"))
                .to_owned(),
        )
        .await?;
        m.create_table(run).await?;
        m.create_table(node).await?;
        m.create_table(link).await?;
        for (name, table, cols, unique) in [
            (
                "i_wf_run_workflow",
                "xjob_workflow_run",
                &["workflow_id", "id"][..],
                false,
            ),
            (
                "i_wf_run_status",
                "xjob_workflow_run",
                &["status", "id"][..],
                false,
            ),
            (
                "u_wf_node_run",
                "xjob_workflow_node_run",
                &["run_id", "node_key", "attempt"][..],
                true,
            ),
            (
                "i_wf_node_log_done",
                "xjob_workflow_node_log",
                &["done", "log_id"][..],
                false,
            ),
            (
                "i_wf_node_log_node",
                "xjob_workflow_node_log",
                &["node_run_id"][..],
                false,
            ),
        ] {
            let mut idx = Index::create();
            idx.name(name).table(t(table));
            for c in cols {
                idx.col(t(c));
            }
            if unique {
                idx.unique();
            }
            m.create_index(idx.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(
            Index::drop()
                .name("i_workflow_next")
                .table(t("xjob_workflow"))
                .to_owned(),
        )
        .await?;
        for col in [
            "schedule_type",
            "schedule_conf",
            "misfire_strategy",
            "trigger_status",
            "trigger_next_time",
            "concurrency",
            "max_queued",
        ] {
            m.alter_table(
                Table::alter()
                    .table(t("xjob_workflow"))
                    .drop_column(t(col))
                    .to_owned(),
            )
            .await?;
        }
        for name in [
            "xjob_workflow_node_log",
            "xjob_workflow_node_run",
            "xjob_workflow_run",
        ] {
            m.drop_table(Table::drop().table(t(name)).if_exists().to_owned())
                .await?;
        }
        Ok(())
    }
}
