//! The console's reads and clears of `xxl_job_log` (spec §10 `/joblog`): filtered pages and the
//! nine clear modes. Only dispatched rows (`fire_state = 0`) are listed or cleared; fires still
//! pending belong to the scheduler.

use chrono::NaiveDateTime;
use entity::xxl_job_log::{Column, Entity, Model};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Select,
};

use crate::error::{Error, Result};
use crate::model::fire_state;
use crate::model::wire::SUCCESS_CODE;

/// A run's state as the console filters it (spec §6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunStatus {
    /// `handle_code = 200`.
    Success,
    /// A trigger or handle code other than 0 and 200.
    Failed,
    /// Triggered successfully, no result yet.
    Running,
}

impl RunStatus {
    /// The status of a row.
    pub(crate) fn of(row: &Model) -> RunStatus {
        if row.handle_code == SUCCESS_CODE {
            RunStatus::Success
        } else if !matches!(row.trigger_code, 0 | SUCCESS_CODE)
            || !matches!(row.handle_code, 0 | SUCCESS_CODE)
        {
            RunStatus::Failed
        } else {
            RunStatus::Running
        }
    }

    /// `success`, `failed` or `running`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Failed => "failed",
            RunStatus::Running => "running",
        }
    }

    fn condition(self) -> Condition {
        match self {
            RunStatus::Success => Condition::all().add(Column::HandleCode.eq(SUCCESS_CODE)),
            RunStatus::Failed => Condition::any()
                .add(Column::TriggerCode.is_not_in([0, SUCCESS_CODE]))
                .add(Column::HandleCode.is_not_in([0, SUCCESS_CODE])),
            RunStatus::Running => Condition::all()
                .add(Column::TriggerCode.eq(SUCCESS_CODE))
                .add(Column::HandleCode.eq(0)),
        }
    }
}

impl std::str::FromStr for RunStatus {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "success" => Ok(RunStatus::Success),
            "failed" => Ok(RunStatus::Failed),
            "running" => Ok(RunStatus::Running),
            _ => Err(Error::Invalid {
                field: "status",
                reason: format!("`{s}` is not one of success, failed, running"),
            }),
        }
    }
}

/// Filters of the console's log list.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogFilter {
    /// Only these groups (None = all).
    pub groups: Option<Vec<i32>>,
    /// Only this job.
    pub job_id: Option<i32>,
    /// Only runs in this state.
    pub status: Option<RunStatus>,
    /// Triggered at or after.
    pub from: Option<NaiveDateTime>,
    /// Triggered before.
    pub to: Option<NaiveDateTime>,
}

fn filtered(f: &LogFilter) -> Select<Entity> {
    let mut q = Entity::find().filter(Column::FireState.eq(fire_state::DISPATCHED));
    if let Some(g) = &f.groups {
        q = q.filter(Column::JobGroup.is_in(g.iter().copied()));
    }
    if let Some(j) = f.job_id {
        q = q.filter(Column::JobId.eq(j));
    }
    if let Some(s) = f.status {
        q = q.filter(s.condition());
    }
    if let Some(t) = f.from {
        q = q.filter(Column::TriggerTime.gte(t));
    }
    if let Some(t) = f.to {
        q = q.filter(Column::TriggerTime.lt(t));
    }
    q
}

/// A page of runs, newest trigger first, and the total matching.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    f: &LogFilter,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    let total = filtered(f).count(c).await?;
    let items = filtered(f)
        .order_by_desc(Column::TriggerTime)
        .order_by_desc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, super::logs::shown(items)))
}

/// What a clear removes (spec §10 `clearLog` types 1–9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClearMode {
    /// Runs triggered before this time (types 1–4: one, three, six, twelve months ago).
    OlderThan(NaiveDateTime),
    /// All but the newest this many runs (types 5–8: 1,000, 10,000, 30,000, 100,000).
    KeepNewest(u64),
    /// Every run (type 9).
    All,
}

impl ClearMode {
    /// The mode of XXL-JOB's `type` number, relative to `now`.
    pub(crate) fn from_type(t: i32, now: NaiveDateTime) -> Result<ClearMode> {
        let months = |m: u32| {
            now.checked_sub_months(chrono::Months::new(m))
                .map(ClearMode::OlderThan)
                .unwrap_or(ClearMode::All)
        };
        Ok(match t {
            1 => months(1),
            2 => months(3),
            3 => months(6),
            4 => months(12),
            5 => ClearMode::KeepNewest(1_000),
            6 => ClearMode::KeepNewest(10_000),
            7 => ClearMode::KeepNewest(30_000),
            8 => ClearMode::KeepNewest(100_000),
            9 => ClearMode::All,
            _ => {
                return Err(Error::Invalid {
                    field: "type",
                    reason: format!("{t} is not a clear mode (1 to 9)"),
                });
            }
        })
    }
}

/// Deletes the runs `mode` selects among those of `groups` / `job_id`, in batches of 1,000;
/// returns how many were deleted.
pub(crate) async fn clear(
    c: &impl ConnectionTrait,
    groups: Option<Vec<i32>>,
    job_id: Option<i32>,
    mode: ClearMode,
) -> Result<u64> {
    let f = LogFilter {
        groups,
        job_id,
        to: match mode {
            ClearMode::OlderThan(t) => Some(t),
            _ => None,
        },
        ..Default::default()
    };
    let skip = match mode {
        ClearMode::KeepNewest(n) => n,
        _ => 0,
    };
    let mut deleted = 0;
    loop {
        let ids: Vec<i64> = filtered(&f)
            .select_only()
            .column(Column::Id)
            .order_by_desc(Column::TriggerTime)
            .order_by_desc(Column::Id)
            .offset(skip)
            .limit(1_000)
            .into_tuple()
            .all(c)
            .await?;
        if ids.is_empty() {
            return Ok(deleted);
        }
        deleted += Entity::delete_many()
            .filter(Column::Id.is_in(ids))
            .exec(c)
            .await?
            .rows_affected;
    }
}

/// Deletes every log row of a job, pending fires included (the job is being deleted).
pub(crate) async fn delete_for_job(c: &impl ConnectionTrait, job_id: i32) -> Result<u64> {
    Ok(Entity::delete_many()
        .filter(Column::JobId.eq(job_id))
        .exec(c)
        .await?
        .rows_affected)
}
