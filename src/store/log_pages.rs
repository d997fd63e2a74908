//! The console's reads and clears of `xxl_job_log` (protocol.md §9 `/joblog`): filtered pages and the
//! nine clear modes. Only dispatched rows (`fire_state = 0`) are listed or cleared; fires still
//! pending belong to the scheduler.

use chrono::NaiveDateTime;
use entity::xxl_job_log::{Column, Entity, Model};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Select,
};

use super::log_by_job::of_job;

use crate::error::{Error, Result};
use crate::model::fire_state;
use crate::model::wire::SUCCESS_CODE;

/// A run's state as the console filters it (protocol.md §5.7).
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

fn filtered(backend: DbBackend, f: &LogFilter) -> Select<Entity> {
    let mut q = Entity::find().filter(super::logs::dispatched());
    if let Some(g) = &f.groups {
        q = q.filter(Column::JobGroup.is_in(g.iter().copied()));
    }
    if let Some(j) = f.job_id {
        q = q.filter(of_job(backend, j));
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

/// How many runs there are (dispatched rows), counted as every row less the fires not yet
/// dispatched: the first count walks the table's smallest index, the second the partial
/// `i_fire_state`. Counting `fire_state = 0` itself reads every row of the table on SQLite,
/// whose `i_fire_state` holds only the fires not yet dispatched.
async fn all_dispatched(c: &impl ConnectionTrait) -> Result<u64> {
    let row = c
        .query_one_raw(sea_orm::Statement::from_string(
            c.get_database_backend(),
            all_dispatched_sql(),
        ))
        .await?;
    let n: i64 = match row {
        Some(r) => r.try_get("", "n")?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The statement of [`all_dispatched`].
fn all_dispatched_sql() -> String {
    format!(
        "SELECT (SELECT COUNT(*) FROM xxl_job_log) - \
         (SELECT COUNT(*) FROM xxl_job_log WHERE fire_state <> {}) AS n",
        fire_state::DISPATCHED
    )
}

/// A page of runs, newest trigger first, and the total matching.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    f: &LogFilter,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    let total = if *f == LogFilter::default() {
        all_dispatched(c).await?
    } else {
        filtered(c.get_database_backend(), f).count(c).await?
    };
    let items = filtered(c.get_database_backend(), f)
        .order_by_desc(Column::TriggerTime)
        .order_by_desc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, super::logs::shown(items)))
}

/// What a clear removes (protocol.md §9 `clearLog` types 1–9).
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
        let ids: Vec<i64> = filtered(c.get_database_backend(), &f)
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

/// Deletes every log row of a job, pending fires included (the job is being deleted), and on
/// SQLite its entries in the index by job (those of fires journalled but never written too).
pub(crate) async fn delete_for_job(c: &impl ConnectionTrait, job_id: i32) -> Result<u64> {
    let backend = c.get_database_backend();
    let n = Entity::delete_many()
        .filter(of_job(backend, job_id))
        .exec(c)
        .await?
        .rows_affected;
    if backend == DbBackend::Sqlite {
        c.execute_raw(sea_orm::Statement::from_sql_and_values(
            backend,
            "DELETE FROM xjob_log_by_job WHERE job_id = ?",
            [job_id.into()],
        ))
        .await?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TriggerType;
    use sea_orm::QueryTrait;

    /// The unfiltered total counts the dispatched runs only (every row less the pending
    /// fires), on every backend, as the filtered count does; on SQLite it reads indexes only.
    #[tokio::test]
    async fn the_unfiltered_total_counts_dispatched_runs_through_indexes() {
        let mut dbs = vec![crate::store::tests::memory_db().await];
        dbs.extend(crate::store::tests::every_backend().await);
        for db in dbs {
            let backend = db.get_database_backend();
            for _ in 0..3 {
                crate::store::logs::insert_run(&db, 1, 7, 1_000, TriggerType::Manual, 0)
                    .await
                    .unwrap();
            }
            let pending = |t: i64| crate::fire::PendingFire {
                job_id: 7,
                job_group: 1,
                fire_time: t,
                trigger_type: TriggerType::Cron,
            };
            let n = crate::store::logs::insert_pending(&db, &[pending(5_000), pending(6_000)])
                .await
                .unwrap();
            assert_eq!(n, 2, "{backend:?}");
            let (total, rows) = page(&db, &LogFilter::default(), 0, 10).await.unwrap();
            assert_eq!((total, rows.len()), (3, 3), "{backend:?}");
            let by_job = LogFilter {
                job_id: Some(7),
                ..Default::default()
            };
            assert_eq!(page(&db, &by_job, 0, 10).await.unwrap().0, 3, "{backend:?}");
            if backend == sea_orm::DbBackend::Sqlite {
                // by job: through the side index and its tail, never a walk of the log table
                let from = chrono::DateTime::from_timestamp(0, 0).unwrap().naive_utc();
                for f in [
                    by_job.clone(),
                    LogFilter {
                        from: Some(from),
                        status: Some(RunStatus::Failed),
                        ..by_job.clone()
                    },
                ] {
                    let stmt = filtered(backend, &f)
                        .order_by_desc(Column::TriggerTime)
                        .limit(10)
                        .build(backend);
                    let plan = crate::store::tests::plan(&db, stmt).await;
                    assert!(plan.contains("xjob_log_by_job "), "{plan}");
                    assert!(!plan.contains("SCAN xxl_job_log"), "{plan}");
                }
                let plan = crate::store::tests::plan(
                    &db,
                    sea_orm::Statement::from_sql_and_values(backend, all_dispatched_sql(), []),
                )
                .await;
                for step in plan.split("; ").filter(|s| s.contains("xxl_job_log")) {
                    assert!(step.contains("INDEX"), "{plan}");
                }
            }
        }
    }

    /// On PostgreSQL the console's reads go through its indexes of dispatched runs
    /// (`I_trigger_time`, `I_jobgroup`, which leave out fires not yet dispatched) in the
    /// generic plan a prepared statement settles on, never a walk of the run table: the page
    /// newest first, filtered by groups and time, its count, and the day report's count.
    #[tokio::test]
    async fn console_reads_on_postgres_use_the_dispatched_runs_indexes() {
        use crate::store::tests::pg_generic_plan;
        for db in crate::store::tests::every_backend().await {
            let backend = db.get_database_backend();
            if backend != sea_orm::DbBackend::Postgres {
                continue;
            }
            // 30,000 runs of 300 groups over 30,000 seconds, and 3,000 fires pending
            db.execute_unprepared(
                "INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state) \
                 SELECT g % 300, g, timestamp '2026-12-01' + g * interval '1 second', 200, \
                 200, 0, 2, g, 0 FROM generate_series(1, 30000) g; \
                 INSERT INTO xxl_job_log (job_group, job_id, trigger_time, trigger_code, \
                 handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state) \
                 SELECT 1, g, timestamp '2026-12-02' + g * interval '1 second', 0, 0, 0, 0, -g, \
                 1 FROM generate_series(1, 3000) g; ANALYZE xxl_job_log",
            )
            .await
            .unwrap();
            let t = |s: i64| crate::clock::ms_to_naive(1_796_083_200_000 + s * 1_000);
            let by_group = LogFilter {
                groups: Some(vec![7]),
                ..Default::default()
            };
            let by_time = LogFilter {
                from: Some(t(1_000)),
                to: Some(t(2_000)),
                ..Default::default()
            };
            let newest_first = |f: &LogFilter| {
                filtered(backend, f)
                    .order_by_desc(Column::TriggerTime)
                    .order_by_desc(Column::Id)
                    .offset(20)
                    .limit(10)
                    .build(backend)
            };
            for (what, stmt, index) in [
                (
                    "page",
                    newest_first(&LogFilter::default()),
                    "I_trigger_time",
                ),
                ("page by time", newest_first(&by_time), "I_trigger_time"),
                (
                    "count by group",
                    filtered(backend, &by_group)
                        .select_only()
                        .column_as(Column::Id.count(), "n")
                        .build(backend),
                    "I_jobgroup",
                ),
                (
                    "day report",
                    crate::store::reports::count_between_query(t(0), t(86_400)).build(backend),
                    "I_trigger_time",
                ),
            ] {
                let plan = pg_generic_plan(&db, stmt).await;
                assert!(plan.contains(index), "{what}: {plan}");
                assert!(!plan.contains("Seq Scan on xxl_job_log"), "{what}: {plan}");
            }
            // and the rows are the dispatched ones
            let (total, rows) = page(&db, &by_group, 0, 5).await.unwrap();
            assert_eq!((total, rows.len()), (100, 5));
            db.close().await.unwrap();
        }
    }
}
