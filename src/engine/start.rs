//! [`EngineBuilder::start`] as a list of steps: open the storage, build the executors and the
//! trigger path, load the registry, start the dispatch actors, adopt fires an earlier run
//! left, then the alarms, workflows, reports, scan and leases. Each step takes what the ones
//! before it made, so the order is the data flow.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use super::{Engine, EngineBuilder, hostname, supervised};
use crate::activity::Activity;
use crate::actors::complete::CompleteActor;
use crate::actors::fail_monitor::FailMonitor;
use crate::actors::lease::{LeaseActor, LeaseWiring};
use crate::actors::log_report::LogReport;
use crate::actors::registry::{Heartbeat, RegistryActor};
use crate::actors::ring::{PushRing, RingActor};
use crate::actors::scan::{Recovery, ScanActor, ScanWiring};
use crate::actors::settle::SettleActor;
use crate::actors::trigger_pool::{Backlog, TriggerPool, TriggerPoolWiring};
use crate::actors::workflow::{WorkflowActor, WorkflowWiring};
use crate::actors::workflow_starts::{LaneWiring, StartLane};
use crate::alarm::{Alarm, EmailAlarm, WebhookAlarm, WebhookPolicy};
use crate::clock::Clock;
use crate::config::Config;
use crate::directory::Directory;
use crate::error::Result;
use crate::executor::{
    ExecutorClient, HandlerRegistry, HttpExecutorClient, InProcessExecutor, NodeClient,
    RuntimeConfig,
};
use crate::lost_runs::LocalRuns;
use crate::metrics::Metrics;
use crate::ownership::Ownership;
use crate::store::scan::ScanStore;
use crate::store::workflow_runs::Runs;
use crate::store::writer::{LogWriter, Target};
use crate::store::{self, logs};
use crate::trigger::Trigger;

/// What every later step shares: the configuration, the clock, the database and the node's
/// common handles.
struct Base {
    cfg: Config,
    clock: Clock,
    db: DatabaseConnection,
    node_id: String,
    single_node: bool,
    activity: Activity,
    metrics: Metrics,
    directory: Directory,
    writer: LogWriter,
    scan_store: ScanStore,
    ownership: Ownership,
    /// The completion actor's address, which exists before the actor: the executor sends it
    /// results and the writer finished runs, and the actor starts child jobs on the trigger
    /// pool, which dispatches through that executor ([`dispatch`] starts it).
    complete: Addr<CompleteActor>,
}

/// The trigger path and the in-process executor.
struct Executors {
    trigger: Arc<Trigger>,
    local_address: Option<String>,
    local_executor: Option<Arc<dyn ExecutorClient>>,
    in_process: Option<InProcessExecutor>,
    local_runs: Option<LocalRuns>,
    /// The node's HTTP client for its own calls (webhook alarms, httpJobHandler).
    http: HttpExecutorClient,
}

/// The actors between the ring and the executors.
struct Dispatch {
    pool: Addr<TriggerPool>,
    complete: Addr<CompleteActor>,
    ring: Addr<RingActor>,
    settle: Addr<SettleActor>,
    backlog: Backlog,
}

pub(super) async fn run(b: EngineBuilder) -> Result<Engine> {
    let EngineBuilder {
        config,
        clock,
        db,
        handlers,
        remote,
        http,
        log_dir,
        alarms: extra_alarms,
    } = b;
    let complete_ctx = Context::<CompleteActor>::new();
    let connected_itself = db.is_none();
    let base = open(config, clock, db, complete_ctx.address()).await?;
    let mut exec = executors(&base, handlers, remote, http, log_dir).await?;
    let registry = registry(&base, exec.local_address.as_deref()).await?;
    let dispatch = dispatch(&base, complete_ctx, &exec.trigger, exec.local_runs.take());
    let now = base.clock.now_ms();
    adopt(&base, now, &dispatch.ring).await?;
    let alarms = alarms(&base.cfg, extra_alarms, exec.http.clone())?;
    let fail_monitor = supervised(FailMonitor::new(
        base.db.clone(),
        base.clock.clone(),
        dispatch.pool.clone().recipient(),
        alarms.clone(),
        base.activity.clone(),
    ));
    let runs = Runs::new(&base.writer);
    let (workflows, dispatching) = workflows(&base, &runs, &dispatch, alarms);
    let start_lane =
        StartLane::wanted(&base.cfg.database, &base.clock, connected_itself).then(|| {
            StartLane::new(LaneWiring {
                database: base.cfg.database.clone(),
                runs: runs.clone(),
                clock: base.clock.clone(),
                activity: base.activity.clone(),
                workflows: workflows.clone(),
                dispatching,
            })
        });
    let log_report = supervised(LogReport::new(
        base.db.clone(),
        base.clock.clone(),
        base.cfg.time_zone(),
        base.cfg.log_retention_days,
        base.activity.clone(),
    ));
    let scan = scan(&base, now, &dispatch);
    let leases = leases(&base, exec.local_address.as_deref(), &scan);
    tracing::info!(bind = %base.cfg.http.bind, local_executor = ?exec.local_address,
        single_node = base.single_node, node = %base.node_id, "scheduling center started");
    let sec = &base.cfg.security;
    let token_failures = Arc::new(crate::console::auth::LoginLimiter::new(
        sec.login_max_failures_per_client.max(1),
        sec.login_max_failures_per_client.max(1),
        sec.login_window_secs.max(1) as i64 * 1000,
    ));
    Ok(Engine {
        cluster_node: cluster_node(&base),
        token_failures,
        settle: dispatch.settle,
        config: Arc::new(base.cfg),
        clock: base.clock,
        db: base.db,
        scan,
        ring: dispatch.ring,
        pool: dispatch.pool,
        complete: dispatch.complete,
        registry,
        trigger: exec.trigger,
        local_address: exec.local_address,
        local_executor: exec.local_executor,
        in_process: exec.in_process,
        _fail_monitor: fail_monitor,
        log_report,
        activity: base.activity,
        metrics: base.metrics,
        directory: base.directory,
        writer: base.writer,
        scan_store: base.scan_store,
        leases,
        workflows,
        start_lane,
        runs,
    })
}

/// Validates the configuration, connects, migrates, verifies the lock row, locks a SQLite file
/// for this node (a second node on it refuses to start), starts the run-row writer and the
/// scan's store (which knows the buckets this node schedules: every one on SQLite, those it
/// holds leases on with a shared database).
async fn open(
    cfg: Config,
    clock: Option<Clock>,
    db: Option<DatabaseConnection>,
    complete: Addr<CompleteActor>,
) -> Result<Base> {
    cfg.validate()?;
    let clock = clock.unwrap_or_else(Clock::system);
    let db = match db {
        Some(db) => db,
        None => store::connect(&cfg.database).await?,
    };
    store::migrate(&db).await?;
    store::verify_lock_row(&db).await?;
    let target = Target::of(&db)
        .await?
        .separate_cpus(cfg.database.separate_writer_cpu);
    let single_node = target.single_node();
    let activity = Activity::default();
    let directory = Directory::default();
    directory.load_groups(&db).await?;
    let writer = {
        let me = complete.clone();
        LogWriter::start(target, activity.clone(), Box::new(move |f| me.do_send(f))).await?
    };
    let scan_store = ScanStore::new(db.clone(), &writer);
    let ownership = scan_store.ownership();
    Ok(Base {
        node_id: format!("{}-{}", hostname(), crate::token::random_hex(6)),
        cfg,
        clock,
        db,
        single_node,
        activity,
        metrics: Metrics::default(),
        directory,
        writer,
        scan_store,
        ownership,
        complete,
    })
}

/// The in-process executor's address: `executor.address`, else this node's bind address;
/// `None` without an `executor.app_name`.
fn local_address(cfg: &Config) -> Option<String> {
    let app = cfg.executor.app_name.trim();
    (!app.is_empty()).then(|| {
        let a = cfg.executor.address.trim();
        if a.is_empty() {
            format!("http://{}/", cfg.http.bind)
        } else {
            a.to_string()
        }
    })
}

/// The in-process executor (with the built-in handlers) when the node has an app name, the
/// client that reaches it and the remote executors, and the trigger path on top.
async fn executors(
    base: &Base,
    mut handlers: HandlerRegistry,
    remote: Option<Arc<dyn ExecutorClient>>,
    http: Option<HttpExecutorClient>,
    log_dir: Option<PathBuf>,
) -> Result<Executors> {
    let cfg = &base.cfg;
    let app = cfg.executor.app_name.trim().to_string();
    let local_address = local_address(cfg);
    let http = match http {
        Some(c) => c,
        None => HttpExecutorClient::with_ca_file(
            None,
            Duration::from_secs(cfg.http.client_timeout_secs),
            &cfg.http.client_ca_file,
        )?,
    };
    if local_address.is_some() {
        crate::executor::builtin::register(&mut handlers, &cfg.executor, http.clone())?;
    }
    // With the SQLite writer on a CPU of its own, the in-process executor (its job threads,
    // handler starts and results) runs on a thread kept on that CPU, ahead of the writer:
    // a second's burst of fires is routed on this thread while the other starts the
    // handlers, instead of both on this one (10,000 fires/s: p99 lateness 37–41 → 25–29
    // ms; BENCHMARKS.md, 2026-11-26, d98c68c). Only with the system clock (a test's paused
    // clock belongs to this thread's runtime).
    let executor_thread = match base.writer.writer_cpu() {
        Some(cpu) if base.clock.is_system() && local_address.is_some() => {
            // the System keeps the arbiter's handle: it runs until the System stops
            let thread = actix::Arbiter::new();
            thread.spawn_fn(move || crate::cpu::pin(cpu));
            base.writer.exec(|_| crate::cpu::yield_cpu()).await?;
            Some(thread)
        }
        _ => None,
    };
    let local = local_address.as_ref().map(|addr| {
        let exec = InProcessExecutor::start(
            handlers,
            base.complete.clone().recipient(),
            base.clock.clone(),
            RuntimeConfig {
                queue_capacity: cfg.executor.queue_capacity.max(1),
                scripts_enabled: cfg.executor.scripts_enabled,
                log_dir,
                activity: Some(base.activity.clone()),
                ..RuntimeConfig::default()
            },
            executor_thread.as_ref().map(|t| t.handle()).as_ref(),
        );
        (addr.clone(), exec)
    });
    let in_process = local.as_ref().map(|(_, e)| e.clone());
    // the completion actor closes runs whose result this node's own executor lost
    let local_runs = local.as_ref().map(|(a, e)| LocalRuns::new(a, e.clone()));
    let local = local.map(|(a, e)| (a, app, Arc::new(e) as Arc<dyn ExecutorClient>));
    let local_executor = local.as_ref().map(|(_, _, e)| e.clone());
    let client: Arc<dyn ExecutorClient> =
        Arc::new(NodeClient::new(local, remote, Some(base.directory.clone())));
    let trigger = Arc::new(
        Trigger::new(
            base.db.clone(),
            base.clock.clone(),
            client,
            cfg.http.bind.clone(),
            base.metrics.clone(),
            base.writer.clone(),
        )
        .with_node(cluster_node(base)),
    );
    Ok(Executors {
        trigger,
        local_address,
        local_executor,
        in_process,
        local_runs,
        http,
    })
}

/// This node's id when it is one of a cluster (leases on a shared database), else `None`.
fn cluster_node(base: &Base) -> Option<String> {
    base.ownership.is_leased().then(|| base.node_id.clone())
}

/// Registers the in-process executor, loads the live address lists, and starts the registry
/// actor (heartbeats, evictions).
async fn registry(base: &Base, local_address: Option<&str>) -> Result<Addr<RegistryActor>> {
    let heartbeat = local_address.map(|a| Heartbeat {
        app_name: base.cfg.executor.app_name.trim().to_string(),
        address: a.to_string(),
    });
    RegistryActor::refresh(
        &base.db,
        &base.clock,
        &base.directory,
        base.cfg.registry.dead_secs,
        heartbeat.as_ref(),
    )
    .await?;
    base.directory.load_groups(&base.db).await?;
    Ok(supervised(RegistryActor::new(
        base.db.clone(),
        base.clock.clone(),
        base.cfg.registry.clone(),
        heartbeat,
        base.activity.clone(),
        base.directory.clone(),
    )))
}

/// The trigger pool, the completion actor (child jobs), the ring, and the actor that settles
/// fires in doubt (a node stopped while sending them) by asking their executors.
fn dispatch(
    base: &Base,
    complete_ctx: Context<CompleteActor>,
    trigger: &Arc<Trigger>,
    local_runs: Option<LocalRuns>,
) -> Dispatch {
    let backlog = Backlog::default();
    let pool = supervised(TriggerPool::new(TriggerPoolWiring {
        db: base.db.clone(),
        trigger: trigger.clone(),
        clock: base.clock.clone(),
        cfg: base.cfg.trigger_pool.clone(),
        activity: base.activity.clone(),
        directory: base.directory.clone(),
        ownership: base.ownership.clone(),
        node: base.node_id.clone(),
        backlog: backlog.clone(),
    }));
    // (not under a Supervisor, which builds its actor's context itself: this one's address
    // had to exist before the pool; the actor never stops itself)
    let complete = complete_ctx.run(
        CompleteActor::new(
            base.db.clone(),
            base.clock.clone(),
            base.activity.clone(),
            base.cfg.scheduler.max_chain_depth,
            base.metrics.clone(),
            base.writer.clone(),
            pool.clone().recipient(),
        )
        .with_local(local_runs),
    );
    let ring = supervised(RingActor::new(base.clock.clone(), pool.clone().recipient()));
    let settle = supervised(SettleActor::new(
        trigger.clone(),
        base.directory.clone(),
        pool.clone(),
        (
            base.cfg.scheduler.claim_timeout_ms,
            base.cfg.scheduler.misfire_threshold_ms,
        ),
        base.activity.clone(),
    ));
    Dispatch {
        pool,
        complete,
        ring,
        settle,
        backlog,
    }
}

/// Fires recorded by an earlier run (of this or another node) that are not yet overdue go back
/// into the ring; on a shared database the claim at dispatch makes sure each runs once whoever
/// else holds it (a locked SQLite file has no one else). Overdue ones are the scan's to
/// recover, under the misfire policy (on SQLite only in its first pass, and only those older
/// than the adopted ones). With leases, a bucket's pending fires are taken over by whichever
/// node takes the bucket instead.
async fn adopt(base: &Base, now: i64, ring: &Addr<RingActor>) -> Result<()> {
    if base.ownership.is_leased() {
        return Ok(());
    }
    let s = &base.cfg.scheduler;
    let adopted =
        logs::pending_between(&base.db, now - s.recover_after_ms, now + s.pre_read_ms).await?;
    if !adopted.is_empty() {
        tracing::info!(
            fires = adopted.len(),
            "adopted fires left pending by an earlier run"
        );
        ring.do_send(PushRing(adopted));
    }
    Ok(())
}

/// The builder's alarms, then e-mail (when an SMTP host is set) and the webhook.
fn alarms(
    cfg: &Config,
    mut alarms: Vec<Box<dyn Alarm>>,
    http: HttpExecutorClient,
) -> Result<Arc<Vec<Box<dyn Alarm>>>> {
    if !cfg.alarm.smtp.host.trim().is_empty() {
        alarms.push(Box::new(EmailAlarm::new(&cfg.alarm.smtp)?));
    }
    alarms.push(Box::new(
        WebhookAlarm::new(http, Some(cfg.alarm.webhook_url.clone()))
            .with_policy(WebhookPolicy::of(&cfg.alarm)?),
    ));
    Ok(Arc::new(alarms))
}

/// The workflow actor (starts, moves and recovers workflow runs), and its dispatch permits.
fn workflows(
    base: &Base,
    runs: &Runs,
    dispatch: &Dispatch,
    alarms: Arc<Vec<Box<dyn Alarm>>>,
) -> (Addr<WorkflowActor>, Arc<tokio::sync::Semaphore>) {
    let s = &base.cfg.scheduler;
    let actor = WorkflowActor::new(WorkflowWiring {
        db: base.db.clone(),
        runs: runs.clone(),
        pool: dispatch.pool.clone(),
        clock: base.clock.clone(),
        activity: base.activity.clone(),
        metrics: base.metrics.clone(),
        alarms,
        recovery: crate::actors::workflow::Recovery {
            single_node: base.single_node,
            recover_after_ms: s.recover_after_ms,
            misfire_ms: s.misfire_threshold_ms,
            time_zone: base.cfg.time_zone(),
        },
    });
    let dispatching = actor.dispatching();
    (supervised(actor), dispatching)
}

/// The scan. On one node what an earlier run left is recovered by its first pass only (later
/// fires were adopted into the ring); with leases, by takeover.
fn scan(base: &Base, now: i64, dispatch: &Dispatch) -> Addr<ScanActor> {
    supervised(ScanActor::new(ScanWiring {
        store: base.scan_store.clone(),
        clock: base.clock.clone(),
        cfg: base.cfg.scheduler.clone(),
        pre_read_count: base.cfg.pre_read_count(),
        ring: dispatch.ring.clone().recipient(),
        activity: base.activity.clone(),
        metrics: base.metrics.clone(),
        directory: base.directory.clone(),
        recovery: Recovery::FirstPass {
            before: now - base.cfg.scheduler.recover_after_ms,
        },
        backlog: dispatch.backlog.clone(),
        ownership: base.ownership.clone(),
        node: base.node_id.clone(),
    }))
}

/// The lease keeper on a shared database (it wakes the scan when it takes buckets); on one
/// node every bucket is this node's.
fn leases(
    base: &Base,
    local_address: Option<&str>,
    scan: &Addr<ScanActor>,
) -> Option<Addr<LeaseActor>> {
    if !base.ownership.is_leased() {
        base.metrics
            .buckets_owned(crate::store::leases::BUCKETS as usize);
        return None;
    }
    let address = local_address
        .map(str::to_string)
        .unwrap_or_else(|| format!("http://{}/", base.cfg.http.bind));
    Some(
        LeaseActor::new(LeaseWiring {
            db: base.db.clone(),
            node: base.node_id.clone(),
            address,
            ownership: base.ownership.clone(),
            clock: base.clock.clone(),
            pre_read_ms: base.cfg.scheduler.pre_read_ms,
            metrics: base.metrics.clone(),
            activity: base.activity.clone(),
        })
        .wake(scan.clone())
        .start(),
    )
}
