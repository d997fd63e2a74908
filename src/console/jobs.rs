//! Jobs and their GLUE source (protocol.md §9 `/jobinfo`, `/jobcode`), confined to the user's groups.
//! New jobs are created stopped; an edit never changes the GLUE type or source (the script
//! editor does), and moves a running job's next fire when its schedule changed.

use chrono::TimeZone;
use sea_orm::TransactionTrait;
use serde::{Deserialize, Serialize};

use super::audit::{changes, shown};
use super::{Console, Page, Principal, rfc3339};
use crate::error::{Error, Result};
use crate::jobs::JobSpec;
use crate::model::GlueType;
use crate::model::TriggerStatus;
use crate::schedule::Schedule;
use crate::store::{glue, groups, jobs, log_pages};

/// Longest list of next fire times answered.
pub const MAX_NEXT_TIMES: usize = 100;

/// A job as the console shows it (XXL-JOB's field names in camelCase, plus xjob's).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    /// Job id.
    pub id: i32,
    /// Executor group id.
    pub job_group: i32,
    /// Description.
    pub job_desc: String,
    /// Created (RFC 3339).
    pub add_time: Option<String>,
    /// Last edited (RFC 3339).
    pub update_time: Option<String>,
    /// Owner.
    pub author: Option<String>,
    /// Comma-separated alarm e-mail addresses.
    pub alarm_email: Option<String>,
    /// NONE, CRON or FIX_RATE.
    pub schedule_type: String,
    /// Cron expression or seconds.
    pub schedule_conf: Option<String>,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    pub misfire_strategy: String,
    /// Routing strategy.
    pub executor_route_strategy: Option<String>,
    /// Handler name.
    pub executor_handler: Option<String>,
    /// Param passed to the handler.
    pub executor_param: Option<String>,
    /// Block strategy.
    pub executor_block_strategy: Option<String>,
    /// Timeout, seconds (0 none).
    pub executor_timeout: i32,
    /// Retries after a failure.
    pub executor_fail_retry_count: i32,
    /// BEAN or a GLUE type.
    pub glue_type: String,
    /// Script source.
    pub glue_source: Option<String>,
    /// Script remark.
    pub glue_remark: Option<String>,
    /// Script version stamp (RFC 3339).
    pub glue_updatetime: Option<String>,
    /// Comma-separated child job ids.
    pub child_job_id: Option<String>,
    /// 0 stopped, 1 running.
    pub trigger_status: i16,
    /// Last scheduled fire, epoch ms (0 none).
    pub trigger_last_time: i64,
    /// Next scheduled fire, epoch ms (0 none).
    pub trigger_next_time: i64,
    /// IANA time zone of a CRON schedule (None = the center's).
    pub time_zone: Option<String>,
    /// Seconds before a fail retry.
    pub retry_interval: i32,
    /// URL that receives a JSON POST when a run fails.
    pub alarm_webhook: Option<String>,
}

impl From<entity::xxl_job_info::Model> for JobView {
    fn from(j: entity::xxl_job_info::Model) -> Self {
        JobView {
            id: j.id,
            job_group: j.job_group,
            job_desc: j.job_desc,
            add_time: rfc3339(j.add_time),
            update_time: rfc3339(j.update_time),
            author: j.author,
            alarm_email: j.alarm_email,
            schedule_type: j.schedule_type,
            schedule_conf: j.schedule_conf,
            misfire_strategy: j.misfire_strategy,
            executor_route_strategy: j.executor_route_strategy,
            executor_handler: j.executor_handler,
            executor_param: j.executor_param,
            executor_block_strategy: j.executor_block_strategy,
            executor_timeout: j.executor_timeout,
            executor_fail_retry_count: j.executor_fail_retry_count,
            glue_type: j.glue_type,
            glue_source: j.glue_source,
            glue_remark: j.glue_remark,
            glue_updatetime: rfc3339(j.glue_updatetime),
            child_job_id: j.child_jobid,
            trigger_status: j.trigger_status,
            trigger_last_time: j.trigger_last_time,
            trigger_next_time: j.trigger_next_time,
            time_zone: j.time_zone,
            retry_interval: j.retry_interval,
            alarm_webhook: j.alarm_webhook,
        }
    }
}

/// Filters of the job list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobQuery {
    /// Only this group (0 or absent = every group the user may see).
    pub job_group: Option<i32>,
    /// 1 running, 0 stopped, −1 or absent all.
    pub trigger_status: Option<i16>,
    /// Description contains.
    pub job_desc: Option<String>,
    /// Handler contains.
    pub executor_handler: Option<String>,
    /// Author contains.
    pub author: Option<String>,
    /// First item.
    pub offset: Option<u64>,
    /// Page size.
    pub limit: Option<u64>,
}

/// A job's GLUE source with its history.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GlueView {
    /// The job.
    pub job_id: i32,
    /// Its GLUE type.
    pub glue_type: String,
    /// Current source.
    pub glue_source: Option<String>,
    /// Current remark.
    pub glue_remark: Option<String>,
    /// Version stamp (RFC 3339).
    pub glue_updatetime: Option<String>,
    /// Earlier versions, newest first (at most 30).
    pub history: Vec<GlueVersion>,
}

/// One saved version of a script.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GlueVersion {
    /// History row id.
    pub id: i32,
    /// GLUE type then.
    pub glue_type: Option<String>,
    /// Source then.
    pub glue_source: Option<String>,
    /// Remark.
    pub glue_remark: String,
    /// Saved (RFC 3339).
    pub update_time: Option<String>,
}

/// A new version of a script.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GlueInput {
    /// The source.
    pub glue_source: String,
    /// What changed (4–100 characters).
    pub glue_remark: String,
}

impl Console {
    fn scripts_enabled(&self) -> bool {
        self.engine.config().security.scripts_enabled
    }

    /// Refuses a job that runs a script ([`crate::jobs::runs_script`]: a GLUE script type, or
    /// the built-in command handler) while script jobs are disabled.
    fn require_scripts(&self, glue_type: &str, handler: Option<&str>) -> Result<()> {
        if crate::jobs::runs_script(glue_type, handler) && !self.scripts_enabled() {
            let field = if glue_type.trim().is_empty() || glue_type.trim() == "BEAN" {
                "executorHandler"
            } else {
                "glueType"
            };
            return Err(Error::Forbidden {
                field: Some(field),
                reason: "script jobs (GLUE scripts and the command handler) are disabled; set security.scripts_enabled to allow them"
                    .into(),
            });
        }
        Ok(())
    }

    /// The job, if the user may see its group.
    async fn visible_job(&self, who: &Principal, id: i32) -> Result<entity::xxl_job_info::Model> {
        let job = jobs::get(self.db(), id).await?;
        who.require_group(job.job_group, "id")?;
        Ok(job)
    }

    /// Child ids must exist and be within the user's groups; answers the normalised list.
    async fn check_children(
        &self,
        who: &Principal,
        self_id: Option<i32>,
        children: Option<&str>,
    ) -> Result<Option<String>> {
        let ids: Vec<i32> = super::split_ids(children);
        if ids.is_empty() {
            return Ok(None);
        }
        let found = jobs::groups_of(self.db(), &ids).await?;
        for id in &ids {
            if Some(*id) == self_id {
                return Err(Error::Invalid {
                    field: "childJobId",
                    reason: "a job cannot be its own child".into(),
                });
            }
            match found.iter().find(|(j, _)| j == id) {
                None => {
                    return Err(Error::Invalid {
                        field: "childJobId",
                        reason: format!("job {id} does not exist"),
                    });
                }
                Some((_, g)) => who.require_group(*g, "childJobId")?,
            }
        }
        let s: Vec<String> = ids.iter().map(i32::to_string).collect();
        Ok(Some(s.join(",")))
    }

    pub(super) async fn check_group(&self, who: &Principal, group: i32) -> Result<()> {
        who.require_group(group, "jobGroup")?;
        // a single node's directory holds every group (this node's group edits refresh it)
        if self.engine.single_node() && self.engine.knows_group(group) {
            return Ok(());
        }
        match groups::get(self.db(), group).await {
            Err(Error::GroupNotFound { .. }) => Err(Error::Invalid {
                field: "jobGroup",
                reason: format!("executor group {group} does not exist"),
            }),
            other => other.map(|_| ()),
        }
    }

    /// Jobs the user may see that match `q`, newest first.
    pub async fn list_jobs(&self, who: &Principal, q: &JobQuery) -> Result<Page<JobView>> {
        let (offset, limit) = super::page_bounds(q.offset, q.limit)?;
        if q.trigger_status.is_some_and(|s| !(-1..=1).contains(&s)) {
            return Err(Error::Invalid {
                field: "triggerStatus",
                reason: "must be -1 (all), 0 (stopped) or 1 (running)".into(),
            });
        }
        let groups = match q.job_group.filter(|g| *g > 0) {
            Some(g) => {
                who.require_group(g, "jobGroup")?;
                Some(vec![g])
            }
            None => who.visible_groups(),
        };
        let f = jobs::JobFilter {
            groups,
            trigger_status: q.trigger_status.filter(|s| *s >= 0),
            job_desc: q.job_desc.clone(),
            executor_handler: q.executor_handler.clone(),
            author: q.author.clone(),
        };
        let (total, rows) = jobs::page(self.db(), &f, offset, limit).await?;
        Ok(Page {
            total,
            items: rows.into_iter().map(JobView::from).collect(),
        })
    }

    /// One job.
    pub async fn get_job(&self, who: &Principal, id: i32) -> Result<JobView> {
        Ok(self.visible_job(who, id).await?.into())
    }

    /// Creates a job: stopped (as XXL-JOB does), or with `status` [`TriggerStatus::Running`]
    /// started in the same write (one request and one commit where a create and a start take
    /// two; no stopped job is left behind by a client that fails between the two). A started
    /// job's first fire is what [`Console::start_job`] would give it, and it is audited as
    /// created and as started.
    pub async fn create_job(
        &self,
        who: &Principal,
        mut spec: JobSpec,
        status: TriggerStatus,
    ) -> Result<JobView> {
        self.check_group(who, spec.job_group).await?;
        self.engine.check_webhook(spec.alarm_webhook.as_deref())?;
        spec.glue_type.parse::<GlueType>()?;
        self.require_scripts(&spec.glue_type, spec.executor_handler.as_deref())?;
        spec.child_job_id = self
            .check_children(who, None, spec.child_job_id.as_deref())
            .await?;
        let model = spec.validate(self.tz(), self.now())?;
        let detail = format!(
            "{}; handler {}; {} {}",
            shown(&model.job_desc),
            shown(model.executor_handler.as_deref().unwrap_or_default()),
            model.schedule_type,
            model.schedule_conf.as_deref().unwrap_or_default()
        );
        // the target id is the new job's, set where it is stored
        let entry = self.audit_entry(who, "job.create", "job", "", detail);
        let running = status == TriggerStatus::Running;
        let (job, unwritten) = self
            .engine
            .insert_job_audited(model, running, entry)
            .await?;
        if let Some(mut entry) = unwritten {
            entry.target_id = job.id.to_string();
            self.write_audit(entry).await;
        }
        if running {
            self.write_audit(self.audit_entry(who, "job.start", "job", job.id, ""))
                .await;
        }
        Ok(job.into())
    }

    /// Edits a job's definition (not its GLUE type or source).
    pub async fn update_job(&self, who: &Principal, id: i32, mut spec: JobSpec) -> Result<JobView> {
        let old = self.visible_job(who, id).await?;
        self.check_group(who, spec.job_group).await?;
        self.engine.check_webhook(spec.alarm_webhook.as_deref())?;
        spec.glue_type = old.glue_type.clone();
        spec.glue_source = old.glue_source.clone();
        spec.glue_remark = old.glue_remark.clone();
        // a command job's param is its command line, as a script's source is its script: it
        // is chosen (made one, or its command changed) only while scripts are enabled
        let command = |handler: Option<&str>| crate::jobs::runs_command(&old.glue_type, handler);
        if command(spec.executor_handler.as_deref())
            && (!command(old.executor_handler.as_deref())
                || spec.executor_param != old.executor_param)
        {
            self.require_scripts(&spec.glue_type, spec.executor_handler.as_deref())?;
        }
        spec.child_job_id = self
            .check_children(who, Some(id), spec.child_job_id.as_deref())
            .await?;
        let mut model = spec.validate(self.tz(), self.now())?;
        model.id = id;
        let schedule_changed = (&model.schedule_type, &model.schedule_conf, &model.time_zone)
            != (&old.schedule_type, &old.schedule_conf, &old.time_zone);
        let txn = self.db().begin().await?;
        jobs::update_definition(&txn, &model).await?;
        if schedule_changed && old.trigger_status == TriggerStatus::Running.code() {
            let schedule = Schedule::for_job(
                &model.schedule_type,
                model.schedule_conf.as_deref(),
                model.time_zone.as_deref(),
                self.tz(),
            )?;
            let next =
                schedule
                    .first_after(self.engine.clock().now_ms())
                    .ok_or(Error::Invalid {
                        field: "scheduleConf",
                        reason: "the schedule has no future fire time".into(),
                    })?;
            jobs::reschedule_if_running(&txn, id, next).await?;
        }
        txn.commit().await?;
        self.engine.job_edited(id);
        let new = self.get_job(who, id).await?;
        let before = JobView::from(old);
        let detail = changes(
            &before,
            &new,
            &["updateTime", "triggerNextTime", "triggerLastTime"],
        );
        self.audit(who, "job.update", "job", id, detail).await;
        Ok(new)
    }

    /// Deletes a job with its run logs (pending fires included) and GLUE history.
    pub async fn delete_job(&self, who: &Principal, id: i32) -> Result<()> {
        let job = self.visible_job(who, id).await?;
        let used = crate::store::workflows::using_job(self.db(), id).await?;
        if !used.is_empty() {
            let ids: Vec<String> = used.iter().map(i32::to_string).collect();
            return Err(Error::Conflict {
                reason: format!("job {id} runs in workflow(s) {}", ids.join(", ")),
            });
        }
        let txn = self.db().begin().await?;
        jobs::delete(&txn, id).await?;
        log_pages::delete_for_job(&txn, id).await?;
        glue::delete_for_job(&txn, id).await?;
        txn.commit().await?;
        self.engine.job_edited(id);
        self.audit(who, "job.delete", "job", id, shown(&job.job_desc))
            .await;
        Ok(())
    }

    /// Starts a job.
    pub async fn start_job(&self, who: &Principal, id: i32) -> Result<JobView> {
        let me = who.clone();
        let entry = self.audit_entry(who, "job.start", "job", id, "");
        let (job, unwritten) = self
            .engine
            .start_checked(
                id,
                move |job| me.require_group(job.job_group, "id"),
                Some(entry),
            )
            .await?;
        if let Some(entry) = unwritten {
            self.write_audit(entry).await;
        }
        Ok(job.into())
    }

    /// Stops a job.
    pub async fn stop_job(&self, who: &Principal, id: i32) -> Result<JobView> {
        self.visible_job(who, id).await?;
        self.engine.stop_job(id).await?;
        self.audit(who, "job.stop", "job", id, "").await;
        self.get_job(who, id).await
    }

    /// Triggers a job once now with an optional param (absent: the job's own; `""`: empty) and
    /// address list. A normal user may name only addresses of the job's own group (listed for
    /// it or registered under its appName); an administrator may name any.
    pub async fn trigger_job(
        &self,
        who: &Principal,
        id: i32,
        executor_param: Option<String>,
        address_list: Option<String>,
    ) -> Result<()> {
        let job = self.visible_job(who, id).await?;
        if let Some(p) = &executor_param {
            crate::jobs::check_param("executorParam", p)?;
            // a command job's param is the command it runs: only while scripts are enabled
            if crate::jobs::runs_command(&job.glue_type, job.executor_handler.as_deref())
                && Some(p) != job.executor_param.as_ref()
            {
                self.require_scripts(&job.glue_type, job.executor_handler.as_deref())
                    .map_err(|_| Error::Forbidden {
                        field: Some("executorParam"),
                        reason: "this job runs its param as a command line; choosing it is refused while script jobs are disabled (security.scripts_enabled)".into(),
                    })?;
            }
        }
        let items =
            super::check_addresses("addressList", address_list.as_deref().unwrap_or_default())?;
        if !who.is_admin() && items.iter().any(|a| !a.is_empty()) {
            let own = self.engine.group_addresses(job.job_group).await?;
            if let Some(bad) = items
                .iter()
                .filter(|a| !a.is_empty())
                .find(|a| !own.contains(&crate::executor::client::normalise(a)))
            {
                return Err(Error::Forbidden {
                    field: Some("addressList"),
                    reason: format!(
                        "`{}` is not an executor of this job's group (only administrators may name other addresses)",
                        shown(bad)
                    ),
                });
            }
        }
        let mut detail = match &executor_param {
            Some(p) => format!("param {}", shown(p)),
            None => "the job's param".to_string(),
        };
        if let Some(a) = address_list.as_deref().filter(|a| !a.trim().is_empty()) {
            detail.push_str(&format!("; addresses {}", shown(a)));
        }
        self.engine
            .trigger_job(id, executor_param, address_list)
            .await?;
        self.audit(who, "job.trigger", "job", id, detail).await;
        Ok(())
    }

    /// The next `count` fire times of a schedule from now, in its time zone (RFC 3339).
    pub fn next_fire_times(
        &self,
        schedule_type: &str,
        schedule_conf: Option<&str>,
        time_zone: Option<&str>,
        count: usize,
    ) -> Result<Vec<String>> {
        if count == 0 || count > MAX_NEXT_TIMES {
            return Err(Error::Invalid {
                field: "count",
                reason: format!("must be between 1 and {MAX_NEXT_TIMES}"),
            });
        }
        let zone: chrono_tz::Tz = match time_zone.map(str::trim).filter(|z| !z.is_empty()) {
            Some(z) => z.parse().map_err(|_| Error::Invalid {
                field: "timeZone",
                reason: format!("`{z}` is not an IANA time zone"),
            })?,
            None => self.tz(),
        };
        let schedule = Schedule::for_job(schedule_type, schedule_conf, time_zone, self.tz())
            .map_err(|e| match e {
                Error::InvalidSchedule { conf, reason } => Error::Invalid {
                    field: "scheduleConf",
                    reason: format!("`{conf}`: {reason}"),
                },
                other => other,
            })?;
        if schedule == Schedule::None {
            return Err(Error::Invalid {
                field: "scheduleType",
                reason: "a NONE schedule has no fire times".into(),
            });
        }
        Ok(schedule
            .next_n(self.engine.clock().now_ms(), count)
            .into_iter()
            .filter_map(|ms| zone.timestamp_millis_opt(ms).single())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .collect())
    }

    /// A script job's source and history (refused for BEAN jobs).
    pub async fn get_glue(&self, who: &Principal, id: i32) -> Result<GlueView> {
        let job = self.visible_job(who, id).await?;
        if job.glue_type.parse::<GlueType>()? == GlueType::Bean {
            return Err(Error::Invalid {
                field: "glueType",
                reason: "a BEAN job has no script source".into(),
            });
        }
        let history = glue::history(self.db(), id)
            .await?
            .into_iter()
            .map(|h| GlueVersion {
                id: h.id,
                glue_type: h.glue_type,
                glue_source: h.glue_source,
                glue_remark: h.glue_remark,
                update_time: rfc3339(h.update_time),
            })
            .collect();
        Ok(GlueView {
            job_id: id,
            glue_type: job.glue_type,
            glue_source: job.glue_source,
            glue_remark: job.glue_remark,
            glue_updatetime: rfc3339(job.glue_updatetime),
            history,
        })
    }

    /// Saves a new version of a script job's source (executors reload it on the next run).
    pub async fn save_glue(&self, who: &Principal, id: i32, input: GlueInput) -> Result<GlueView> {
        let job = self.visible_job(who, id).await?;
        let glue_type: GlueType = job.glue_type.parse()?;
        if glue_type == GlueType::Bean {
            return Err(Error::Invalid {
                field: "glueType",
                reason: "a BEAN job has no script source".into(),
            });
        }
        self.require_scripts(&job.glue_type, job.executor_handler.as_deref())?;
        let n = input.glue_remark.trim().chars().count();
        if !(4..=100).contains(&n) {
            return Err(Error::Invalid {
                field: "glueRemark",
                reason: "must be 4 to 100 characters".into(),
            });
        }
        let source = match glue_type {
            GlueType::GlueShell => input.glue_source.replace('\r', ""),
            _ => input.glue_source,
        };
        let now = self.now();
        let txn = self.db().begin().await?;
        jobs::set_glue(&txn, id, &source, input.glue_remark.trim(), now).await?;
        glue::push(
            &txn,
            id,
            &job.glue_type,
            &source,
            input.glue_remark.trim(),
            now,
        )
        .await?;
        txn.commit().await?;
        self.engine.job_edited(id);
        let detail = format!(
            "{} version {}",
            job.glue_type,
            shown(input.glue_remark.trim())
        );
        self.audit(who, "job.glue", "job", id, detail).await;
        self.get_glue(who, id).await
    }
}
