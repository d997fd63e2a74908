//! Prometheus metrics, kept in atomics and rendered in the text exposition format by hand (the
//! format is small; an exporter crate would add dozens of dependencies).
//!
//! The engine's parts record into one shared [`Metrics`]: the scan (fires recorded, misfires),
//! the trigger procedure (triggers by result, fire lateness, dispatch latency) and the completion
//! actor (results received). Gauges that already live elsewhere (lane occupancy, live executors)
//! are read when `/metrics` is scraped and passed to [`Metrics::render`].

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bucket bounds of the lateness histogram, seconds.
const LATENESS_BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Bucket bounds of the scan-pass duration histogram, seconds.
const SCAN_BOUNDS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];
/// Bucket bounds of the dispatch latency histogram, seconds.
const DISPATCH_BOUNDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1.0, 5.0,
];

/// A cumulative histogram over fixed bounds, in microseconds inside.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts per bucket; the last one is `+Inf`.
    counts: Vec<AtomicU64>,
    sum_us: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
        }
    }

    fn observe_us(&self, us: u64) {
        let secs = us as f64 / 1e6;
        let i = self
            .bounds
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {cumulative}");
    }
}

#[derive(Debug)]
struct Inner {
    fires_recorded: AtomicU64,
    misfires: AtomicU64,
    triggers_ok: AtomicU64,
    triggers_failed: AtomicU64,
    callbacks: AtomicU64,
    /// Results of a callback not written: [not authorised, unknown run, invalid].
    results_skipped: [AtomicU64; 3],
    /// Leases renewed (one per bucket per renewal round).
    lease_renewals: AtomicU64,
    /// Leases that lapsed before their renewal.
    leases_lost: AtomicU64,
    /// Buckets this node holds now.
    buckets_owned: AtomicU64,
    /// Workflow runs started.
    workflow_runs: AtomicU64,
    /// Workflow runs ended: [succeeded, failed].
    workflow_ended: [AtomicU64; 2],
    /// Node-run results applied to workflow runs.
    workflow_transitions: AtomicU64,
    /// Looks of the workflow actor for finished node runs.
    workflow_looks: AtomicU64,
    /// Looks of the workflow actor for due scheduled workflows.
    workflow_schedule_looks: AtomicU64,
    /// Fires in doubt settled: [received, resent, failed, dropped].
    in_doubt: [AtomicU64; 4],
    lateness: Histogram,
    dispatch: Histogram,
    scan: Histogram,
    scan_max_us: AtomicU64,
}

/// The engine's counters and histograms; cheap to clone (one shared set).
#[derive(Clone, Debug)]
pub struct Metrics(Arc<Inner>);

impl Default for Metrics {
    fn default() -> Self {
        Metrics(Arc::new(Inner {
            fires_recorded: AtomicU64::new(0),
            misfires: AtomicU64::new(0),
            triggers_ok: AtomicU64::new(0),
            triggers_failed: AtomicU64::new(0),
            callbacks: AtomicU64::new(0),
            results_skipped: Default::default(),
            in_doubt: Default::default(),
            lease_renewals: AtomicU64::new(0),
            leases_lost: AtomicU64::new(0),
            buckets_owned: AtomicU64::new(0),
            workflow_runs: AtomicU64::new(0),
            workflow_ended: [AtomicU64::new(0), AtomicU64::new(0)],
            workflow_transitions: AtomicU64::new(0),
            workflow_looks: AtomicU64::new(0),
            workflow_schedule_looks: AtomicU64::new(0),
            lateness: Histogram::new(&LATENESS_BOUNDS),
            dispatch: Histogram::new(&DISPATCH_BOUNDS),
            scan: Histogram::new(&SCAN_BOUNDS),
            scan_max_us: AtomicU64::new(0),
        }))
    }
}

/// Why a result of a callback batch was not written (the rest of the batch was).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SkipReason {
    /// The caller's token is not the one of the run's group.
    Token = 0,
    /// The center knows no such run (a deleted job, a cleared log).
    UnknownRun = 1,
    /// The result itself is invalid (a `handleCode` outside 32-bit integers).
    Invalid = 2,
}

impl SkipReason {
    const ALL: [SkipReason; 3] = [
        SkipReason::Token,
        SkipReason::UnknownRun,
        SkipReason::Invalid,
    ];

    fn label(self) -> &'static str {
        match self {
            SkipReason::Token => "token",
            SkipReason::UnknownRun => "unknown_run",
            SkipReason::Invalid => "invalid",
        }
    }
}

/// Gauges read at scrape time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gauges {
    /// Triggers running on the fast lane.
    pub fast_in_flight: usize,
    /// Triggers running on the slow lane.
    pub slow_in_flight: usize,
    /// Triggers waiting for a place on the fast lane.
    pub fast_waiting: usize,
    /// Triggers waiting for a place on the slow lane.
    pub slow_waiting: usize,
    /// Claimed fires not yet handed to a lane.
    pub backlog: usize,
    /// Fires the ring holds, waiting for their second.
    pub ring_waiting: usize,
    /// Distinct executor addresses with a live heartbeat.
    pub live_executors: usize,
    /// Batches of run rows, results and changes waiting for the run-row writer.
    pub writer_queued: usize,
    /// Trigger outcomes the writer holds for their results (written together).
    pub writer_held: usize,
}

impl Metrics {
    /// A scan pass recorded `fires` fires and skipped `misfired` under the misfire policy.
    pub fn scanned(&self, fires: usize, misfired: usize) {
        self.0
            .fires_recorded
            .fetch_add(fires as u64, Ordering::Relaxed);
        self.0
            .misfires
            .fetch_add(misfired as u64, Ordering::Relaxed);
    }

    /// One trigger was sent (`ok` = the executor accepted it); `lateness_ms` is nominal fire
    /// time → dispatch for scheduled fires, `dispatch_us` the executor call's duration.
    pub fn triggered(&self, ok: bool, lateness_ms: Option<i64>, dispatch_us: u64) {
        let c = if ok {
            &self.0.triggers_ok
        } else {
            &self.0.triggers_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
        if let Some(l) = lateness_ms {
            self.0.lateness.observe_us(l.max(0) as u64 * 1000);
        }
        self.0.dispatch.observe_us(dispatch_us);
    }

    /// A scan pass (lock, recovery, due-job read, fire records, schedule updates, commit) took
    /// `us` microseconds of wall time.
    pub fn scan_pass(&self, us: u64) {
        self.0.scan.observe_us(us);
        self.0.scan_max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Scan passes so far: (count, total µs, longest µs).
    pub fn scan_stats(&self) -> (u64, u64, u64) {
        let s = &self.0.scan;
        (
            s.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
            s.sum_us.load(Ordering::Relaxed),
            self.0.scan_max_us.load(Ordering::Relaxed),
        )
    }

    /// `n` run results arrived from executors.
    pub fn callbacks(&self, n: usize) {
        self.0.callbacks.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A callback's result was skipped (not written) for `why`.
    /// `n` callback results were skipped for `why`.
    pub(crate) fn results_skipped(&self, why: SkipReason, n: usize) {
        self.0.results_skipped[why as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` leases were renewed.
    pub(crate) fn leases_renewed(&self, n: usize) {
        self.0.lease_renewals.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts a workflow run started.
    pub(crate) fn workflow_started(&self) {
        self.0.workflow_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a workflow run ended.
    pub(crate) fn workflow_ended(&self, ok: bool) {
        self.0.workflow_ended[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts node-run results applied to workflow runs.
    pub(crate) fn workflow_transitions(&self, n: usize) {
        self.0
            .workflow_transitions
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts a look of the workflow actor for finished node runs.
    pub(crate) fn workflow_looked(&self) {
        self.0.workflow_looks.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the workflow actor looked for finished node runs.
    pub fn workflow_looks(&self) -> u64 {
        self.0.workflow_looks.load(Ordering::Relaxed)
    }

    /// Counts a look of the workflow actor for due scheduled workflows.
    pub(crate) fn workflow_schedule_looked(&self) {
        self.0
            .workflow_schedule_looks
            .fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the workflow actor looked for due scheduled workflows.
    pub fn workflow_schedule_looks(&self) -> u64 {
        self.0.workflow_schedule_looks.load(Ordering::Relaxed)
    }

    /// Counts what a round of settling fires in doubt decided.
    pub(crate) fn settled(&self, s: &crate::actors::settle::Settled) {
        for (i, n) in [s.received, s.resent, s.failed, s.dropped]
            .into_iter()
            .enumerate()
        {
            self.0.in_doubt[i].fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// `n` leases lapsed before their renewal (the node stalled or lost the database).
    pub(crate) fn leases_lost(&self, n: usize) {
        self.0.leases_lost.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// This node holds `n` buckets now.
    pub(crate) fn buckets_owned(&self, n: usize) {
        self.0.buckets_owned.store(n as u64, Ordering::Relaxed);
    }

    /// Run results received so far (callbacks and in-process results).
    pub fn callback_count(&self) -> u64 {
        self.0.callbacks.load(Ordering::Relaxed)
    }

    /// Workflow runs started, and ended (succeeded, failed), so far.
    pub fn workflow_counts(&self) -> (u64, u64, u64) {
        (
            self.0.workflow_runs.load(Ordering::Relaxed),
            self.0.workflow_ended[0].load(Ordering::Relaxed),
            self.0.workflow_ended[1].load(Ordering::Relaxed),
        )
    }

    /// Fires in doubt settled so far: received, resent, failed, dropped.
    pub fn in_doubt_counts(&self) -> [u64; 4] {
        self.0
            .in_doubt
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed))
    }

    /// Triggers sent so far (accepted, refused).
    pub fn trigger_counts(&self) -> (u64, u64) {
        (
            self.0.triggers_ok.load(Ordering::Relaxed),
            self.0.triggers_failed.load(Ordering::Relaxed),
        )
    }

    /// The Prometheus text exposition of everything, with `g` as the current gauges.
    pub fn render(&self, g: Gauges) -> String {
        let mut out = String::with_capacity(4096);
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        let i = &self.0;
        counter(
            &mut out,
            "xjob_fires_recorded_total",
            "Scheduled fires recorded by the scan.",
            i.fires_recorded.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "xjob_misfires_total",
            "Fires skipped by the misfire policy.",
            i.misfires.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP xjob_triggers_total Triggers sent to executors, by result.\n# TYPE xjob_triggers_total counter\nxjob_triggers_total{{result=\"success\"}} {}\nxjob_triggers_total{{result=\"failure\"}} {}",
            i.triggers_ok.load(Ordering::Relaxed),
            i.triggers_failed.load(Ordering::Relaxed)
        );
        counter(
            &mut out,
            "xjob_workflow_runs_total",
            "Workflow runs started.",
            i.workflow_runs.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP xjob_workflow_runs_ended_total Workflow runs ended, by result.\n# TYPE xjob_workflow_runs_ended_total counter\nxjob_workflow_runs_ended_total{{result=\"success\"}} {}\nxjob_workflow_runs_ended_total{{result=\"failure\"}} {}",
            i.workflow_ended[0].load(Ordering::Relaxed),
            i.workflow_ended[1].load(Ordering::Relaxed)
        );
        counter(
            &mut out,
            "xjob_workflow_node_results_total",
            "Results of workflow node runs applied to their runs.",
            i.workflow_transitions.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "xjob_workflow_result_looks_total",
            "Looks of the workflow actor for finished node runs (every 200 ms while runs move, once a second when idle).",
            i.workflow_looks.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "xjob_workflow_schedule_looks_total",
            "Looks of the workflow actor for due scheduled workflows (at the next fire it saw, and once a second).",
            i.workflow_schedule_looks.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "xjob_callbacks_total",
            "Run results received from executors.",
            i.callbacks.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP xjob_callback_results_skipped_total Results in callback batches not written, by reason (the rest of each batch was).\n# TYPE xjob_callback_results_skipped_total counter"
        );
        for why in SkipReason::ALL {
            let _ = writeln!(
                out,
                "xjob_callback_results_skipped_total{{reason=\"{}\"}} {}",
                why.label(),
                i.results_skipped[why as usize].load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP xjob_fires_in_doubt_total Fires in doubt (their node stopped while sending them) settled by asking their executors, by outcome.\n# TYPE xjob_fires_in_doubt_total counter"
        );
        for (k, outcome) in ["received", "resent", "failed", "dropped"]
            .into_iter()
            .enumerate()
        {
            let _ = writeln!(
                out,
                "xjob_fires_in_doubt_total{{outcome=\"{outcome}\"}} {}",
                i.in_doubt[k].load(Ordering::Relaxed)
            );
        }
        counter(
            &mut out,
            "xjob_lease_renewals_total",
            "Bucket leases renewed by this node (shared databases).",
            i.lease_renewals.load(Ordering::Relaxed),
        );
        counter(
            &mut out,
            "xjob_leases_lost_total",
            "Bucket leases that lapsed before this node renewed them.",
            i.leases_lost.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            out,
            "# HELP xjob_buckets_owned Buckets of jobs this node schedules (1024 in all; every one on a SQLite database).\n# TYPE xjob_buckets_owned gauge\nxjob_buckets_owned {}",
            i.buckets_owned.load(Ordering::Relaxed)
        );
        i.lateness.render(
            &mut out,
            "xjob_fire_lateness_seconds",
            "Nominal fire time to dispatch, scheduled fires.",
        );
        i.dispatch.render(
            &mut out,
            "xjob_dispatch_duration_seconds",
            "Duration of the call that hands a trigger to its executor.",
        );
        i.scan.render(
            &mut out,
            "xjob_scan_duration_seconds",
            "Wall time of one scan pass (schedule lock to commit).",
        );
        let _ = writeln!(
            out,
            "# HELP xjob_lane_in_flight Triggers running on each trigger lane.\n# TYPE xjob_lane_in_flight gauge\nxjob_lane_in_flight{{lane=\"fast\"}} {}\nxjob_lane_in_flight{{lane=\"slow\"}} {}",
            g.fast_in_flight, g.slow_in_flight
        );
        let _ = writeln!(
            out,
            "# HELP xjob_lane_waiting Triggers waiting for a place on each trigger lane (queue depth).\n# TYPE xjob_lane_waiting gauge\nxjob_lane_waiting{{lane=\"fast\"}} {}\nxjob_lane_waiting{{lane=\"slow\"}} {}",
            g.fast_waiting, g.slow_waiting
        );
        let _ = writeln!(
            out,
            "# HELP xjob_trigger_backlog Claimed fires not yet handed to a lane.\n# TYPE xjob_trigger_backlog gauge\nxjob_trigger_backlog {}",
            g.backlog
        );
        let _ = writeln!(
            out,
            "# HELP xjob_ring_waiting Fires waiting in the time ring.\n# TYPE xjob_ring_waiting gauge\nxjob_ring_waiting {}",
            g.ring_waiting
        );
        let _ = writeln!(
            out,
            "# HELP xjob_live_executors Executor addresses with a live heartbeat.\n# TYPE xjob_live_executors gauge\nxjob_live_executors {}",
            g.live_executors
        );
        let _ = writeln!(
            out,
            "# HELP xjob_writer_queued Batches waiting for the run-row writer (bounded; when full, results and outcomes wait for it).\n# TYPE xjob_writer_queued gauge\nxjob_writer_queued {}",
            g.writer_queued
        );
        let _ = writeln!(
            out,
            "# HELP xjob_writer_held Trigger outcomes the run-row writer holds for their results.\n# TYPE xjob_writer_held gauge\nxjob_writer_held {}",
            g.writer_held
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus histogram buckets are cumulative and end with +Inf equal to the count.
    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.triggered(true, Some(0), 50);
        m.triggered(false, Some(3), 2_000);
        m.triggered(true, Some(60_000), 10_000_000);
        let text = m.render(Gauges::default());
        assert!(text.contains("xjob_fire_lateness_seconds_bucket{le=\"0.001\"} 1"));
        assert!(text.contains("xjob_fire_lateness_seconds_bucket{le=\"0.005\"} 2"));
        assert!(text.contains("xjob_fire_lateness_seconds_bucket{le=\"10\"} 2"));
        assert!(text.contains("xjob_fire_lateness_seconds_bucket{le=\"+Inf\"} 3"));
        assert!(text.contains("xjob_fire_lateness_seconds_count 3"));
        assert!(text.contains("xjob_triggers_total{result=\"failure\"} 1"));
        assert!(text.contains("xjob_dispatch_duration_seconds_bucket{le=\"0.0001\"} 1"));
    }
}
