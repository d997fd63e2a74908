//! `xxl_job_info`: due-job reads, batched schedule updates, and job CRUD used by the library API.

use entity::xxl_job_info::{ActiveModel, Column, Entity, Model};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::clock::{ms_to_naive, naive_to_ms};
use crate::error::{Error, Result};
use crate::model::TriggerStatus;
use crate::store::port::{FromRow, Port, Row, Value};
use sea_orm::DbBackend;

/// The scan's read: running jobs due by `max_next`, by id, at most `limit`; only those in
/// `buckets` unless it is empty (every bucket).
pub(crate) async fn due_in(
    port: &Port<'_>,
    max_next: i64,
    limit: u64,
    buckets: &[i32],
) -> Result<Vec<Model>> {
    let mut q = due_query(max_next, limit);
    if !buckets.is_empty() {
        q = q.filter(crate::store::logs::bucket_filter(
            port.backend(),
            "id",
            buckets,
        ));
    }
    port.select(&q).await
}

fn due_query(max_next: i64, limit: u64) -> sea_orm::Select<Entity> {
    Entity::find()
        .filter(Column::TriggerStatus.eq(TriggerStatus::Running.code()))
        .filter(Column::TriggerNextTime.lte(max_next))
        .order_by_asc(Column::Id)
        .limit(limit)
}

pub(crate) use crate::schedule::plan::ScheduleUpdate;

/// Writes schedule updates; only rows still running are touched, so a job stopped
/// concurrently from the console is not re-enabled. On SQLite one cached single-row statement
/// per job (by primary key; no statement to parse per pass); on PostgreSQL and MySQL one
/// constant statement per 1,000 jobs, the values as one JSON parameter (no CASE chain to
/// build, parse and plan per pass).
pub(crate) async fn update_schedules(port: &Port<'_>, updates: &[ScheduleUpdate]) -> Result<()> {
    let running = TriggerStatus::Running.code();
    let backend = port.backend();
    if backend == DbBackend::Sqlite {
        for u in updates {
            let args = [u.last.into(), u.next.into(), u.status.into(), u.id.into()];
            port.execute(&SQLITE_SCHEDULE_UPDATE, &args).await?;
        }
        return Ok(());
    }
    let sql = match backend {
        DbBackend::Postgres => format!(
            "UPDATE xxl_job_info AS j SET trigger_last_time = v.l, trigger_next_time = v.n, \
             trigger_status = v.s FROM json_to_recordset(?::json) \
             AS v(id int, l bigint, n bigint, s smallint) \
             WHERE j.id = v.id AND j.trigger_status = {running}"
        ),
        _ => format!(
            "UPDATE xxl_job_info AS j JOIN JSON_TABLE(?, '$[*]' COLUMNS(id INT PATH '$.id', \
             l BIGINT PATH '$.l', n BIGINT PATH '$.n', s SMALLINT PATH '$.s')) AS v \
             ON j.id = v.id SET j.trigger_last_time = v.l, j.trigger_next_time = v.n, \
             j.trigger_status = v.s WHERE j.trigger_status = {running}"
        ),
    };
    for chunk in updates.chunks(1000) {
        let rows = serde_json::Value::Array(
            chunk
                .iter()
                .map(|u| serde_json::json!({"id": u.id, "l": u.last, "n": u.next, "s": u.status}))
                .collect(),
        )
        .to_string();
        port.execute(&sql, &[rows.into()]).await?;
    }
    Ok(())
}

/// One job's schedule update on SQLite (last, next, status, id).
static SQLITE_SCHEDULE_UPDATE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "UPDATE OR IGNORE xxl_job_info SET trigger_last_time = ?, trigger_next_time = ?, \
         trigger_status = ? WHERE id = ? AND trigger_status = {}",
        TriggerStatus::Running.code()
    )
});

/// A due job as a single node's scan reads it: its schedule state and the version of its
/// definition (`update_time`), so a pass re-reads a whole job only when it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DueRow {
    pub id: i32,
    pub version: Option<chrono::NaiveDateTime>,
    pub last: i64,
    pub next: i64,
}

impl FromRow for DueRow {
    fn from_row(r: &Row<'_>) -> Result<Self> {
        Ok(DueRow {
            id: r.get(0)?,
            version: r.get(1)?,
            last: r.get(2)?,
            next: r.get(3)?,
        })
    }
}

/// The narrow scan read (as [`due`], without the definitions): running jobs due by
/// `max_next` with an id above `after_id`, by id, at most `limit`.
pub(crate) async fn due_rows(
    port: &Port<'_>,
    max_next: i64,
    after_id: i32,
    limit: u64,
) -> Result<Vec<DueRow>> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT id, update_time, trigger_last_time, trigger_next_time FROM xxl_job_info \
             WHERE trigger_status = {} AND trigger_next_time <= ? AND id > ? \
             ORDER BY id LIMIT ?",
            TriggerStatus::Running.code()
        )
    });
    let args = [max_next.into(), after_id.into(), (limit as i64).into()];
    port.rows(&SQL, &args).await
}

/// Every column of a job, in the entity's order (as its [`FromRow`] reads them).
pub(crate) const JOB_COLUMNS: &str = "id, job_group, job_desc, add_time, update_time, author, \
    alarm_email, schedule_type, schedule_conf, misfire_strategy, executor_route_strategy, \
    executor_handler, executor_param, executor_block_strategy, executor_timeout, \
    executor_fail_retry_count, glue_type, glue_source, glue_remark, glue_updatetime, \
    child_jobid, trigger_status, trigger_last_time, trigger_next_time, time_zone, \
    retry_interval, alarm_webhook";

impl FromRow for Model {
    fn from_row(r: &Row<'_>) -> Result<Self> {
        Ok(Model {
            id: r.get(0)?,
            job_group: r.get(1)?,
            job_desc: r.get(2)?,
            add_time: r.get(3)?,
            update_time: r.get(4)?,
            author: r.get(5)?,
            alarm_email: r.get(6)?,
            schedule_type: r.get(7)?,
            schedule_conf: r.get(8)?,
            misfire_strategy: r.get(9)?,
            executor_route_strategy: r.get(10)?,
            executor_handler: r.get(11)?,
            executor_param: r.get(12)?,
            executor_block_strategy: r.get(13)?,
            executor_timeout: r.get(14)?,
            executor_fail_retry_count: r.get(15)?,
            glue_type: r.get(16)?,
            glue_source: r.get(17)?,
            glue_remark: r.get(18)?,
            glue_updatetime: r.get(19)?,
            child_jobid: r.get(20)?,
            trigger_status: r.get(21)?,
            trigger_last_time: r.get(22)?,
            trigger_next_time: r.get(23)?,
            time_zone: r.get(24)?,
            retry_interval: r.get(25)?,
            alarm_webhook: r.get(26)?,
        })
    }
}

/// Job `id`, read in `port`'s transaction.
pub(crate) async fn by_id(port: &Port<'_>, id: i32) -> Result<Option<Model>> {
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {JOB_COLUMNS} FROM xxl_job_info WHERE id = ?"));
    port.row(&SQL, &[id.into()]).await
}

/// One job by id.
pub async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Model> {
    Entity::find_by_id(id)
        .one(c)
        .await?
        .ok_or(Error::JobNotFound { job_id: id })
}

/// Jobs by id (missing ids are simply absent).
pub(crate) async fn get_many(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Model>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        out.extend(
            Entity::find()
                .filter(Column::Id.is_in(chunk.iter().copied()))
                .all(c)
                .await?,
        );
    }
    Ok(out)
}

/// Inserts a job (created stopped, as XXL-JOB does) and returns its id.
pub async fn insert(c: &sea_orm::DatabaseConnection, job: Model) -> Result<i32> {
    Ok(insert_in(&Port::db(c), &job, None).await?.id)
}

/// Inserts a job and returns it as stored, in one statement: created stopped, or with `first`
/// running from that first fire time (what [`set_running`] would make of it). Datetimes are
/// kept to the millisecond, as every backend stores them alike.
pub(crate) async fn insert_in(port: &Port<'_>, j: &Model, first: Option<i64>) -> Result<Model> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let columns = JOB_COLUMNS.trim_start_matches("id, ");
        let marks = vec!["?"; columns.split(',').count()].join(", ");
        format!("INSERT INTO xxl_job_info ({columns}) VALUES ({marks})")
    });
    let status = match first {
        Some(_) => TriggerStatus::Running,
        None => TriggerStatus::Stopped,
    }
    .code();
    let ms = |v: Option<chrono::NaiveDateTime>| v.map(|v| ms_to_naive(naive_to_ms(v)));
    let stored = Model {
        id: 0,
        add_time: ms(j.add_time),
        update_time: ms(j.update_time),
        glue_updatetime: ms(j.glue_updatetime),
        trigger_status: status,
        trigger_last_time: 0,
        trigger_next_time: first.unwrap_or(0),
        ..j.clone()
    };
    let m = &stored;
    let args: [Value; 26] = [
        m.job_group.into(),
        m.job_desc.clone().into(),
        m.add_time.into(),
        m.update_time.into(),
        m.author.clone().into(),
        m.alarm_email.clone().into(),
        m.schedule_type.clone().into(),
        m.schedule_conf.clone().into(),
        m.misfire_strategy.clone().into(),
        m.executor_route_strategy.clone().into(),
        m.executor_handler.clone().into(),
        m.executor_param.clone().into(),
        m.executor_block_strategy.clone().into(),
        m.executor_timeout.into(),
        m.executor_fail_retry_count.into(),
        m.glue_type.clone().into(),
        m.glue_source.clone().into(),
        m.glue_remark.clone().into(),
        m.glue_updatetime.into(),
        m.child_jobid.clone().into(),
        m.trigger_status.into(),
        m.trigger_last_time.into(),
        m.trigger_next_time.into(),
        m.time_zone.clone().into(),
        m.retry_interval.into(),
        m.alarm_webhook.clone().into(),
    ];
    let id = port.insert(&SQL, &args).await?;
    let id = i32::try_from(id).map_err(|_| Error::Invalid {
        field: "id",
        reason: format!("job id {id} is past the column's range"),
    })?;
    Ok(Model { id, ..stored })
}

/// Marks a job running with its first fire time; answers the job as stored.
pub async fn set_running(c: &sea_orm::DatabaseConnection, id: i32, next: i64) -> Result<Model> {
    let port = Port::db(c);
    set_running_in(&port, id, next).await?;
    by_id(&port, id)
        .await?
        .ok_or(Error::JobNotFound { job_id: id })
}

/// [`set_running`] in `port`'s transaction, without reading the job back.
pub(crate) async fn set_running_in(port: &Port<'_>, id: i32, next: i64) -> Result<()> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "UPDATE xxl_job_info SET trigger_status = {}, trigger_last_time = 0, \
             trigger_next_time = ? WHERE id = ?",
            TriggerStatus::Running.code()
        )
    });
    if port.execute(&SQL, &[next.into(), id.into()]).await? == 0 {
        return Err(Error::JobNotFound { job_id: id });
    }
    Ok(())
}

/// Stops a job (status 0, last 0, next 0).
pub(crate) async fn set_stopped(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        trigger_status: Set(TriggerStatus::Stopped.code()),
        trigger_last_time: Set(0),
        trigger_next_time: Set(0),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Filters of the console's job list (protocol.md §9 `/jobinfo/pageList`).
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    /// Only these groups (None = all).
    pub groups: Option<Vec<i32>>,
    /// Only running (1) or stopped (0) jobs.
    pub trigger_status: Option<i16>,
    /// Description contains.
    pub job_desc: Option<String>,
    /// Handler contains.
    pub executor_handler: Option<String>,
    /// Author contains.
    pub author: Option<String>,
}

/// A page of jobs, newest id first, and the total matching.
pub async fn page(
    c: &impl ConnectionTrait,
    f: &JobFilter,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    use sea_orm::PaginatorTrait;
    let mut q = Entity::find();
    if let Some(g) = &f.groups {
        q = q.filter(Column::JobGroup.is_in(g.iter().copied()));
    }
    if let Some(s) = f.trigger_status {
        q = q.filter(Column::TriggerStatus.eq(s));
    }
    let like = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    if let Some(v) = like(&f.job_desc) {
        q = q.filter(Column::JobDesc.contains(v));
    }
    if let Some(v) = like(&f.executor_handler) {
        q = q.filter(Column::ExecutorHandler.contains(v));
    }
    if let Some(v) = like(&f.author) {
        q = q.filter(Column::Author.contains(v));
    }
    let total = q.clone().count(c).await?;
    let items = q
        .order_by_desc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, items))
}

/// How many jobs exist (in `groups`, when given).
pub(crate) async fn count(c: &impl ConnectionTrait, groups: Option<&[i32]>) -> Result<u64> {
    use sea_orm::PaginatorTrait;
    let mut q = Entity::find();
    if let Some(g) = groups {
        q = q.filter(Column::JobGroup.is_in(g.iter().copied()));
    }
    Ok(q.count(c).await?)
}

/// Writes every user-editable field of `job` (not the schedule state, not the GLUE source).
pub async fn update_definition(c: &impl ConnectionTrait, job: &Model) -> Result<()> {
    let am = ActiveModel {
        id: Set(job.id),
        job_group: Set(job.job_group),
        job_desc: Set(job.job_desc.clone()),
        update_time: Set(job.update_time),
        author: Set(job.author.clone()),
        alarm_email: Set(job.alarm_email.clone()),
        schedule_type: Set(job.schedule_type.clone()),
        schedule_conf: Set(job.schedule_conf.clone()),
        misfire_strategy: Set(job.misfire_strategy.clone()),
        executor_route_strategy: Set(job.executor_route_strategy.clone()),
        executor_handler: Set(job.executor_handler.clone()),
        executor_param: Set(job.executor_param.clone()),
        executor_block_strategy: Set(job.executor_block_strategy.clone()),
        executor_timeout: Set(job.executor_timeout),
        executor_fail_retry_count: Set(job.executor_fail_retry_count),
        child_jobid: Set(job.child_jobid.clone()),
        time_zone: Set(job.time_zone.clone()),
        retry_interval: Set(job.retry_interval),
        alarm_webhook: Set(job.alarm_webhook.clone()),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Moves a running job's next fire time (after its schedule changed); a stopped job is untouched.
pub(crate) async fn reschedule_if_running(
    c: &impl ConnectionTrait,
    id: i32,
    next: i64,
) -> Result<()> {
    Entity::update_many()
        .col_expr(Column::TriggerNextTime, Expr::val(next))
        .filter(Column::Id.eq(id))
        .filter(Column::TriggerStatus.eq(TriggerStatus::Running.code()))
        .exec(c)
        .await?;
    Ok(())
}

/// Sets a job's GLUE source and remark and stamps `glue_updatetime` (executors reload on it).
pub(crate) async fn set_glue(
    c: &impl ConnectionTrait,
    id: i32,
    source: &str,
    remark: &str,
    now: chrono::NaiveDateTime,
) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        glue_source: Set(Some(source.into())),
        glue_remark: Set(Some(remark.into())),
        glue_updatetime: Set(Some(now)),
        update_time: Set(Some(now)),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Deletes a job row.
pub(crate) async fn delete(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let r = Entity::delete_by_id(id).exec(c).await?;
    if r.rows_affected == 0 {
        return Err(Error::JobNotFound { job_id: id });
    }
    Ok(())
}

/// Of `ids`, those that exist, with their groups.
pub(crate) async fn groups_of(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<(i32, i32)>> {
    Ok(Entity::find()
        .select_only()
        .columns([Column::Id, Column::JobGroup])
        .filter(Column::Id.is_in(ids.iter().copied()))
        .into_tuple()
        .all(c)
        .await?)
}

/// What the rules about a workflow's job nodes need of a job.
#[derive(Clone, Debug)]
pub(crate) struct JobKind {
    /// The job.
    pub id: i32,
    /// Its group.
    pub group: i32,
    /// BEAN or a GLUE type.
    pub glue_type: String,
    /// Its handler.
    pub handler: Option<String>,
}

impl JobKind {
    /// Whether its param is the command line it runs ([`crate::jobs::runs_command`]).
    pub(crate) fn runs_command(&self) -> bool {
        crate::jobs::runs_command(&self.glue_type, self.handler.as_deref())
    }
}

/// Of `ids`, those that exist, with what [`JobKind`] holds.
pub(crate) async fn kinds_of(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<JobKind>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(1000) {
        let rows: Vec<(i32, i32, String, Option<String>)> = Entity::find()
            .select_only()
            .columns([
                Column::Id,
                Column::JobGroup,
                Column::GlueType,
                Column::ExecutorHandler,
            ])
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        out.extend(
            rows.into_iter()
                .map(|(id, group, glue_type, handler)| JobKind {
                    id,
                    group,
                    glue_type,
                    handler,
                }),
        );
    }
    Ok(out)
}

/// Of `ids`, those that exist, with their descriptions (a page of runs names its jobs).
pub(crate) async fn descriptions(
    c: &impl ConnectionTrait,
    ids: &[i32],
) -> Result<std::collections::HashMap<i32, String>> {
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let rows: Vec<(i32, String)> = Entity::find()
            .select_only()
            .columns([Column::Id, Column::JobDesc])
            .filter(Column::Id.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(c)
            .await?;
        out.extend(rows);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{memory_db, plan};
    use sea_orm::{DbBackend, QueryTrait};

    /// The scan's statements must cost in proportion to the due jobs, not the defined ones:
    /// the due read walks the (status, next) index, the schedule update looks rows up by id.
    #[tokio::test]
    async fn scan_statements_do_not_walk_every_running_job() {
        let db = memory_db().await;
        let due = plan(&db, due_query(5_000, 100).build(DbBackend::Sqlite)).await;
        assert!(due.contains("USING INDEX i_status_next"), "{due}");
        let update = plan(
            &db,
            crate::store::port::statement(
                DbBackend::Sqlite,
                &SQLITE_SCHEDULE_UPDATE,
                &[1i64.into(), 2i64.into(), 1i16.into(), 3i32.into()],
            ),
        )
        .await;
        assert!(!update.contains("i_status_next"), "{update}");
        assert!(update.contains("INTEGER PRIMARY KEY"), "{update}");
        db.close().await.unwrap();
    }

    /// A job inserted, started and rescheduled on the writer's connection reads back through
    /// the pool as answered (every field, datetimes to the millisecond); the narrow scan read
    /// sees it; a job stopped meanwhile stays stopped.
    #[tokio::test]
    async fn the_port_writes_jobs_the_pool_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let db = crate::store::tests::file_db(&path).await;
        let now = ms_to_naive(1_800_000_000_123);
        let mut spec = crate::JobSpec::cron(1, "j", "0/5 * * * * ?", "h");
        spec.alarm_email = Some("ops@example.com".into());
        spec.child_job_id = Some("3,4".into());
        spec.time_zone = Some("Asia/Shanghai".into());
        let model = spec.validate(chrono_tz::UTC, now).unwrap();
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let (stopped, running, due) = crate::store::port::file_tx(&mut conn, async |p| {
            let stopped = insert_in(p, &model, None).await?;
            let running = insert_in(p, &model, Some(1_800_000_005_000)).await?;
            let due = due_rows(p, 1_800_000_005_000, 0, 10).await?;
            Ok((stopped, running, due))
        })
        .unwrap();
        assert_eq!(get(&db, stopped.id).await.unwrap(), stopped);
        assert_eq!(stopped.trigger_status, TriggerStatus::Stopped.code());
        assert_eq!(get(&db, running.id).await.unwrap(), running);
        assert_eq!(
            (running.trigger_status, running.trigger_next_time),
            (TriggerStatus::Running.code(), 1_800_000_005_000)
        );
        assert_eq!(
            due,
            vec![DueRow {
                id: running.id,
                version: running.update_time,
                last: 0,
                next: 1_800_000_005_000
            }]
        );
        set_stopped(&db, running.id).await.unwrap();
        let update = ScheduleUpdate {
            id: running.id,
            last: 9_000,
            next: 10_000,
            status: 1,
        };
        crate::store::port::file_tx(&mut conn, async |p| update_schedules(p, &[update]).await)
            .unwrap();
        let j = get(&db, running.id).await.unwrap();
        assert_eq!(j.trigger_status, 0, "a job stopped meanwhile stays stopped");
        db.close().await.unwrap();
    }
}
