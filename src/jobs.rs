//! [`JobSpec`]: a job as a user defines it, validated as XXL-JOB validates `/jobinfo/add`
//! (protocol.md §9) before it reaches the store.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::TriggerStatus;
use crate::model::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
use crate::schedule::Schedule;

/// The longest executor param (job or manual trigger), in characters: at most 64,000 bytes of
/// UTF-8, so every run row can hold it (a MySQL `TEXT` holds 65,535 bytes), and a broadcast's
/// shards, which each carry it, stay small.
pub(crate) const MAX_PARAM_CHARS: usize = 16_000;

/// The text fields of a job and the most characters their columns hold (protocol.md §8).
pub(crate) const FIELD_LIMITS: [(&str, usize); 8] = [
    ("jobDesc", 255),
    ("author", 64),
    ("alarmEmail", 255),
    ("scheduleConf", 128),
    ("executorHandler", 255),
    ("childJobId", 255),
    ("alarmWebhook", 255),
    ("glueRemark", 128),
];

/// Whether a job of `glue_type` with `handler` runs a script: a GLUE script type, or a BEAN job
/// of a built-in command handler (its param is the command line). Every rule about script jobs
/// (`security.scripts_enabled`, who may choose their source or param) applies to both alike.
pub(crate) fn runs_script(glue_type: &str, handler: Option<&str>) -> bool {
    !is_bean(glue_type) || runs_command(glue_type, handler)
}

/// Whether a job of `glue_type` with `handler` is a BEAN job of the built-in command handler,
/// whose param is the command line it runs.
pub(crate) fn runs_command(glue_type: &str, handler: Option<&str>) -> bool {
    is_bean(glue_type)
        && handler.is_some_and(|h| h.trim() == crate::executor::builtin::COMMAND_HANDLER)
}

fn is_bean(glue_type: &str) -> bool {
    let t = glue_type.trim();
    t.is_empty() || t == GlueType::Bean.to_string()
}

/// Refuses an executor param longer than [`MAX_PARAM_CHARS`] (`field` names it).
pub(crate) fn check_param(field: &'static str, param: &str) -> Result<()> {
    check_len(field, param, MAX_PARAM_CHARS)
}

/// Refuses `text` longer than `max` characters (`field` names it).
pub(crate) fn check_len(field: &'static str, text: &str, max: usize) -> Result<()> {
    // a byte count below the limit settles it without counting characters
    if text.len() > max && text.chars().count() > max {
        return Err(Error::Invalid {
            field,
            reason: format!("must be at most {max} characters"),
        });
    }
    Ok(())
}

/// A job definition with XXL-JOB's field names (camelCase on the wire).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JobSpec {
    /// Executor group id.
    pub job_group: i32,
    /// Description (required).
    pub job_desc: String,
    /// Owner (required).
    pub author: String,
    /// Comma-separated alarm addresses.
    pub alarm_email: Option<String>,
    /// NONE, CRON or FIX_RATE.
    pub schedule_type: String,
    /// Cron expression or seconds.
    pub schedule_conf: Option<String>,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    pub misfire_strategy: String,
    /// One of the ten routing strategies.
    pub executor_route_strategy: String,
    /// Handler name (required for BEAN).
    pub executor_handler: Option<String>,
    /// Param passed to the handler.
    pub executor_param: Option<String>,
    /// SERIAL_EXECUTION, DISCARD_LATER or COVER_EARLY.
    pub executor_block_strategy: String,
    /// Seconds; 0 = none.
    pub executor_timeout: i32,
    /// Retries after a failure.
    pub executor_fail_retry_count: i32,
    /// BEAN or a GLUE type.
    pub glue_type: String,
    /// Script source.
    pub glue_source: Option<String>,
    /// Script remark.
    pub glue_remark: Option<String>,
    /// Comma-separated child job ids.
    pub child_job_id: Option<String>,
    /// IANA time zone for CRON (None = the center's).
    pub time_zone: Option<String>,
    /// Seconds before a fail retry.
    pub retry_interval: i32,
    /// URL that receives a JSON POST when a run fails.
    pub alarm_webhook: Option<String>,
}

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            job_group: 0,
            job_desc: String::new(),
            author: String::new(),
            alarm_email: None,
            schedule_type: "CRON".into(),
            schedule_conf: None,
            misfire_strategy: "DO_NOTHING".into(),
            executor_route_strategy: "FIRST".into(),
            executor_handler: None,
            executor_param: None,
            executor_block_strategy: "SERIAL_EXECUTION".into(),
            executor_timeout: 0,
            executor_fail_retry_count: 0,
            glue_type: "BEAN".into(),
            glue_source: None,
            glue_remark: None,
            child_job_id: None,
            time_zone: None,
            retry_interval: 0,
            alarm_webhook: None,
        }
    }
}

impl JobSpec {
    /// A CRON job on a BEAN handler with XXL-JOB's defaults for the rest.
    pub fn cron(job_group: i32, desc: &str, cron: &str, handler: &str) -> Self {
        JobSpec {
            job_group,
            job_desc: desc.into(),
            author: "xjob".into(),
            schedule_type: "CRON".into(),
            schedule_conf: Some(cron.into()),
            executor_handler: Some(handler.into()),
            ..Default::default()
        }
    }

    /// A FIX_RATE job on a BEAN handler.
    pub fn fix_rate(job_group: i32, desc: &str, secs: u32, handler: &str) -> Self {
        JobSpec {
            schedule_type: "FIX_RATE".into(),
            schedule_conf: Some(secs.to_string()),
            ..JobSpec::cron(job_group, desc, "", handler)
        }
    }

    /// Checks every field and builds the row to insert (stopped, no schedule state yet).
    pub fn validate(
        self,
        default_zone: chrono_tz::Tz,
        now: chrono::NaiveDateTime,
    ) -> Result<entity::xxl_job_info::Model> {
        let invalid = |field: &'static str, reason: &str| Error::Invalid {
            field,
            reason: reason.into(),
        };
        if self.job_desc.trim().is_empty() {
            return Err(invalid("jobDesc", "is required"));
        }
        let texts = [
            Some(self.job_desc.as_str()),
            Some(self.author.as_str()),
            self.alarm_email.as_deref(),
            self.schedule_conf.as_deref(),
            self.executor_handler.as_deref(),
            self.child_job_id.as_deref(),
            self.alarm_webhook.as_deref(),
            self.glue_remark.as_deref(),
        ];
        // in FIELD_LIMITS' order
        for (text, (field, max)) in texts.into_iter().zip(FIELD_LIMITS) {
            check_len(field, text.unwrap_or_default(), max)?;
        }
        check_param(
            "executorParam",
            self.executor_param.as_deref().unwrap_or_default(),
        )?;
        if self.author.trim().is_empty() {
            return Err(invalid("author", "is required"));
        }
        Schedule::for_job(
            &self.schedule_type,
            self.schedule_conf.as_deref(),
            self.time_zone.as_deref(),
            default_zone,
        )
        .map_err(|e| match e {
            Error::InvalidSchedule { conf, reason } => Error::Invalid {
                field: "scheduleConf",
                reason: format!("`{conf}`: {reason}"),
            },
            other => other,
        })?;
        let _: ScheduleType = self.schedule_type.parse()?;
        let _: MisfireStrategy = self.misfire_strategy.parse()?;
        let _: RouteStrategy = self.executor_route_strategy.parse()?;
        let _: BlockStrategy = self.executor_block_strategy.parse()?;
        let glue: GlueType = self.glue_type.parse()?;
        let handler = self
            .executor_handler
            .clone()
            .filter(|h| !h.trim().is_empty());
        if glue == GlueType::Bean && handler.is_none() {
            return Err(invalid("executorHandler", "is required for BEAN jobs"));
        }
        if self.executor_timeout < 0 {
            return Err(invalid("executorTimeout", "must be 0 or more seconds"));
        }
        if self.executor_fail_retry_count < 0 {
            return Err(invalid("executorFailRetryCount", "must be 0 or more"));
        }
        if self.retry_interval < 0 {
            return Err(invalid("retryInterval", "must be 0 or more seconds"));
        }
        if let Some(url) = self
            .alarm_webhook
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(
                "alarmWebhook",
                "must be an http:// or https:// URL",
            ));
        }
        if let Some(children) = &self.child_job_id {
            for c in children.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                if c.parse::<u32>().ok().filter(|&n| n > 0).is_none() {
                    return Err(invalid(
                        "childJobId",
                        "must be a comma-separated list of job ids",
                    ));
                }
            }
        }
        let glue_source = match glue {
            GlueType::GlueShell => self.glue_source.map(|s| s.replace('\r', "")),
            _ => self.glue_source,
        };
        Ok(entity::xxl_job_info::Model {
            id: 0,
            job_group: self.job_group,
            job_desc: self.job_desc,
            add_time: Some(now),
            update_time: Some(now),
            author: Some(self.author),
            alarm_email: self.alarm_email,
            schedule_type: self.schedule_type,
            schedule_conf: self.schedule_conf,
            misfire_strategy: self.misfire_strategy,
            executor_route_strategy: Some(self.executor_route_strategy),
            executor_handler: handler,
            executor_param: self.executor_param,
            executor_block_strategy: Some(self.executor_block_strategy),
            executor_timeout: self.executor_timeout,
            executor_fail_retry_count: self.executor_fail_retry_count,
            glue_type: self.glue_type,
            glue_source,
            glue_remark: self.glue_remark,
            glue_updatetime: Some(now),
            child_jobid: self.child_job_id,
            trigger_status: TriggerStatus::Stopped.code(),
            trigger_last_time: 0,
            trigger_next_time: 0,
            time_zone: self.time_zone.filter(|z| !z.trim().is_empty()),
            retry_interval: self.retry_interval,
            alarm_webhook: self.alarm_webhook.filter(|u| !u.trim().is_empty()),
        })
    }
}

/// A stored job as the scan and dispatch use it: the row (read through `Deref`) with its
/// strategy names parsed once, when it is read, instead of on every fire.
#[derive(Debug, PartialEq, Eq)]
pub struct JobDef {
    row: entity::xxl_job_info::Model,
    /// `executor_route_strategy` (`None` when the text names none: the trigger fails).
    pub route: Option<RouteStrategy>,
    /// `executor_block_strategy` (`None`: the executor's default, serial execution).
    pub block: Option<BlockStrategy>,
    /// `misfire_strategy` (an unknown name counts as DO_NOTHING).
    pub misfire: MisfireStrategy,
    /// `child_jobid` when it names any (shared with the run records of this definition, so
    /// the writer knows a run's children without reading the job again).
    pub children: Option<std::sync::Arc<str>>,
}

impl JobDef {
    /// Parses `row`'s strategies.
    pub fn new(row: entity::xxl_job_info::Model) -> Self {
        JobDef {
            route: row
                .executor_route_strategy
                .as_deref()
                .and_then(|r| r.parse().ok()),
            block: row
                .executor_block_strategy
                .as_deref()
                .and_then(|b| b.parse().ok()),
            misfire: row
                .misfire_strategy
                .parse()
                .unwrap_or(MisfireStrategy::DoNothing),
            children: row
                .child_jobid
                .as_deref()
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(std::sync::Arc::from),
            row,
        }
    }

    /// The stored row.
    pub fn row(&self) -> &entity::xxl_job_info::Model {
        &self.row
    }
}

impl std::ops::Deref for JobDef {
    type Target = entity::xxl_job_info::Model;

    fn deref(&self) -> &Self::Target {
        &self.row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> chrono::NaiveDateTime {
        chrono::DateTime::from_timestamp(0, 0)
            .unwrap_or_default()
            .naive_utc()
    }

    /// A job's strategy names are parsed once into its definition; names a newer or older
    /// XXL-JOB wrote that xjob does not know become no route (the trigger fails with XXL-JOB's
    /// message), the default block strategy and DO_NOTHING.
    #[test]
    fn a_job_definition_parses_its_strategies_once() {
        let mut spec = JobSpec::cron(1, "j", "* * * * * ?", "h");
        spec.executor_route_strategy = "ROUND".into();
        spec.executor_block_strategy = "COVER_EARLY".into();
        spec.misfire_strategy = "FIRE_ONCE_NOW".into();
        let row = spec.validate(chrono_tz::UTC, now()).unwrap();
        let def = JobDef::new(row.clone());
        assert_eq!(def.route, Some(RouteStrategy::Round));
        assert_eq!(def.block, Some(BlockStrategy::CoverEarly));
        assert_eq!(def.misfire, MisfireStrategy::FireOnceNow);
        assert_eq!(def.row(), &row);
        let mut odd = row;
        odd.executor_route_strategy = Some("SOMETHING_NEW".into());
        odd.executor_block_strategy = None;
        odd.misfire_strategy = "?".into();
        let def = JobDef::new(odd);
        assert_eq!((def.route, def.block), (None, None));
        assert_eq!(def.misfire, MisfireStrategy::DoNothing);
    }

    /// Each invalid job field is refused with an error naming that field.
    #[test]
    fn validation_names_the_field() {
        let check = |spec: JobSpec, field: &str| {
            let e = spec
                .validate(chrono_tz::UTC, now())
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{e} should name {field}");
        };
        check(JobSpec::cron(1, "", "* * * * * ?", "h"), "jobDesc");
        check(JobSpec::cron(1, "d", "* * * *", "h"), "scheduleConf");
        check(JobSpec::cron(1, "d", "* * * * * ?", ""), "executorHandler");
        check(JobSpec::fix_rate(1, "d", 0, "h"), "scheduleConf");
        check(
            JobSpec {
                executor_route_strategy: "NEAREST".into(),
                ..JobSpec::cron(1, "d", "* * * * * ?", "h")
            },
            "executorRouteStrategy",
        );
        check(
            JobSpec {
                child_job_id: Some("1,x".into()),
                ..JobSpec::cron(1, "d", "* * * * * ?", "h")
            },
            "childJobId",
        );
        let ok = JobSpec::cron(1, "d", "* * * * * ?", "h")
            .validate(chrono_tz::UTC, now())
            .expect("valid");
        assert_eq!(ok.trigger_status, 0);
    }
}
