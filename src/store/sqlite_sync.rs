//! The scan's statements on the run-row writer's synchronous SQLite connection (single-node
//! SQLite): the same reads and writes as [`super::jobs`], [`super::logs`] and [`super::groups`],
//! as cached prepared single-row statements inside the writer thread's transaction, O(rows),
//! with no thread hop per statement and no multi-row statement to parse or cache.

use std::sync::LazyLock;

use crate::model::TriggerStatus;

/// `trigger_status` of a running job, as the statements below spell it.
const RUNNING: i16 = TriggerStatus::Running.code();

use rusqlite::{Connection, params};

use super::jobs::ScheduleUpdate;
use crate::clock::ms_to_naive;

type Job = entity::xxl_job_info::Model;
type Group = entity::xxl_job_group::Model;

/// DATETIME text as sqlx writes it (`%F %T%.f`), so both connections read the same values.
/// Written digit by digit: chrono's formatter parsed the pattern on every call and was 5 % of the
/// SQLite writer's time at 5,000 remote fires/s.
pub(crate) fn naive_text(ms: i64) -> String {
    use chrono::{Datelike, Timelike};
    let t = ms_to_naive(ms);
    if !(0..=9999).contains(&t.year()) {
        return t.format("%F %T%.f").to_string();
    }
    fn push(out: &mut String, v: u32, digits: u32) {
        for d in (0..digits).rev() {
            out.push(char::from(b'0' + (v / 10u32.pow(d) % 10) as u8));
        }
    }
    let mut out = String::with_capacity(23);
    push(&mut out, t.year() as u32, 4);
    out.push('-');
    push(&mut out, t.month(), 2);
    out.push('-');
    push(&mut out, t.day(), 2);
    out.push(' ');
    push(&mut out, t.hour(), 2);
    out.push(':');
    push(&mut out, t.minute(), 2);
    out.push(':');
    push(&mut out, t.second(), 2);
    let nanos = t.nanosecond();
    // `%.f`: nothing for whole seconds, else 3, 6 or 9 digits
    if nanos != 0 {
        out.push('.');
        if nanos.is_multiple_of(1_000_000) {
            push(&mut out, nanos / 1_000_000, 3);
        } else if nanos.is_multiple_of(1_000) {
            push(&mut out, nanos / 1_000, 6);
        } else {
            push(&mut out, nanos, 9);
        }
    }
    out
}

/// Reads a DATETIME column written by either connection.
pub(crate) fn naive(text: Option<String>) -> Option<chrono::NaiveDateTime> {
    let t = text?;
    naive_fast(t.as_bytes()).or_else(|| {
        ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
            .iter()
            .find_map(|f| chrono::NaiveDateTime::parse_from_str(&t, f).ok())
    })
}

/// `YYYY-MM-DD HH:MM:SS` (or `T` between), then `.` and 1–9 fraction digits or nothing: what
/// both connections write, read digit by digit (chrono's parser walks its pattern on every call,
/// 1.5 % of a job start's server time). Anything else is left to chrono.
fn naive_fast(b: &[u8]) -> Option<chrono::NaiveDateTime> {
    fn num(b: &[u8]) -> Option<u32> {
        b.iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    }
    if b.len() < 19
        || (b[4], b[7], b[13], b[16]) != (b'-', b'-', b':', b':')
        || !matches!(b[10], b' ' | b'T')
    {
        return None;
    }
    let nanos = match &b[19..] {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            num(digits)? * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::try_from(num(&b[0..4])?).ok()?,
        num(&b[5..7])?,
        num(&b[8..10])?,
    )?;
    let time = chrono::NaiveTime::from_hms_nano_opt(
        num(&b[11..13])?,
        num(&b[14..16])?,
        num(&b[17..19])?,
        nanos,
    )?;
    Some(date.and_time(time))
}

const JOB_COLUMNS: &str = "id, job_group, job_desc, add_time, update_time, author, alarm_email, \
    schedule_type, schedule_conf, misfire_strategy, executor_route_strategy, executor_handler, \
    executor_param, executor_block_strategy, executor_timeout, executor_fail_retry_count, \
    glue_type, glue_source, glue_remark, glue_updatetime, child_jobid, trigger_status, \
    trigger_last_time, trigger_next_time, time_zone, retry_interval, alarm_webhook";

fn job(r: &rusqlite::Row<'_>) -> rusqlite::Result<Job> {
    Ok(Job {
        id: r.get(0)?,
        job_group: r.get(1)?,
        job_desc: r.get(2)?,
        add_time: naive(r.get(3)?),
        update_time: naive(r.get(4)?),
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
        glue_updatetime: naive(r.get(19)?),
        child_jobid: r.get(20)?,
        trigger_status: r.get(21)?,
        trigger_last_time: r.get(22)?,
        trigger_next_time: r.get(23)?,
        time_zone: r.get(24)?,
        retry_interval: r.get(25)?,
        alarm_webhook: r.get(26)?,
    })
}

/// A due job as the scan's narrow read sees it: its schedule state and the version of its
/// definition (`update_time` as stored), so a pass re-reads a whole job only when it changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DueRow {
    pub id: i32,
    pub version: Option<String>,
    pub last: i64,
    pub next: i64,
}

/// The scan's read (as [`super::jobs::due`], without the definitions): running jobs due by
/// `max_next` with an id above `after_id`, by id, at most `limit`.
pub(crate) fn due_rows(
    c: &Connection,
    max_next: i64,
    after_id: i32,
    limit: u64,
) -> rusqlite::Result<Vec<DueRow>> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "SELECT id, update_time, trigger_last_time, trigger_next_time FROM xxl_job_info \
             WHERE trigger_status = {RUNNING} AND trigger_next_time <= ?1 AND id > ?3 \
             ORDER BY id LIMIT ?2"
        )
    });
    let mut s = c.prepare_cached(&SQL)?;
    let rows = s.query_map(params![max_next, limit as i64, after_id], |r| {
        Ok(DueRow {
            id: r.get(0)?,
            version: r.get(1)?,
            last: r.get(2)?,
            next: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// One whole job, with its definition's version (see [`DueRow`]).
pub(crate) fn job_by_id(
    c: &Connection,
    id: i32,
) -> rusqlite::Result<Option<(Job, Option<String>)>> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!("SELECT {JOB_COLUMNS}, update_time FROM xxl_job_info WHERE id = ?1")
    });
    let mut s = c.prepare_cached(&SQL)?;
    let mut rows = s.query(params![id])?;
    match rows.next()? {
        Some(r) => Ok(Some((job(r)?, r.get(27)?))),
        None => Ok(None),
    }
}

/// Inserts a job, created stopped or (`first`) running from that first fire time (as
/// [`super::jobs::insert_model`]); answers it as stored, without reading it back.
pub(crate) fn insert_job(c: &Connection, j: &Job, first: Option<i64>) -> rusqlite::Result<Job> {
    let status = match first {
        Some(_) => RUNNING,
        None => TriggerStatus::Stopped.code(),
    };
    static SQL: LazyLock<String> = LazyLock::new(|| {
        let columns = JOB_COLUMNS.trim_start_matches("id, ");
        let marks: Vec<String> = (1..=26).map(|i| format!("?{i}")).collect();
        format!(
            "INSERT INTO xxl_job_info ({columns}) VALUES ({})",
            marks.join(", ")
        )
    });
    let t = |v: Option<chrono::NaiveDateTime>| v.map(|v| naive_text(crate::clock::naive_to_ms(v)));
    c.prepare_cached(&SQL)?.execute(params![
        j.job_group,
        j.job_desc,
        t(j.add_time),
        t(j.update_time),
        j.author,
        j.alarm_email,
        j.schedule_type,
        j.schedule_conf,
        j.misfire_strategy,
        j.executor_route_strategy,
        j.executor_handler,
        j.executor_param,
        j.executor_block_strategy,
        j.executor_timeout,
        j.executor_fail_retry_count,
        j.glue_type,
        j.glue_source,
        j.glue_remark,
        t(j.glue_updatetime),
        j.child_jobid,
        status,
        0i64,
        first.unwrap_or(0),
        j.time_zone,
        j.retry_interval,
        j.alarm_webhook,
    ])?;
    let id = i32::try_from(c.last_insert_rowid())
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    // what the row reads back as: datetimes to the millisecond, the status as set
    let ms =
        |v: Option<chrono::NaiveDateTime>| v.map(|v| ms_to_naive(crate::clock::naive_to_ms(v)));
    Ok(Job {
        id,
        add_time: ms(j.add_time),
        update_time: ms(j.update_time),
        glue_updatetime: ms(j.glue_updatetime),
        trigger_status: status,
        trigger_last_time: 0,
        trigger_next_time: first.unwrap_or(0),
        ..j.clone()
    })
}

/// Marks a job running with its first fire time (as [`super::jobs::set_running`]).
pub(crate) fn set_running(c: &Connection, id: i32, next: i64) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE xxl_job_info SET trigger_status = {RUNNING}, trigger_last_time = 0, \
             trigger_next_time = ?2 WHERE id = ?1"
        )
    });
    c.prepare_cached(&SQL)?.execute(params![id, next])?;
    Ok(())
}

/// Every group (the dispatch directory's snapshot).
pub(crate) fn groups(c: &Connection) -> rusqlite::Result<Vec<Group>> {
    let mut s = c.prepare_cached(
        "SELECT id, app_name, title, address_type, address_list, update_time, access_token \
         FROM xxl_job_group",
    )?;
    let rows = s.query_map([], |r| {
        Ok(Group {
            id: r.get(0)?,
            app_name: r.get(1)?,
            title: r.get(2)?,
            address_type: r.get(3)?,
            address_list: r.get(4)?,
            update_time: naive(r.get(5)?),
            access_token: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// Writes schedule updates (as [`super::jobs::update_schedules`]): only rows still running.
pub(crate) fn update_schedules(c: &Connection, updates: &[ScheduleUpdate]) -> rusqlite::Result<()> {
    static SQL: LazyLock<String> = LazyLock::new(|| {
        format!(
            "UPDATE OR IGNORE xxl_job_info SET trigger_last_time = ?2, trigger_next_time = ?3, \
             trigger_status = ?4 WHERE id = ?1 AND trigger_status = {RUNNING}"
        )
    });
    let mut s = c.prepare_cached(&SQL)?;
    for u in updates {
        s.execute(params![u.id, u.last, u.next, u.status])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A DATETIME text reads as chrono's parser reads it (the hand-written reader takes the
        /// written forms, chrono the rest); junk after it is refused by both.
        #[test]
        fn datetimes_read_as_chrono_reads_them(
            ms in -70_000_000_000_000i64..300_000_000_000_000,
            frac in 0usize..11,
            t: bool,
            junk in proptest::option::of("[0-9:. T-]{1,3}"),
        ) {
            // the written form, its fraction cut to `frac` digits, a `T`, trailing junk
            let mut text = ms_to_naive(ms).format("%F %T%.9f").to_string();
            if let Some(dot) = text.find('.') {
                text.truncate(if frac == 0 { dot } else { (dot + 1 + frac).min(text.len()) });
            }
            if t {
                text = text.replacen(' ', "T", 1);
            }
            text.push_str(junk.as_deref().unwrap_or_default());
            let chrono = ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
                .iter()
                .find_map(|f| chrono::NaiveDateTime::parse_from_str(&text, f).ok());
            proptest::prop_assert_eq!(naive(Some(text.clone())), chrono, "{}", text);
            if junk.is_none() && (0..=9999).contains(&chrono::Datelike::year(&ms_to_naive(ms))) {
                proptest::prop_assert!(naive_fast(text.as_bytes()).is_some(), "{}", text);
            }
        }

        /// The hand-written DATETIME text is exactly chrono's `%F %T%.f`, whole seconds included.
        #[test]
        fn naive_text_is_chronos_format(ms in -70_000_000_000_000i64..300_000_000_000_000, whole: bool) {
            let ms = if whole { ms - ms.rem_euclid(1000) } else { ms };
            proptest::prop_assert_eq!(
                naive_text(ms),
                ms_to_naive(ms).format("%F %T%.f").to_string()
            );
        }
    }

    /// A job inserted on the writer's connection reads back through the pool exactly as one
    /// the pool inserted (created stopped, every field kept, datetimes included).
    #[tokio::test]
    async fn a_job_inserted_here_is_the_pools_job() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let db = crate::store::tests::file_db(&path).await;
        let now = ms_to_naive(1_800_000_000_123);
        let mut spec = crate::JobSpec::cron(1, "j", "0/5 * * * * ?", "h");
        spec.alarm_email = Some("ops@example.com".into());
        spec.child_job_id = Some("3,4".into());
        spec.time_zone = Some("Asia/Shanghai".into());
        let mut model = spec.validate(chrono_tz::UTC, now).unwrap();
        model.trigger_status = RUNNING;
        model.trigger_next_time = 99;
        let pooled = crate::store::jobs::insert_model(&db, model.clone(), None)
            .await
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        let answered = insert_job(&conn, &model, None).unwrap();
        let id = answered.id;
        let here = crate::store::jobs::get(&db, id).await.unwrap();
        assert_eq!(answered, here, "answered as stored");
        assert_ne!(id, pooled.id);
        assert_eq!(here, Job { id, ..pooled }, "the same row but for its id");
        assert_eq!(here.trigger_status, TriggerStatus::Stopped.code());
        assert_eq!(job_by_id(&conn, id).unwrap().map(|(j, _)| j), Some(here));

        // created running: the status and first fire given, the last fire none
        let first = Some(1_800_000_005_000);
        let pooled = crate::store::jobs::insert_model(&db, model.clone(), first)
            .await
            .unwrap();
        let answered = insert_job(&conn, &model, first).unwrap();
        let id = answered.id;
        let here = crate::store::jobs::get(&db, id).await.unwrap();
        assert_eq!(answered, here, "answered as stored");
        assert_eq!(
            here,
            Job {
                id,
                ..pooled.clone()
            }
        );
        assert_eq!(
            (pooled.trigger_status, pooled.trigger_last_time),
            (RUNNING, 0)
        );
        assert_eq!(pooled.trigger_next_time, 1_800_000_005_000);
        db.close().await.unwrap();
    }

    /// The synchronous statements read and write what the sea-orm ones do.
    #[tokio::test]
    async fn sync_scan_statements_match_the_pool_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::store::tests::file_db(&dir.path().join("t.db")).await;
        let now = ms_to_naive(1_000);
        let g = crate::store::groups::insert(&db, "app", "App", 1, Some("http://a/".into()), now)
            .await
            .unwrap();
        let spec = crate::JobSpec::cron(g, "j", "* * * * * ?", "h")
            .validate(chrono_tz::UTC, now)
            .unwrap();
        let id = crate::store::jobs::insert(&db, spec).await.unwrap();
        crate::store::jobs::set_running(&db, id, 5_000)
            .await
            .unwrap();
        let pooled = crate::store::jobs::get(&db, id).await.unwrap();

        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        let due = due_rows(&conn, 5_000, 0, 10).unwrap();
        assert!(
            due_rows(&conn, 5_000, id, 10).unwrap().is_empty(),
            "ids after"
        );
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].id, due[0].next), (id, pooled.trigger_next_time));
        let (read, version) = job_by_id(&conn, id).unwrap().unwrap();
        assert_eq!(read, pooled.clone(), "same job, every column");
        assert_eq!(version, due[0].version);
        assert!(due_rows(&conn, 4_999, 0, 10).unwrap().is_empty());
        assert_eq!(
            groups(&conn).unwrap()[0].address_list.as_deref(),
            Some("http://a/")
        );

        update_schedules(
            &conn,
            &[ScheduleUpdate {
                id,
                last: 7_000,
                next: 8_000,
                status: 1,
            }],
        )
        .unwrap();
        let j = crate::store::jobs::get(&db, id).await.unwrap();
        assert_eq!((j.trigger_last_time, j.trigger_next_time), (7_000, 8_000));
        crate::store::jobs::set_stopped(&db, id).await.unwrap();
        update_schedules(
            &conn,
            &[ScheduleUpdate {
                id,
                last: 9_000,
                next: 10_000,
                status: 1,
            }],
        )
        .unwrap();
        let j = crate::store::jobs::get(&db, id).await.unwrap();
        assert_eq!(j.trigger_status, 0, "a job stopped meanwhile stays stopped");
        db.close().await.unwrap();
    }
}
