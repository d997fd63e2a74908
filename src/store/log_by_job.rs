//! Finding a job's runs on SQLite: the side index `xjob_log_by_job` (migration 000016) holds
//! every run below the mark `xjob_log_by_job_mark.next_id`; [`index`] adds the runs above it,
//! sorted by job, and moves the mark. The SQLite writer runs it every [`INDEX_EVERY`] (or
//! [`INDEX_ROWS`] rows), so a job's entries of the interval go into its leaf together: one WAL
//! frame per job, where `uk_job_fire` cost one per row. A read by job takes the index's ids
//! and the runs at or above the mark ([`of_job`]): a walk of the last seconds' rows.
//!
//! Every run gets an id at or above the mark: log ids only grow (the table's AUTOINCREMENT
//! counter, which the writer's journal also moves to reserve its fires' ids), and the mark is
//! moved only to the counter's next value, under the write lock. A fire journalled without its
//! row yet is indexed from the journal, so its row, written later below the mark, is found.
//! PostgreSQL and MySQL find a job's runs through `uk_job_fire`.

use std::time::Duration;

use entity::xxl_job_log::Column;
use rusqlite::OptionalExtension;
use sea_orm::sea_query::{Expr, ExprTrait, SimpleExpr};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend};

/// The runs above the mark are indexed at least this often (a job's entries of the interval
/// then share its leaf; a read by job walks them) ...
pub(crate) const INDEX_EVERY: Duration = Duration::from_secs(10);
/// ... or once the writer has added this many rows since.
pub(crate) const INDEX_ROWS: usize = 50_000;

/// The smallest 64-bit integer: the `fire_key` of a run without a nominal time.
pub(crate) const NO_FIRE_TIME: i64 = i64::MIN;

/// A journalled fire without its row yet: job, nominal time, log id.
pub(crate) type Unwritten = (i32, i64, i64);

/// The next log id the table will give (its AUTOINCREMENT counter, or past its largest id).
pub(crate) fn next_log_id(tx: &rusqlite::Connection) -> rusqlite::Result<i64> {
    let seq: Option<i64> = tx
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'xxl_job_log'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let max: Option<i64> = tx
        .prepare_cached("SELECT max(id) FROM xxl_job_log")?
        .query_row([], |r| r.get(0))?;
    Ok(Ord::max(seq.unwrap_or(0), max.unwrap_or(0)) + 1)
}

/// Indexes every run from the mark to the table's next id (its rows, and `unwritten`'s fires
/// in that range), sorted by job, and moves the mark there; in `tx`, which must hold the write
/// lock (an immediate transaction, or one that wrote already). Answers how many ids it
/// covered.
pub(crate) fn index(
    tx: &rusqlite::Connection,
    unwritten: impl Iterator<Item = Unwritten>,
) -> rusqlite::Result<i64> {
    let from: i64 = tx
        .prepare_cached("SELECT next_id FROM xjob_log_by_job_mark WHERE id = 1")?
        .query_row([], |r| r.get(0))?;
    let next = next_log_id(tx)?;
    if next <= from {
        return Ok(0);
    }
    tx.prepare_cached(
        "INSERT OR IGNORE INTO xjob_log_by_job (job_id, fire_key, log_id) \
         SELECT job_id, coalesce(fire_time, -9223372036854775808), id FROM xxl_job_log \
         WHERE id >= ?1 AND id < ?2 ORDER BY 1, 2, 3",
    )?
    .execute([from, next])?;
    let mut pending: Vec<Unwritten> = unwritten
        .filter(|&(_, _, id)| id >= from && id < next)
        .collect();
    pending.sort_unstable();
    let mut add = tx.prepare_cached(
        "INSERT OR IGNORE INTO xjob_log_by_job (job_id, fire_key, log_id) VALUES (?1, ?2, ?3)",
    )?;
    for (job, fire_key, id) in pending {
        add.execute(rusqlite::params![job, fire_key, id])?;
    }
    tx.prepare_cached("UPDATE xjob_log_by_job_mark SET next_id = ?1 WHERE id = 1")?
        .execute([next])?;
    Ok(next - from)
}

/// [`index`] through a pool (a SQLite database the file writer does not own: in memory), where
/// every fire has its row.
pub(crate) async fn index_pooled(c: &sea_orm::DatabaseConnection) -> crate::error::Result<()> {
    use sea_orm::TransactionTrait;
    let tx = c.begin().await?;
    // one statement each, the mark read and moved in the same transaction (SQLite's single
    // writer: a pooled in-memory database has one connection)
    tx.execute_unprepared(
        "INSERT OR IGNORE INTO xjob_log_by_job (job_id, fire_key, log_id) \
         SELECT job_id, coalesce(fire_time, -9223372036854775808), id FROM xxl_job_log \
         WHERE id >= (SELECT next_id FROM xjob_log_by_job_mark WHERE id = 1) ORDER BY 1, 2, 3; \
         UPDATE xjob_log_by_job_mark SET next_id = max(next_id, \
         coalesce((SELECT max(id) FROM xxl_job_log), 0) + 1, \
         coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'xxl_job_log'), 0) + 1) \
         WHERE id = 1",
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The condition "the run is one of job `job_id`'s" on `backend`: on SQLite the index's runs of
/// the job and the job's runs at or above the mark (a walk of those), and the job's column
/// (which costs nothing once the row is read).
pub(crate) fn of_job(backend: DbBackend, job_id: i32) -> SimpleExpr {
    let by_column = Column::JobId.eq(job_id);
    if backend != DbBackend::Sqlite {
        return by_column;
    }
    Expr::cust_with_values(
        "id IN (SELECT log_id FROM xjob_log_by_job WHERE job_id = ? UNION ALL \
         SELECT id FROM xxl_job_log WHERE job_id = ? \
         AND id >= (SELECT next_id FROM xjob_log_by_job_mark WHERE id = 1))",
        [job_id, job_id],
    )
    .and(by_column)
}

/// The latest nominal time the index holds for `job_id` (`None` when none). The writer's
/// journal asks it the first time it sees a job since it started (it indexes everything at
/// start): any later fire of the job it journalled itself, and the rows other connections add
/// (manual triggers, workflow steps) have no nominal time.
pub(crate) fn latest_fire(tx: &rusqlite::Connection, job_id: i32) -> rusqlite::Result<Option<i64>> {
    let latest: Option<i64> = tx
        .prepare_cached("SELECT max(fire_key) FROM xjob_log_by_job WHERE job_id = ?1")?
        .query_row([job_id], |r| r.get(0))?;
    Ok(latest.filter(|&t| t != NO_FIRE_TIME))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;
    use crate::fire::PendingFire;
    use crate::model::TriggerType;
    use crate::store::logs;

    #[derive(Clone, Debug)]
    enum Op {
        /// A run of job `.0` added through the pool: scheduled at `.1` (a pending fire), or
        /// unscheduled (a manual trigger).
        Run(i32, Option<i64>),
        /// The writer journals a fire of job `.0` at `.1`: its id reserved, no row yet.
        Journal(i32, i64),
        /// The writer writes the `.0`-th journalled fire still without its row (modulo).
        Write(usize),
        /// Every run of the job deleted (the job is; its journalled fires are never written).
        DeleteJob(i32),
        /// The writer indexes the runs above the mark.
        Index,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1..4i32, proptest::option::of(0..8i64)).prop_map(|(j, t)| Op::Run(j, t)),
            3 => (1..4i32, 8..16i64).prop_map(|(j, t)| Op::Journal(j, t)),
            3 => (0..8usize).prop_map(Op::Write),
            1 => (1..4i32).prop_map(Op::DeleteJob),
            2 => Just(Op::Index),
        ]
    }

    #[derive(Default)]
    struct Model {
        /// Per job, the nominal times of its rows (`None` for an unscheduled run).
        rows: BTreeMap<i32, Vec<Option<i64>>>,
        /// Journalled fires without their rows: (job, nominal time, log id).
        unwritten: Vec<Unwritten>,
        /// Every id ever reserved by the journal.
        reserved: BTreeSet<i64>,
        /// Jobs deleted (a job's id is never given again: its journalled fires may have left
        /// entries, which no read of another job finds).
        deleted: BTreeSet<i32>,
    }

    fn reserve(conn: &mut rusqlite::Connection) -> i64 {
        let tx = conn.transaction().unwrap();
        let id = crate::store::writer::journal::reserve_ids(&tx, 1).unwrap();
        tx.commit().unwrap();
        id
    }

    async fn apply(
        db: &sea_orm::DatabaseConnection,
        conn: &mut rusqlite::Connection,
        m: &mut Model,
        op: &Op,
    ) {
        match *op {
            Op::Run(job, Some(t)) => {
                let fire = PendingFire {
                    job_id: job,
                    job_group: 1,
                    fire_time: t,
                    trigger_type: TriggerType::Cron,
                };
                let n = logs::insert_pending(db, &[fire]).await.unwrap();
                let runs = m.rows.entry(job).or_default();
                // the unique (job, nominal time) still holds
                assert_eq!(n == 1, !runs.contains(&Some(t)), "{op:?}");
                if n == 1 {
                    runs.push(Some(t));
                }
            }
            Op::Run(job, None) => {
                logs::insert_run(db, 1, job, 0, TriggerType::Manual, 0)
                    .await
                    .unwrap();
                m.rows.entry(job).or_default().push(None);
            }
            Op::Journal(job, t) => {
                let id = reserve(conn);
                m.unwritten.push((job, t, id));
                m.reserved.insert(id);
            }
            Op::Write(i) => {
                if m.unwritten.is_empty() {
                    return;
                }
                let (job, t, id) = m.unwritten.remove(i % m.unwritten.len());
                let n = conn
                    .execute(
                        "INSERT OR IGNORE INTO xxl_job_log (id, job_group, job_id, trigger_code, \
                         handle_code, fire_time, fire_state) VALUES (?1, 1, ?2, 200, 200, ?3, 0)",
                        rusqlite::params![id, job, t],
                    )
                    .unwrap();
                let runs = m.rows.entry(job).or_default();
                assert_eq!(n == 1, !runs.contains(&Some(t)), "{op:?}");
                if n == 1 {
                    runs.push(Some(t));
                }
            }
            Op::DeleteJob(job) => {
                let n = crate::store::log_pages::delete_for_job(db, job)
                    .await
                    .unwrap();
                let runs = m.rows.remove(&job).unwrap_or_default();
                assert_eq!(n as usize, runs.len(), "{op:?}");
                m.unwritten.retain(|&(j, _, _)| j != job);
                m.deleted.insert(job);
            }
            Op::Index => {
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .unwrap();
                index(&tx, m.unwritten.iter().copied()).unwrap();
                tx.commit().unwrap();
            }
        }
    }

    async fn check(db: &sea_orm::DatabaseConnection, conn: &mut rusqlite::Connection, m: &Model) {
        for job in 1..4 {
            let mut got: Vec<Option<i64>> = logs::for_job(db, job)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.fire_time)
                .collect();
            got.sort_unstable();
            let mut want = m.rows.get(&job).cloned().unwrap_or_default();
            want.sort_unstable();
            assert_eq!(got, want, "job {job}");
        }
        let ids = |sql: &str| -> BTreeSet<i64> {
            let mut s = conn.prepare(sql).unwrap();
            s.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let mark: i64 = conn
            .query_row("SELECT next_id FROM xjob_log_by_job_mark", [], |r| r.get(0))
            .unwrap();
        let entries = ids("SELECT log_id FROM xjob_log_by_job");
        let rows: BTreeSet<i64> = logs::all(db).await.unwrap().iter().map(|r| r.id).collect();
        // every run below the mark is indexed, written or still journalled ...
        for id in rows.iter().chain(m.unwritten.iter().map(|u| &u.2)) {
            assert!(*id >= mark || entries.contains(id), "{id} below {mark}");
        }
        // ... and an entry is a row's, or a journalled fire's
        for id in &entries {
            assert!(rows.contains(id) || m.reserved.contains(id), "{id}");
        }
        // the latest nominal time the index gives is the job's once every run is indexed
        if m.unwritten.is_empty() && rows.iter().all(|id| *id < mark) {
            for job in (1..4).filter(|j| !m.deleted.contains(j)) {
                let tx = conn.transaction().unwrap();
                let want = m
                    .rows
                    .get(&job)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .max()
                    .copied();
                assert_eq!(latest_fire(&tx, job).unwrap(), want, "job {job}");
            }
        }
    }

    async fn run(ops: Vec<Op>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db");
        let db = crate::store::tests::file_db(&path).await;
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let mut m = Model::default();
        for op in &ops {
            apply(&db, &mut conn, &mut m, op).await;
            check(&db, &mut conn, &m).await;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        /// Whatever runs are added (through the pool or journalled, written later), deleted,
        /// and whenever the writer indexes, a read by job finds exactly the job's rows, every
        /// run below the mark is indexed, and the index's latest nominal time is the job's.
        #[test]
        fn reads_by_job_find_exactly_the_jobs_rows(ops in proptest::collection::vec(op(), 1..20)) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(run(ops));
        }
    }

    /// Through a pool (an in-memory database), the pass indexes every row above the mark and
    /// moves the mark past them; a read by job finds the rows either side of it.
    #[tokio::test]
    async fn a_pooled_database_is_indexed_too() {
        use sea_orm::{ConnectionTrait, Statement};
        let db = crate::store::tests::memory_db().await;
        let scalar = |sql: &'static str| {
            let db = db.clone();
            async move {
                let row = db
                    .query_one_raw(Statement::from_string(DbBackend::Sqlite, sql))
                    .await
                    .unwrap()
                    .unwrap();
                row.try_get_by_index::<i64>(0).unwrap()
            }
        };
        let first = logs::insert_run(&db, 1, 4, 0, TriggerType::Manual, 0)
            .await
            .unwrap();
        let fire = PendingFire {
            job_id: 4,
            job_group: 1,
            fire_time: 7,
            trigger_type: TriggerType::Cron,
        };
        logs::insert_pending(&db, &[fire]).await.unwrap();
        assert_eq!(scalar("SELECT count(*) FROM xjob_log_by_job").await, 0);
        index_pooled(&db).await.unwrap();
        assert_eq!(scalar("SELECT count(*) FROM xjob_log_by_job").await, 2);
        assert_eq!(
            scalar("SELECT next_id FROM xjob_log_by_job_mark").await,
            first + 2
        );
        logs::insert_run(&db, 1, 4, 0, TriggerType::Manual, 0)
            .await
            .unwrap();
        assert_eq!(logs::for_job(&db, 4).await.unwrap().len(), 3);
        assert!(logs::for_job(&db, 5).await.unwrap().is_empty());
    }

    /// A job's reads go through the index and the runs above the mark, never a walk of the
    /// whole log table.
    #[tokio::test]
    async fn reads_by_job_use_the_index() {
        use sea_orm::{EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait};
        let db = crate::store::tests::memory_db().await;
        let stmt = entity::xxl_job_log::Entity::find()
            .filter(of_job(DbBackend::Sqlite, 7))
            .order_by_desc(Column::TriggerTime)
            .limit(10)
            .build(DbBackend::Sqlite);
        let plan = crate::store::tests::plan(&db, stmt).await;
        assert!(
            plan.contains("xjob_log_by_job USING PRIMARY KEY (job_id=?)"),
            "{plan}"
        );
        assert!(plan.contains("INTEGER PRIMARY KEY (rowid>?)"), "{plan}");
        assert!(plan.contains("INTEGER PRIMARY KEY (rowid=?)"), "{plan}");
        assert!(!plan.contains("SCAN xxl_job_log"), "{plan}");
    }
}
