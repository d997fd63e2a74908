//! A scan pass on a SQLite file: on the run-row writer's own connection, between its batches,
//! page by page (each page one `IMMEDIATE` transaction of at most [`PAGE`] jobs), with cached
//! single-row statements ([`crate::store::sqlite_text`]). The node is the file's only one
//! (it holds the file's lock), so a job's definition is read again only when its version
//! changed or this node's console edited it. Each page's fires go to the ring as soon as the
//! page commits.

use chrono_tz::Tz;

use super::page::{self, due_page};
use super::plan::ScanCache;
use super::{PassContext, PassOutput, ScanReport};
use crate::config::SchedulerConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::fire::Fire;
use crate::store::groups;
use crate::store::port;
use crate::store::writer::{Journal, LogWriter};
use std::collections::HashSet;

/// Jobs per page of a single-node pass: each page is one transaction on the writer's
/// connection, and the run-row writes queued meanwhile go between pages (a pass over many jobs
/// never holds the writer long enough to fill its queue and stall dispatch).
const PAGE: u64 = 2_000;

/// One page of a single-node pass: jobs due with an id above `after_id`, at most `limit`.
/// The first page (`after_id` 0) also reads the groups.
struct Page {
    fires: Vec<Fire>,
    report: ScanReport,
    /// The groups, with the directory's ticket for their read.
    groups: Option<(u64, Vec<entity::xxl_job_group::Model>)>,
    /// The last job id of a full page (there may be more), `None` when the pass is done.
    next_after: Option<i32>,
}

/// Which page a pass reads, and under what settings.
struct PageOf<'a> {
    /// The pass's now (epoch ms).
    now: i64,
    cfg: &'a SchedulerConfig,
    directory: &'a Directory,
    tz: Tz,
    /// Jobs after this id…
    after_id: i32,
    /// …at most this many.
    limit: u64,
}

/// One page in one transaction: reads the groups on the first page, then the shared page
/// ([`due_page`]), its fires recorded in the writer's journal (the one file-only step).
fn page(
    conn: &mut rusqlite::Connection,
    journal: &mut Journal,
    of: &PageOf<'_>,
    cache: &mut ScanCache,
) -> Result<Page> {
    let mut report = ScanReport::default();
    let shared = page::PageOf {
        now: of.now,
        cfg: of.cfg,
        tz: of.tz,
        directory: of.directory,
        exclusive: true,
        after_id: of.after_id,
        limit: of.limit,
        set: None,
        compensated: &HashSet::new(),
    };
    let (groups, planned, recorded) = port::file_tx(conn, async |p| {
        let groups = if of.after_id == 0 {
            let ticket = of.directory.read_ticket();
            Some((ticket, groups::all_in(p).await?))
        } else {
            None
        };
        let planned = due_page(p, &shared, cache, &mut report).await?;
        let Some(recorded) = p.on_file(|c| journal.record(c, &planned.pending)) else {
            return Err(crate::Error::Stopped("run-row writer's connection"));
        };
        Ok((groups, planned, recorded?))
    })?;
    let jobs = &cache.jobs;
    let fires = match recorded {
        Some(r) => journal.apply(r, &planned.pending, |id| jobs.get(&id).cloned(), of.now),
        None => Vec::new(),
    };
    report.fires = fires.len();
    Ok(Page {
        fires,
        report,
        groups,
        next_after: planned.next_after,
    })
}

/// One pass of at most `limit` jobs, page by page on `writer`'s connection; each page's fires
/// go to the context's sink as soon as it commits.
pub(super) async fn pass(
    writer: LogWriter,
    cx: PassContext,
    limit: u64,
    mut cache: ScanCache,
) -> PassOutput {
    let now = cx.clock.now_ms();
    let mut total = ScanReport::default();
    let (mut after, mut left) = (0, limit);
    loop {
        let (dir, cfg, tz) = (cx.directory.clone(), cx.cfg.clone(), cx.tz);
        let n = left.min(PAGE);
        let out = writer
            .exec_journalled(move |conn, journal| {
                let of = PageOf {
                    now,
                    cfg: &cfg,
                    directory: &dir,
                    tz,
                    after_id: after,
                    limit: n,
                };
                let r = page(conn, journal, &of, &mut cache);
                (r, cache)
            })
            .await;
        let page = match out {
            Ok((Ok(page), c)) => {
                cache = c;
                page
            }
            Ok((Err(e), c)) => return (Err(e), c),
            Err(e) => return (Err(e), ScanCache::default()),
        };
        if let Some((ticket, groups)) = page.groups {
            cx.directory.set_groups_read(ticket, groups);
        }
        total.add(&page.report);
        if !page.fires.is_empty() {
            (cx.sink)(page.fires);
        }
        left -= page.report.jobs as u64;
        match page.next_after {
            Some(id) if left > 0 => after = id,
            _ => break,
        }
    }
    (Ok(total), cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single-node pass goes page by page: each page a transaction of at most `limit` jobs,
    /// answering where the next one starts; together the pages record every due job's fires
    /// once, a page's log ids in nominal-time order, and a second pass over the same window
    /// records none again.
    #[tokio::test]
    async fn a_single_node_pass_goes_page_by_page_and_records_each_fire_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let db = crate::store::tests::file_db(&path).await;
        let t0 = 1_800_000_000_000;
        let now = crate::clock::ms_to_naive(t0);
        let g = crate::store::groups::insert(&db, "app", "App", 0, None, now)
            .await
            .unwrap();
        for i in 0..5 {
            let spec = crate::JobSpec::cron(g, &format!("j{i}"), "* * * * * ?", "h")
                .validate(chrono_tz::UTC, now)
                .unwrap();
            let id = crate::store::jobs::insert(&db, spec).await.unwrap();
            crate::store::jobs::set_running(&db, id, t0 + 1_000)
                .await
                .unwrap();
        }
        db.close().await.unwrap();
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let cfg = SchedulerConfig::default();
        let (mut cache, directory) = (ScanCache::default(), Directory::default());
        let mut journal = Journal::default();
        let mut pass = |conn: &mut rusqlite::Connection| {
            let (mut after, mut pages, mut fires) = (0, Vec::new(), Vec::new());
            loop {
                let of = PageOf {
                    now: t0,
                    cfg: &cfg,
                    directory: &directory,
                    tz: chrono_tz::UTC,
                    after_id: after,
                    limit: 2,
                };
                let p = page(conn, &mut journal, &of, &mut cache).unwrap();
                pages.push((p.report.jobs, p.groups.map(|(_, g)| g.len())));
                // a page's log ids follow nominal time (rows then go in near the table's end)
                let mut by_id: Vec<_> = p.fires.iter().map(|f| (f.log_id, f.fire_time)).collect();
                by_id.sort_unstable();
                assert!(
                    by_id.windows(2).all(|w| w[0].1 <= w[1].1),
                    "ids out of time order: {by_id:?}"
                );
                fires.extend(p.fires.iter().map(|f| (f.job_id, f.fire_time)));
                match p.next_after {
                    Some(id) => after = id,
                    None => break,
                }
            }
            (pages, fires)
        };
        let (pages, fires) = pass(&mut conn);
        assert_eq!(
            pages,
            vec![(2, Some(1)), (2, None), (1, None)],
            "jobs per page; the first page also reads the groups"
        );
        let mut unique = fires.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), fires.len(), "no fire twice");
        assert_eq!(
            fires.len(),
            5 * 5,
            "five jobs, a fire per second of the 5 s window"
        );
        let (_, again) = pass(&mut conn);
        assert!(again.is_empty(), "{again:?}");
    }
}
