//! Run logs (protocol.md §9 `/joblog`): filtered lists, one run, its rolling log from the executor
//! recorded on the run (the only address contacted), kill, and the nine clear modes.

use serde::{Deserialize, Serialize};

use super::{Console, Page, Principal, parse_time, rfc3339};
use crate::engine::RunLog;
use crate::error::{Error, Result};
use crate::model::fire_state;
use crate::store::log_pages::{self, ClearMode, LogFilter, RunStatus};
use crate::store::logs;

/// A run as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogView {
    /// Log id.
    pub id: i64,
    /// Group.
    pub job_group: i32,
    /// Job.
    pub job_id: i32,
    /// The job's description (`null` once the job is deleted).
    pub job_desc: Option<String>,
    /// Executor it was sent to.
    pub executor_address: Option<String>,
    /// Handler.
    pub executor_handler: Option<String>,
    /// Param sent.
    pub executor_param: Option<String>,
    /// `i/n` for sharded runs.
    pub executor_sharding_param: Option<String>,
    /// Retries left after this run.
    pub executor_fail_retry_count: i32,
    /// Sent (RFC 3339).
    pub trigger_time: Option<String>,
    /// 200 sent, 500 failed to send.
    pub trigger_code: i32,
    /// Routing transcript.
    pub trigger_msg: Option<String>,
    /// Finished (RFC 3339).
    pub handle_time: Option<String>,
    /// 0 running, 200 success, else failure.
    pub handle_code: i32,
    /// Result message.
    pub handle_msg: Option<String>,
    /// Alarm state (protocol.md §5.7).
    pub alarm_status: i16,
    /// CRON, MANUAL, RETRY, PARENT, API or MISFIRE.
    pub trigger_type: Option<String>,
    /// Nominal fire time of a scheduled run, epoch ms.
    pub fire_time: Option<i64>,
    /// `success`, `failed` or `running`.
    pub status: &'static str,
}

impl From<entity::xxl_job_log::Model> for LogView {
    fn from(l: entity::xxl_job_log::Model) -> Self {
        let status = RunStatus::of(&l).as_str();
        LogView {
            id: l.id,
            job_group: l.job_group,
            job_id: l.job_id,
            job_desc: None,
            executor_address: l.executor_address,
            executor_handler: l.executor_handler,
            executor_param: l.executor_param,
            executor_sharding_param: l.executor_sharding_param,
            executor_fail_retry_count: l.executor_fail_retry_count,
            trigger_time: rfc3339(l.trigger_time),
            trigger_code: l.trigger_code,
            trigger_msg: l.trigger_msg,
            handle_time: rfc3339(l.handle_time),
            handle_code: l.handle_code,
            handle_msg: l.handle_msg,
            alarm_status: l.alarm_status,
            trigger_type: l.trigger_type,
            fire_time: l.fire_time,
            status,
        }
    }
}

/// Filters of the log list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LogQuery {
    /// Only this group (0 or absent = every group the user may see).
    pub job_group: Option<i32>,
    /// Only this job (0 or absent = all).
    pub job_id: Option<i32>,
    /// `success`, `failed` or `running`.
    pub status: Option<String>,
    /// Triggered at or after (RFC 3339, epoch ms, or `yyyy-MM-dd[ HH:mm:ss]`).
    pub from: Option<String>,
    /// Triggered before.
    pub to: Option<String>,
    /// First item.
    pub offset: Option<u64>,
    /// Page size.
    pub limit: Option<u64>,
}

/// What to clear.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClearInput {
    /// Only this group (required for normal users; 0 or absent = all for administrators).
    pub job_group: Option<i32>,
    /// Only this job (0 or absent = all jobs of the group).
    pub job_id: Option<i32>,
    /// XXL-JOB's mode: 1–4 older than 1/3/6/12 months, 5–8 keep the newest
    /// 1,000/10,000/30,000/100,000, 9 everything.
    #[serde(rename = "type")]
    pub mode: i32,
}

/// How many runs a clear deleted.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Cleared {
    /// Rows deleted.
    pub deleted: u64,
}

impl Console {
    async fn visible_log(&self, who: &Principal, id: i64) -> Result<entity::xxl_job_log::Model> {
        self.engine().runs_visible().await?;
        let row = logs::get(self.db(), id).await?;
        if row.fire_state != fire_state::DISPATCHED {
            return Err(Error::LogNotFound { log_id: id });
        }
        who.require_group(row.job_group, "id")?;
        Ok(row)
    }

    /// The groups a query covers: the one asked for (if permitted) or all visible ones.
    fn scope(who: &Principal, job_group: Option<i32>) -> Result<Option<Vec<i32>>> {
        match job_group.filter(|g| *g > 0) {
            Some(g) => {
                who.require_group(g, "jobGroup")?;
                Ok(Some(vec![g]))
            }
            None => Ok(who.visible_groups()),
        }
    }

    /// Runs the user may see that match `q`, newest first.
    pub async fn list_logs(&self, who: &Principal, q: &LogQuery) -> Result<Page<LogView>> {
        let (offset, limit) = super::page_bounds(q.offset, q.limit)?;
        let tz = self.tz();
        let f = LogFilter {
            groups: Self::scope(who, q.job_group)?,
            job_id: q.job_id.filter(|j| *j > 0),
            status: q
                .status
                .as_deref()
                .filter(|s| !s.is_empty() && *s != "all")
                .map(str::parse)
                .transpose()?,
            from: q
                .from
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|s| parse_time("from", s, tz))
                .transpose()?,
            to: q
                .to
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|s| parse_time("to", s, tz))
                .transpose()?,
        };
        self.engine().runs_visible().await?;
        let (total, rows) = log_pages::page(self.db(), &f, offset, limit).await?;
        Ok(Page {
            total,
            items: self.with_job_descs(rows).await?,
        })
    }

    /// Runs as the console shows them, each naming its job.
    async fn with_job_descs(&self, rows: Vec<entity::xxl_job_log::Model>) -> Result<Vec<LogView>> {
        let mut ids: Vec<i32> = rows.iter().map(|r| r.job_id).collect();
        ids.sort_unstable();
        ids.dedup();
        let descs = crate::store::jobs::descriptions(self.db(), &ids).await?;
        Ok(rows
            .into_iter()
            .map(|r| LogView {
                job_desc: descs.get(&r.job_id).cloned(),
                ..LogView::from(r)
            })
            .collect())
    }

    /// One run.
    pub async fn get_log(&self, who: &Principal, id: i64) -> Result<LogView> {
        let row = self.visible_log(who, id).await?;
        let job_desc = crate::store::jobs::descriptions(self.db(), &[row.job_id])
            .await?
            .remove(&row.job_id);
        Ok(LogView {
            job_desc,
            ..row.into()
        })
    }

    /// A run's rolling log from `from_line` (`end` once it has finished and nothing is left).
    pub async fn log_content(&self, who: &Principal, id: i64, from_line: i32) -> Result<RunLog> {
        self.visible_log(who, id).await?;
        if from_line < 1 {
            return Err(Error::Invalid {
                field: "fromLine",
                reason: "must be 1 or more".into(),
            });
        }
        self.engine.run_log(id, from_line).await
    }

    /// Kills a running run at its executor.
    pub async fn kill_log(&self, who: &Principal, id: i64) -> Result<LogView> {
        let row = self.visible_log(who, id).await?;
        if RunStatus::of(&row) != RunStatus::Running {
            return Err(Error::Conflict {
                reason: format!("run {id} is not running"),
            });
        }
        self.engine.kill_run(id).await?;
        self.audit(who, "log.kill", "log", id, format!("job {}", row.job_id))
            .await;
        self.get_log(who, id).await
    }

    /// Deletes runs as XXL-JOB's clear modes do.
    pub async fn clear_logs(&self, who: &Principal, input: ClearInput) -> Result<Cleared> {
        if !who.is_admin() && input.job_group.unwrap_or(0) <= 0 {
            return Err(Error::Invalid {
                field: "jobGroup",
                reason: "is required".into(),
            });
        }
        let mode = ClearMode::from_type(input.mode, self.now())?;
        let groups = Self::scope(who, input.job_group)?;
        let job_id = input.job_id.filter(|j| *j > 0);
        if let Some(j) = job_id {
            let job = crate::store::jobs::get(self.db(), j).await?;
            who.require_group(job.job_group, "jobId")?;
        }
        self.engine().runs_visible().await?;
        let deleted = log_pages::clear(self.db(), groups, job_id, mode).await?;
        tracing::info!(user = %who.username, deleted, mode = input.mode, "run logs cleared");
        let mut detail = format!("mode {}; {deleted} run(s) deleted", input.mode);
        if let Some(g) = input.job_group.filter(|g| *g > 0) {
            detail.push_str(&format!("; group {g}"));
        }
        if let Some(j) = job_id {
            detail.push_str(&format!("; job {j}"));
        }
        self.audit(who, "log.clear", "log", "", detail).await;
        Ok(Cleared { deleted })
    }
}
