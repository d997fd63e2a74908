//! The SQLite writer's journal of pending fires (`xjob_fire_journal`): on a SQLite file a scan
//! page records its fires as one appended row, not as a pending `xxl_job_log` row each, and each
//! run's log row is inserted once, complete, when its outcome (and usually its result) is
//! written.
//!
//! A pending log row cost an entry in each of the log table's five indexes at the scan, and the
//! run's final update moved it in three of them again; the journal costs one row per page of
//! up to 2,000 fires. What the pending rows gave is kept:
//! - **the run's id**: the page reserves its log ids (it moves `xxl_job_log`'s AUTOINCREMENT
//!   counter past them in the same transaction), so the executor is told the run's final id and
//!   rows inserted meanwhile by other connections (manual triggers, retries) never take one;
//! - **once per job and nominal time**: the unique `(job_id, fire_time)` of the log table said
//!   whether a fire was already recorded. A fire later than the latest this writer journalled for
//!   its job cannot be; an earlier one (a schedule moved back) is looked up among the journalled
//!   fires and in the log table. The first time a job is seen, its latest recorded fire is read;
//! - **recovery**: at start the writer turns every journalled fire without a log row into a
//!   pending row (as a scan of an earlier version recorded it), so adoption, misfire recovery and
//!   everything after work on them unchanged.
//!
//! Only the writer's thread touches the journal: the scan's pages run there (as its `exec`
//! work), and so do the writes. What a page or a write changes in memory is applied only after
//! its transaction committed.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::fire::{Fire, HandleResult, PendingFire, TriggerRecord};
use crate::model::{AlarmStatus, TriggerType, fire_state};
use crate::store::port::{Arg, Port};
use crate::store::rules;
use crate::store::run_rows::{self, Written};
use crate::store::sqlite_text::naive_text;

/// A journalled fire without its log row yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub job_group: i32,
    pub job_id: i32,
    pub fire_time: i64,
    pub trigger_type: TriggerType,
}

/// A journalled page: its row, its fires in log-id order, and how many are still to be written.
struct Page {
    row: i64,
    fires: Vec<Entry>,
    /// Per fire, whether its row is still to be written.
    unwritten: Vec<bool>,
    left: u32,
}

/// The journalled pages with fires not yet written, by their first log id, and what
/// deduplicates new fires. A page's fires have consecutive ids, so finding a run is a look-up
/// among a few pages and an index, in the order the writer asks (ids ascending).
#[derive(Default)]
pub(crate) struct Journal {
    pages: BTreeMap<i64, Page>,
    /// Per job, at least the latest nominal time recorded (journalled here or in the log
    /// table). Raised as a page is journalled, before its commit: a page that then fails leaves
    /// it too high, which only sends that job's next fires to the slower look-up below it.
    latest: HashMap<i32, i64>,
    /// The encoded fires of the page being journalled (kept: one buffer for every page).
    blob: Vec<u8>,
}

/// A page journalled in a transaction not yet committed: [`Journal::apply`] it after the commit,
/// with the fires it was recorded from.
#[must_use]
pub(crate) struct Recorded {
    page: i64,
    first_id: i64,
    /// The indexes of the fires journalled, `None` when every fire was.
    kept: Option<Vec<u32>>,
    /// How many fires were journalled.
    n: usize,
}

/// Most jobs whose latest fire is remembered; beyond it the map starts again (a job not in it
/// has its latest recorded fire read once more).
const MAX_LATEST: usize = 1_000_000;

/// The largest page buffer kept for the next page (a page of the usual 2,000 fires takes
/// about 60 KB).
const MAX_KEPT_BLOB: usize = 256 * 1024;

/// Appends one encoded fire to `out`: job id, group, nominal time, trigger type name length,
/// then the name.
fn encode_one(out: &mut Vec<u8>, f: &PendingFire) {
    out.extend_from_slice(&f.job_id.to_le_bytes());
    out.extend_from_slice(&f.job_group.to_le_bytes());
    out.extend_from_slice(&f.fire_time.to_le_bytes());
    let name = f.trigger_type.as_str().as_bytes();
    out.push(name.len() as u8);
    out.extend_from_slice(name);
}

/// The fires encoded one after another ([`encode_one`]).
#[cfg(test)]
fn encode(fires: &[PendingFire]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in fires {
        encode_one(&mut out, f);
    }
    out
}

/// The fires of [`encode`]; `None` for bytes it did not write.
fn decode(mut bytes: &[u8]) -> Option<Vec<PendingFire>> {
    fn take<const N: usize>(b: &mut &[u8]) -> Option<[u8; N]> {
        let (head, rest) = b.split_at_checked(N)?;
        *b = rest;
        head.try_into().ok()
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let job_id = i32::from_le_bytes(take(&mut bytes)?);
        let job_group = i32::from_le_bytes(take(&mut bytes)?);
        let fire_time = i64::from_le_bytes(take(&mut bytes)?);
        let [len] = take::<1>(&mut bytes)?;
        let (name, rest) = bytes.split_at_checked(len as usize)?;
        bytes = rest;
        let trigger_type = std::str::from_utf8(name).ok()?.parse().ok()?;
        out.push(PendingFire {
            job_id,
            job_group,
            fire_time,
            trigger_type,
        });
    }
    Some(out)
}

/// Reserves `n` log ids in `tx` (moves the log table's AUTOINCREMENT counter past them) and
/// answers the first.
pub(crate) fn reserve_ids(tx: &rusqlite::Connection, n: usize) -> rusqlite::Result<i64> {
    let last = crate::store::log_by_job::next_log_id(tx)? - 1;
    let new = last + n as i64;
    let changed = tx
        .prepare_cached("UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'xxl_job_log'")?
        .execute(params![new])?;
    if changed == 0 {
        tx.prepare_cached("INSERT INTO sqlite_sequence (name, seq) VALUES ('xxl_job_log', ?1)")?
            .execute(params![new])?;
    }
    Ok(last + 1)
}

impl Journal {
    /// The page holding `log_id`, with the fire's index in it.
    fn find(&self, log_id: i64) -> Option<(i64, usize)> {
        let (&first, page) = self.pages.range(..=log_id).next_back()?;
        let i = usize::try_from(log_id - first).ok()?;
        (i < page.fires.len()).then_some((first, i))
    }

    /// The journalled fire `log_id`, if it has no row yet.
    pub(crate) fn get(&self, log_id: i64) -> Option<&Entry> {
        let (first, i) = self.find(log_id)?;
        let page = &self.pages[&first];
        page.unwritten[i].then(|| &page.fires[i])
    }

    /// Every journalled fire without its row yet, as the index by job takes it.
    pub(crate) fn unwritten(&self) -> impl Iterator<Item = crate::store::log_by_job::Unwritten> {
        self.pages.iter().flat_map(|(&first, p)| {
            p.fires
                .iter()
                .zip(&p.unwritten)
                .enumerate()
                .filter(|(_, (_, unwritten))| **unwritten)
                .map(move |(i, (e, _))| (e.job_id, e.fire_time, first + i as i64))
        })
    }

    /// Whether a fire of `job_id` at `fire_time` is journalled and unwritten (a fire at or
    /// before its job's latest: rare, so a walk of the journal).
    fn journalled(&self, job_id: i32, fire_time: i64) -> bool {
        self.pages.values().any(|p| {
            p.fires
                .iter()
                .zip(&p.unwritten)
                .any(|(e, unwritten)| *unwritten && e.job_id == job_id && e.fire_time == fire_time)
        })
    }

    /// The latest nominal time recorded for `job_id` (read from the log table the first time
    /// the job is seen).
    fn latest_of(&mut self, tx: &rusqlite::Connection, job_id: i32) -> rusqlite::Result<i64> {
        if let Some(&t) = self.latest.get(&job_id) {
            return Ok(t);
        }
        let t = crate::store::log_by_job::latest_fire(tx, job_id)?.unwrap_or(i64::MIN);
        self.latest.insert(job_id, t);
        Ok(t)
    }

    /// Whether a fire at or before its job's latest was recorded: earlier in this page (the
    /// fires of `page` before it that `kept` keeps), journalled here, or in the log table.
    fn recorded_before(
        &self,
        tx: &rusqlite::Connection,
        page: &[PendingFire],
        kept: impl Fn(usize) -> bool,
        f: &PendingFire,
    ) -> rusqlite::Result<bool> {
        let in_page = page
            .iter()
            .enumerate()
            .any(|(j, g)| g.job_id == f.job_id && g.fire_time == f.fire_time && kept(j));
        if in_page || self.journalled(f.job_id, f.fire_time) {
            return Ok(true);
        }
        tx.prepare_cached("SELECT 1 FROM xxl_job_log WHERE job_id = ?1 AND fire_time = ?2")?
            .query_row(params![f.job_id, f.fire_time], |_| Ok(()))
            .optional()
            .map(|found| found.is_some())
    }

    /// Journals the fires of `fires` not recorded yet as one page in `tx`, with their log ids
    /// reserved; `None` when every one was recorded already. A fire later than its job's latest
    /// recorded one is new (the common case, a look-up in memory); any other is looked for.
    pub(crate) fn record(
        &mut self,
        tx: &rusqlite::Connection,
        fires: &[PendingFire],
    ) -> rusqlite::Result<Option<Recorded>> {
        if self.latest.len() > MAX_LATEST {
            // started again from the fires still journalled (a job's latest must never fall
            // below one of them), and from the index by job, which first takes in every run:
            // a job's latest is read from it alone
            crate::store::log_by_job::index(tx, self.unwritten())?;
            self.latest.clear();
            for p in self.pages.values() {
                for e in &p.fires {
                    let at = self.latest.entry(e.job_id).or_insert(i64::MIN);
                    *at = (*at).max(e.fire_time);
                }
            }
        }
        let mut blob = std::mem::take(&mut self.blob);
        blob.clear();
        // the indexes kept, once one fire was not (until then: all of them)
        let mut kept: Option<Vec<u32>> = None;
        let mut n = 0;
        for (i, f) in fires.iter().enumerate() {
            let last = self.latest_of(tx, f.job_id)?;
            let new = if f.fire_time > last {
                true
            } else {
                let keeps = |j: usize| match &kept {
                    None => j < i,
                    Some(k) => k.binary_search(&(j as u32)).is_ok(),
                };
                !self.recorded_before(tx, &fires[..i], keeps, f)?
            };
            if new {
                if let Some(k) = &mut kept {
                    k.push(i as u32);
                }
                encode_one(&mut blob, f);
                n += 1;
                if f.fire_time > last {
                    self.latest.insert(f.job_id, f.fire_time);
                }
            } else if kept.is_none() {
                kept = Some((0..i as u32).collect());
            }
        }
        if n == 0 {
            self.blob = blob;
            return Ok(None);
        }
        let inserted = reserve_ids(tx, n).and_then(|first_id| {
            tx.prepare_cached(
                "INSERT INTO xjob_fire_journal (first_log_id, fires) VALUES (?1, ?2)",
            )?
            .execute(params![first_id, &blob[..]])?;
            Ok((tx.last_insert_rowid(), first_id))
        });
        // the buffer's memory is kept for the next page, not its bytes (a big page's is let go)
        if blob.capacity() <= MAX_KEPT_BLOB {
            self.blob = blob;
        }
        let (page, first_id) = inserted?;
        Ok(Some(Recorded {
            page,
            first_id,
            kept,
            n,
        }))
    }

    /// Takes a committed page in: answers its fires for the ring. `fires` are the ones it was
    /// recorded from; `job_of` gives each its job as the scan read it, at `read_ms`.
    pub(crate) fn apply(
        &mut self,
        r: Recorded,
        fires: &[PendingFire],
        job_of: impl Fn(i32) -> Option<Arc<crate::jobs::JobDef>>,
        read_ms: i64,
    ) -> Vec<Fire> {
        let mut out = Vec::with_capacity(r.n);
        let mut entries = Vec::with_capacity(r.n);
        let mut take = |f: &PendingFire| {
            out.push(Fire {
                log_id: r.first_id + entries.len() as i64,
                job_id: f.job_id,
                fire_time: f.fire_time,
                trigger_type: f.trigger_type,
                job: job_of(f.job_id),
                read_ms,
                epoch: 0,
            });
            entries.push(Entry {
                job_group: f.job_group,
                job_id: f.job_id,
                fire_time: f.fire_time,
                trigger_type: f.trigger_type,
            });
        };
        match &r.kept {
            None => fires.iter().for_each(&mut take),
            Some(k) => k
                .iter()
                .filter_map(|&i| fires.get(i as usize))
                .for_each(&mut take),
        }
        let left = entries.len() as u32;
        self.pages.insert(
            r.first_id,
            Page {
                row: r.page,
                unwritten: vec![true; entries.len()],
                fires: entries,
                left,
            },
        );
        out
    }

    /// In `tx`, deletes the pages whose last unwritten fires are among `written` (journalled
    /// fires whose rows `tx` inserted, each once); [`Journal::settle`] them after the commit.
    pub(crate) fn delete_emptied(
        &self,
        tx: &rusqlite::Connection,
        written: &[i64],
    ) -> rusqlite::Result<()> {
        let mut per_page: HashMap<i64, u32> = HashMap::default();
        for id in written {
            if let Some((first, _)) = self.find(*id) {
                *per_page.entry(first).or_default() += 1;
            }
        }
        let mut s = tx.prepare_cached("DELETE FROM xjob_fire_journal WHERE id = ?1")?;
        for (first, n) in per_page {
            if let Some(p) = self.pages.get(&first).filter(|p| p.left <= n) {
                s.execute(params![p.row])?;
            }
        }
        Ok(())
    }

    /// Forgets the journalled fires `written` (their rows are committed).
    pub(crate) fn settle(&mut self, written: &[i64]) {
        for id in written {
            let Some((first, i)) = self.find(*id) else {
                continue;
            };
            let Some(page) = self.pages.get_mut(&first) else {
                continue;
            };
            if std::mem::replace(&mut page.unwritten[i], false) {
                page.left = page.left.saturating_sub(1);
            }
            if page.left == 0 {
                self.pages.remove(&first);
            }
        }
    }
}

/// The columns of a pending row, as a scan of an earlier version recorded it (`?1`–`?6`: id,
/// group, job, trigger time text, nominal time, trigger type).
pub(crate) static INSERT_PENDING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT OR IGNORE INTO xxl_job_log (id, job_group, job_id, trigger_time, trigger_code, \
         handle_code, executor_fail_retry_count, alarm_status, fire_time, fire_state, \
         trigger_type, chain_depth) VALUES (?1, ?2, ?3, ?4, 0, 0, 0, {}, ?5, {}, ?6, 0)",
        AlarmStatus::Unchecked.code(),
        fire_state::PENDING
    )
});

/// Inserts the pending row of journalled fire `id` (a result came without its outcome: the row
/// must exist for the result's update).
pub(crate) fn insert_pending(
    tx: &rusqlite::Connection,
    id: i64,
    e: &Entry,
) -> rusqlite::Result<()> {
    tx.prepare_cached(&INSERT_PENDING)?.execute(params![
        id,
        e.job_group,
        e.job_id,
        naive_text(e.fire_time),
        e.fire_time,
        e.trigger_type.as_str()
    ])?;
    Ok(())
}

/// A journalled run's row, written once its outcome comes: the outcome's columns (`?1`–`?10`,
/// as [`run_rows::outcome_row`] binds them), the result's (`?11`–`?13`) when it came along,
/// then the run's identity (group, job, nominal time, chain depth). One row of `VALUES`: an
/// `INSERT … SELECT` keeps a statement journal (a copy of every page it changes), which cost
/// more than the row itself.
struct Inserts {
    with_result: String,
    outcome: String,
}

static INSERTS: std::sync::LazyLock<Inserts> = std::sync::LazyLock::new(|| {
    let insert = |result_cols: &str, result_values: &str, first: usize| {
        format!(
            "INSERT OR IGNORE INTO xxl_job_log (id, trigger_time, executor_address, \
             executor_handler, executor_param, executor_sharding_param, \
             executor_fail_retry_count, trigger_code, trigger_msg, trigger_type, {result_cols}, \
             fire_state, job_group, job_id, fire_time, chain_depth) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, {result_values}, {}, ?{first}, \
             ?{}, ?{}, ?{})",
            fire_state::DISPATCHED,
            first + 1,
            first + 2,
            first + 3
        )
    };
    Inserts {
        with_result: insert(
            "handle_code, handle_time, handle_msg, alarm_status",
            &format!("?11, ?12, ?13, {}", rules::first_alarm_sql("?11")),
            14,
        ),
        outcome: insert(
            "handle_code, alarm_status",
            &format!("0, {}", AlarmStatus::Unchecked.code()),
            11,
        ),
    }
});

/// Which jobs exist, as the writer read them; kept from batch to batch for as long as no other
/// connection committed a change to the database (SQLite's `PRAGMA data_version`): jobs are
/// created, edited and deleted through the pool, so any such change empties it, and a run's
/// row is never written for a job deleted before its batch began.
#[derive(Default)]
pub(crate) struct JobCache {
    /// `data_version` when the entries were read.
    version: Option<i64>,
    jobs: HashMap<i32, bool>,
}

/// Most jobs [`JobCache`] remembers; beyond it, it starts again.
const MAX_CACHED_JOBS: usize = 1_000_000;

impl JobCache {
    /// Empties the cache when another connection committed since it was read.
    async fn check(&mut self, p: &Port<'_>) -> Result<()> {
        let version = p.row::<i64>("PRAGMA data_version", &[]).await?;
        if self.version != version || self.jobs.len() > MAX_CACHED_JOBS {
            self.jobs.clear();
            self.version = version;
        }
        Ok(())
    }

    async fn exists(&mut self, p: &Port<'_>, job_id: i32) -> Result<bool> {
        if let Some(&e) = self.jobs.get(&job_id) {
            return Ok(e);
        }
        let e = p
            .row::<i32>("SELECT 1 FROM xxl_job_info WHERE id = ?", &[job_id.into()])
            .await?
            .is_some();
        self.jobs.insert(job_id, e);
        Ok(e)
    }
}

/// A journalled run's row as [`INSERTS`] binds it: the outcome's values, the result's when
/// it came along, then the run's identity (from the journal).
type JournalRow<'a> = (
    &'a TriggerRecord,
    Option<(&'a HandleResult, i64)>,
    &'a Entry,
);

fn bind<'a>(&(r, result, e): &JournalRow<'a>, args: &mut Vec<Arg<'a>>) {
    run_rows::outcome_args(r, args);
    if let Some((item, at)) = result {
        run_rows::result_args(item, at, args);
    }
    let (group, job) = (e.job_group.into(), e.job_id.into());
    args.extend([group, job, e.fire_time, r.chain_depth.into()].map(Arg::Int));
}

/// Inserts the rows of the journalled runs (no row yet) among a batch's `outcomes`, each with
/// its result when `results` has it, and takes those outcomes and results out (what is left
/// goes to [`run_rows::write`]); a journalled run with a result but no outcome gets its pending
/// row (the result then updates it). A job deleted since its fire was journalled gets no row.
/// Answers the runs whose result it stored, and the journalled runs it wrote (each once: for
/// [`Journal::delete_emptied`], and [`Journal::settle`] after the commit).
pub(crate) async fn insert_rows<'a>(
    p: &Port<'_>,
    journal: &'a Journal,
    jobs: &mut JobCache,
    outcomes: &mut Vec<&'a TriggerRecord>,
    results: &mut Vec<(&'a HandleResult, i64)>,
) -> Result<(Vec<Written>, Vec<i64>)> {
    jobs.check(p).await?;
    let mut by_run: HashMap<i64, (&HandleResult, i64)> =
        results.iter().map(|&(i, at)| (i.log_id, (i, at))).collect();
    let mut inserted = Vec::new();
    let mut taken = foldhash::HashSet::default();
    let (mut with_result, mut alone) = (Vec::new(), Vec::new());
    let mut rest = Vec::with_capacity(outcomes.len());
    // in id order: the rows go at the end of the table's b-tree (an append) instead of
    // splitting pages in its last few (the order outcomes come in)
    outcomes.sort_by_key(|r| r.log_id);
    for r in outcomes.drain(..) {
        let Some(e) = journal.get(r.log_id).filter(|_| taken.insert(r.log_id)) else {
            rest.push(r);
            continue;
        };
        inserted.push(r.log_id);
        let result = by_run.remove(&r.log_id);
        if !jobs.exists(p, e.job_id).await? {
            continue; // the job was deleted (with its runs) since the fire was journalled
        }
        match result {
            Some(_) => with_result.push((r, result, e)),
            None => alone.push((r, result, e)),
        }
    }
    *outcomes = rest;
    let changed = p
        .execute_each(&INSERTS.with_result, &with_result, |r, a| bind(r, a))
        .await?;
    let written = (with_result.iter().zip(changed))
        .filter_map(|((r, res, _), n)| Some(Written::of(r, res.filter(|_| n == 1)?.0.code)))
        .collect();
    p.execute_each(&INSERTS.outcome, &alone, |r, a| bind(r, a))
        .await?;
    // a result without its outcome: the run's pending row first
    for (item, _) in by_run.values() {
        let id = item.log_id;
        if let Some(e) = journal.get(id).filter(|_| taken.insert(id)) {
            inserted.push(id);
            if jobs.exists(p, e.job_id).await? {
                p.on_file(|c| insert_pending(c, id, e)).transpose()?;
            }
        }
    }
    results.retain(|(i, _)| by_run.contains_key(&i.log_id));
    Ok((written, inserted))
}

/// The journal's row that holds the dispatch mark (pages are rows 1 and up).
pub(crate) const MARK_ROW: i64 = 0;

/// Writes the dispatch mark: fires with nominal times up to `through` (epoch ms) may be sent
/// from now on. Written (and committed) before any of them is sent, so that at a restart the
/// fires that may have been sent are exactly the pending ones at or before it.
/// With `exact`, the mark is set to `through` even below where it was (a graceful stop,
/// once nothing is being sent).
pub(crate) fn write_mark(conn: &Connection, through: i64, exact: bool) -> rusqlite::Result<()> {
    let sql = if exact {
        "INSERT INTO xjob_fire_journal (id, first_log_id, fires) VALUES (?1, ?2, x'') \
         ON CONFLICT (id) DO UPDATE SET first_log_id = excluded.first_log_id"
    } else {
        "INSERT INTO xjob_fire_journal (id, first_log_id, fires) VALUES (?1, ?2, x'') \
         ON CONFLICT (id) DO UPDATE SET first_log_id = max(first_log_id, excluded.first_log_id)"
    };
    conn.prepare_cached(sql)?
        .execute(params![MARK_ROW, through])?;
    Ok(())
}

/// What a start found an earlier run left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Journalled fires made pending (never sent).
    pub pending: usize,
    /// Fires in doubt: journalled fires at or before the dispatch mark (they may have been
    /// sent, their outcome held in memory) and rows claimed for dispatch without an outcome.
    pub in_doubt: usize,
}

/// At start: every journalled fire without a log row becomes a pending row — or, at or before
/// the dispatch mark, a row in doubt ([`crate::store::in_doubt`]) — and so does every row an
/// earlier run claimed for dispatch without recording its outcome; the journal is emptied. A
/// page that cannot be read is dropped (logged): its fires are the schedule's misfires.
pub(crate) fn recover(conn: &mut Connection) -> rusqlite::Result<Recovered> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mark: i64 = tx
        .query_row(
            "SELECT first_log_id FROM xjob_fire_journal WHERE id = ?1",
            [MARK_ROW],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(i64::MIN);
    let pages: Vec<(i64, i64, Vec<u8>)> = {
        let mut s =
            tx.prepare("SELECT id, first_log_id, fires FROM xjob_fire_journal WHERE id <> ?1")?;
        s.query_map([MARK_ROW], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut out = Recovered::default();
    for (page, first_id, bytes) in pages {
        let Some(fires) = decode(&bytes) else {
            tracing::error!(page, "a page of the fire journal cannot be read; dropped");
            continue;
        };
        let mut s = tx.prepare_cached(&INSERT_PENDING)?;
        for (i, f) in fires.iter().enumerate() {
            let id = first_id + i as i64;
            let made = s.execute(params![
                id,
                f.job_group,
                f.job_id,
                naive_text(f.fire_time),
                f.fire_time,
                f.trigger_type.as_str()
            ])?;
            if made > 0 && f.fire_time <= mark {
                tx.prepare_cached("UPDATE xxl_job_log SET fire_state = ?2 WHERE id = ?1")?
                    .execute(params![id, fire_state::IN_DOUBT])?;
                out.in_doubt += 1;
            } else {
                out.pending += made;
            }
        }
    }
    // pending rows the first scan pass of an earlier run recorded (through the pool, not the
    // journal) are sent without a claim on a single node: at or before the mark, in doubt too
    out.in_doubt += tx.execute(
        &format!(
            "UPDATE xxl_job_log SET fire_state = {} WHERE fire_state = {} AND trigger_code = 0 \
             AND fire_time <= ?1",
            fire_state::IN_DOUBT,
            fire_state::PENDING
        ),
        [mark],
    )?;
    // what an earlier run claimed for dispatch (workflow node runs, recovered fires) and did
    // not record may have been sent
    out.in_doubt += tx.execute(
        &format!(
            "UPDATE xxl_job_log SET fire_state = {} WHERE fire_state > {} \
             AND fire_state <> {} AND trigger_code = 0",
            fire_state::IN_DOUBT,
            fire_state::IN_DOUBT,
            fire_state::DISPATCHED
        ),
        [],
    )?;
    tx.execute("DELETE FROM xjob_fire_journal", [])?;
    tx.commit()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whatever fires are encoded decode to themselves.
        #[test]
        fn fires_decode_to_what_was_encoded(
            raw in proptest::collection::vec((proptest::num::i32::ANY, proptest::num::i32::ANY,
                proptest::num::i64::ANY, 0usize..7), 0..50)
        ) {
            let types = [TriggerType::Manual, TriggerType::Cron, TriggerType::Retry,
                TriggerType::Parent, TriggerType::Api, TriggerType::Misfire, TriggerType::Workflow];
            let fires: Vec<PendingFire> = raw.into_iter().map(|(job_id, job_group, fire_time, t)| {
                PendingFire { job_id, job_group, fire_time, trigger_type: types[t] }
            }).collect();
            proptest::prop_assert_eq!(decode(&encode(&fires)), Some(fires));
        }
    }

    /// Bytes cut short decode to nothing rather than to a wrong fire.
    #[test]
    fn a_cut_page_is_refused() {
        let f = PendingFire {
            job_id: 1,
            job_group: 2,
            fire_time: 3,
            trigger_type: TriggerType::Cron,
        };
        let bytes = encode(&[f.clone(), f]);
        for n in 1..bytes.len() {
            if n == bytes.len() / 2 {
                continue;
            }
            assert_eq!(decode(&bytes[..n]), None, "{n} bytes");
        }
        assert_eq!(decode(&bytes[..bytes.len() / 2]).map(|v| v.len()), Some(1));
    }
}
