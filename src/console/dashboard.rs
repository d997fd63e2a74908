//! The dashboard (protocol.md §9 `/` and `/chartInfo`): totals, and runs per day from the report
//! table (days of the center's time zone).

use chrono::{NaiveDateTime, TimeDelta};
use serde::Serialize;

use super::{Console, Principal};
use crate::error::{Error, Result};
use crate::store::{jobs, reports};

/// Longest chart range, days.
pub const MAX_CHART_DAYS: i64 = 366;

/// The dashboard's counts (XXL-JOB's names).
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dashboard {
    /// Jobs defined (in the user's groups).
    pub job_info_count: u64,
    /// Runs counted by the report (every group).
    pub job_log_count: i64,
    /// Of those, successful.
    pub job_log_success_count: i64,
    /// Of those, failed.
    pub job_log_fail_count: i64,
    /// Of those, still running.
    pub job_log_running_count: i64,
    /// Distinct live executor addresses.
    pub executor_count: usize,
}

/// Runs per day over a range (XXL-JOB's `chartInfo` names).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    /// Days, `yyyy-MM-dd` in the center's time zone.
    pub trigger_day_list: Vec<String>,
    /// Running runs per day.
    pub trigger_day_count_running_list: Vec<i32>,
    /// Successful runs per day.
    pub trigger_day_count_suc_list: Vec<i32>,
    /// Failed runs per day.
    pub trigger_day_count_fail_list: Vec<i32>,
    /// Sum of running.
    pub trigger_count_running_total: i64,
    /// Sum of successful.
    pub trigger_count_suc_total: i64,
    /// Sum of failed.
    pub trigger_count_fail_total: i64,
}

impl Console {
    /// The dashboard's counts.
    pub async fn dashboard(&self, who: &Principal) -> Result<Dashboard> {
        let groups = who.visible_groups();
        let job_info_count = jobs::count(self.db(), groups.as_deref()).await?;
        // today's runs as they finish, not as of the last minute's count
        self.engine.fresh_counts().await?;
        let rows = reports::all(self.db()).await?;
        let sum = |f: fn(&entity::xxl_job_log_report::Model) -> i32| {
            rows.iter().map(|r| f(r) as i64).sum::<i64>()
        };
        let (running, suc, fail) = (
            sum(|r| r.running_count),
            sum(|r| r.suc_count),
            sum(|r| r.fail_count),
        );
        let live: std::collections::HashSet<String> = self
            .engine
            .live_executors()
            .await?
            .into_values()
            .flatten()
            .collect();
        Ok(Dashboard {
            job_info_count,
            job_log_count: running + suc + fail,
            job_log_success_count: suc,
            job_log_fail_count: fail,
            job_log_running_count: running,
            executor_count: live.len(),
        })
    }

    /// Runs per day in `[from, to)` (default: the last 7 days); days without runs count 0.
    pub async fn chart(&self, from: Option<&str>, to: Option<&str>) -> Result<Chart> {
        let tz = self.tz();
        let now = self.now();
        let to = match to.filter(|s| !s.is_empty()) {
            Some(s) => super::parse_time("to", s, tz)?,
            None => now,
        };
        let from = match from.filter(|s| !s.is_empty()) {
            Some(s) => super::parse_time("from", s, tz)?,
            None => to - TimeDelta::days(7),
        };
        if from >= to {
            return Err(Error::Invalid {
                field: "from",
                reason: "must be before `to`".into(),
            });
        }
        if to - from > TimeDelta::days(MAX_CHART_DAYS) {
            return Err(Error::Invalid {
                field: "from",
                reason: format!("the range must be at most {MAX_CHART_DAYS} days"),
            });
        }
        let local = |t: NaiveDateTime| t.and_utc().with_timezone(&tz).date_naive();
        self.engine.fresh_counts().await?;
        let rows = reports::between(self.db(), from, to).await?;
        let mut chart = Chart {
            trigger_day_list: vec![],
            trigger_day_count_running_list: vec![],
            trigger_day_count_suc_list: vec![],
            trigger_day_count_fail_list: vec![],
            trigger_count_running_total: 0,
            trigger_count_suc_total: 0,
            trigger_count_fail_total: 0,
        };
        let (first, last) = (local(from), local(to - TimeDelta::milliseconds(1)));
        for day in first.iter_days().take_while(|d| *d <= last) {
            let r = rows
                .iter()
                .filter(|r| r.trigger_day.map(local) == Some(day))
                .fold((0, 0, 0), |a, r| {
                    (a.0 + r.running_count, a.1 + r.suc_count, a.2 + r.fail_count)
                });
            chart
                .trigger_day_list
                .push(day.format("%Y-%m-%d").to_string());
            chart.trigger_day_count_running_list.push(r.0);
            chart.trigger_day_count_suc_list.push(r.1);
            chart.trigger_day_count_fail_list.push(r.2);
            chart.trigger_count_running_total += r.0 as i64;
            chart.trigger_count_suc_total += r.1 as i64;
            chart.trigger_count_fail_total += r.2 as i64;
        }
        Ok(chart)
    }
}
