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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::model::{AlarmStatus, TriggerType, fire_state};
use crate::store::logs::{Fire, PendingFire};
use crate::store::sqlite_sync::naive_text;

/// A journalled fire without its log row yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub job_group: i32,
    pub job_id: i32,
    pub fire_time: i64,
    pub trigger_type: TriggerType,
}

/// A journalled page: its row, its fires in log-id order (each with whether its row is still
/// to be written), and how many are.
struct Page {
    row: i64,
    fires: Vec<(Entry, bool)>,
    left: u32,
}

/// The journalled pages with fires not yet written, by their first log id, and what
/// deduplicates new fires. A page's fires have consecutive ids, so finding a run is a look-up
/// among a few pages and an index, in the order the writer asks (ids ascending).
#[derive(Default)]
pub(crate) struct Journal {
    pages: BTreeMap<i64, Page>,
    /// Per job, the latest nominal time recorded (journalled here or in the log table).
    latest: HashMap<i32, i64>,
}

/// A page journalled in a transaction not yet committed: [`Journal::apply`] it after the commit.
#[must_use]
pub(crate) struct Recorded {
    page: i64,
    first_id: i64,
    fires: Vec<PendingFire>,
    latest: Vec<(i32, i64)>,
}

/// Most jobs whose latest fire is remembered; beyond it the map starts again (a job not in it
/// has its latest recorded fire read once more).
const MAX_LATEST: usize = 1_000_000;

/// One encoded fire: job id, group, nominal time, trigger type name length, then the name.
fn encode(fires: &[PendingFire]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fires.len() * 24);
    for f in fires {
        out.extend_from_slice(&f.job_id.to_le_bytes());
        out.extend_from_slice(&f.job_group.to_le_bytes());
        out.extend_from_slice(&f.fire_time.to_le_bytes());
        let name = f.trigger_type.as_str().as_bytes();
        out.push(name.len() as u8);
        out.extend_from_slice(name);
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
fn reserve_ids(tx: &Transaction<'_>, n: usize) -> rusqlite::Result<i64> {
    let seq: Option<i64> = tx
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'xxl_job_log'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let max: Option<i64> = tx
        .prepare_cached("SELECT max(id) FROM xxl_job_log")?
        .query_row([], |r| r.get(0))?;
    let last = seq.unwrap_or(0).max(max.unwrap_or(0));
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
        let (e, unwritten) = &self.pages[&first].fires[i];
        unwritten.then_some(e)
    }

    /// Whether a fire of `job_id` at `fire_time` is journalled and unwritten (a fire at or
    /// before its job's latest: rare, so a walk of the journal).
    fn journalled(&self, job_id: i32, fire_time: i64) -> bool {
        self.pages.values().any(|p| {
            p.fires
                .iter()
                .any(|(e, unwritten)| *unwritten && e.job_id == job_id && e.fire_time == fire_time)
        })
    }

    /// Whether `f` was recorded already: journalled here, or in the log table.
    fn recorded(
        &self,
        tx: &Transaction<'_>,
        f: &PendingFire,
        latest: &mut HashMap<i32, i64>,
    ) -> rusqlite::Result<bool> {
        let last = match latest.get(&f.job_id).or_else(|| self.latest.get(&f.job_id)) {
            Some(&t) => t,
            None => {
                let t: Option<i64> = tx
                    .prepare_cached("SELECT max(fire_time) FROM xxl_job_log WHERE job_id = ?1")?
                    .query_row(params![f.job_id], |r| r.get(0))?;
                let t = t.unwrap_or(i64::MIN);
                latest.insert(f.job_id, t);
                t
            }
        };
        if f.fire_time > last {
            return Ok(false);
        }
        if self.journalled(f.job_id, f.fire_time) {
            return Ok(true);
        }
        tx.prepare_cached("SELECT 1 FROM xxl_job_log WHERE job_id = ?1 AND fire_time = ?2")?
            .query_row(params![f.job_id, f.fire_time], |_| Ok(()))
            .optional()
            .map(|found| found.is_some())
    }

    /// Journals the fires of `fires` not recorded yet as one page in `tx`, with their log ids
    /// reserved; `None` when every one was recorded already.
    pub(crate) fn record(
        &self,
        tx: &Transaction<'_>,
        fires: &[PendingFire],
    ) -> rusqlite::Result<Option<Recorded>> {
        let mut latest = HashMap::new();
        let mut new: Vec<PendingFire> = Vec::with_capacity(fires.len());
        let mut seen = HashSet::new();
        for f in fires {
            if !seen.insert((f.job_id, f.fire_time)) || self.recorded(tx, f, &mut latest)? {
                continue;
            }
            new.push(f.clone());
        }
        if new.is_empty() {
            return Ok(None);
        }
        for f in &new {
            let t = latest.entry(f.job_id).or_insert(i64::MIN);
            *t = (*t).max(f.fire_time);
        }
        let first_id = reserve_ids(tx, new.len())?;
        tx.prepare_cached("INSERT INTO xjob_fire_journal (first_log_id, fires) VALUES (?1, ?2)")?
            .execute(params![first_id, encode(&new)])?;
        Ok(Some(Recorded {
            page: tx.last_insert_rowid(),
            first_id,
            fires: new,
            latest: latest.into_iter().collect(),
        }))
    }

    /// Takes a committed page in: answers its fires for the ring (`job_of` gives each its job as
    /// the scan read it, at `read_ms`).
    pub(crate) fn apply(
        &mut self,
        r: Recorded,
        job_of: impl Fn(i32) -> Option<Arc<crate::jobs::JobDef>>,
        read_ms: i64,
    ) -> Vec<Fire> {
        if self.latest.len() > MAX_LATEST {
            // started again from the fires still journalled (a job's latest must never fall
            // below one of them)
            self.latest.clear();
            for (e, _) in self.pages.values().flat_map(|p| &p.fires) {
                let at = self.latest.entry(e.job_id).or_insert(i64::MIN);
                *at = (*at).max(e.fire_time);
            }
        }
        for (job, t) in r.latest {
            let at = self.latest.entry(job).or_insert(i64::MIN);
            *at = (*at).max(t);
        }
        let mut out = Vec::with_capacity(r.fires.len());
        let mut fires = Vec::with_capacity(r.fires.len());
        for (i, f) in r.fires.into_iter().enumerate() {
            out.push(Fire {
                log_id: r.first_id + i as i64,
                job_id: f.job_id,
                fire_time: f.fire_time,
                trigger_type: f.trigger_type,
                job: job_of(f.job_id),
                read_ms,
                epoch: 0,
            });
            let e = Entry {
                job_group: f.job_group,
                job_id: f.job_id,
                fire_time: f.fire_time,
                trigger_type: f.trigger_type,
            };
            fires.push((e, true));
        }
        let left = fires.len() as u32;
        self.pages.insert(
            r.first_id,
            Page {
                row: r.page,
                fires,
                left,
            },
        );
        out
    }

    /// In `tx`, deletes the pages whose last unwritten fires are among `written` (journalled
    /// fires whose rows `tx` inserted, each once); [`Journal::settle`] them after the commit.
    pub(crate) fn delete_emptied(
        &self,
        tx: &Transaction<'_>,
        written: &[i64],
    ) -> rusqlite::Result<()> {
        let mut per_page: HashMap<i64, u32> = HashMap::new();
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
            if std::mem::replace(&mut page.fires[i].1, false) {
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
pub(crate) fn insert_pending(tx: &Transaction<'_>, id: i64, e: &Entry) -> rusqlite::Result<()> {
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

/// At start: every journalled fire without a log row becomes a pending row, and the journal is
/// emptied. Answers how many rows were made. A page that cannot be read is dropped (logged):
/// its fires are the schedule's misfires.
pub(crate) fn recover(conn: &mut Connection) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let pages: Vec<(i64, i64, Vec<u8>)> = {
        let mut s = tx.prepare("SELECT id, first_log_id, fires FROM xjob_fire_journal")?;
        s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut made = 0;
    for (page, first_id, bytes) in pages {
        let Some(fires) = decode(&bytes) else {
            tracing::error!(page, "a page of the fire journal cannot be read; dropped");
            continue;
        };
        let mut s = tx.prepare_cached(&INSERT_PENDING)?;
        for (i, f) in fires.iter().enumerate() {
            made += s.execute(params![
                first_id + i as i64,
                f.job_group,
                f.job_id,
                naive_text(f.fire_time),
                f.fire_time,
                f.trigger_type.as_str()
            ])?;
        }
    }
    tx.execute("DELETE FROM xjob_fire_journal", [])?;
    tx.commit()?;
    Ok(made)
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
