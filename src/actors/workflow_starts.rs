//! The start lane: workflow runs started from outside the engine (`Engine::trigger_workflow`:
//! the REST API, the console, a program embedding the engine) on a database server are
//! recorded and answered on a thread of their own, with a connection pool of its own (both
//! start with the first start: an engine that starts no workflow holds neither).
//!
//! Why: everything else the engine does (dispatching, the in-process executor, the results'
//! writer, the workflow passes) runs on the engine's thread, and a pooled connection's socket is
//! read by the runtime that opened it. A start's statement sent from there waits for that
//! thread twice, once to go out and once for its answer to be read, and with runs moving it
//! is rarely free: with one caller on PostgreSQL (`wfbench --shape many`), a start's statement
//! took 0.75–0.79 ms on average from the engine's thread and 0.53–0.60 ms from a thread of its
//! own (BENCHMARKS.md, 2026-12-04). The lane keeps what the workflow actor's starts promise:
//! starts asked while a batch is being recorded are recorded together (at most
//! [`MAX_STARTS`]), each is answered once its batch committed, and the next batch waits while
//! [`DISPATCHES`](super::workflow) batches of started runs are being sent; the workflow actor
//! counts and sends them ([`Started`]).
//!
//! Only on PostgreSQL and MySQL/MariaDB with the system clock and a database the engine
//! connected to itself (a pool handed to the builder, or an in-memory SQLite database, cannot
//! be opened twice; a SQLite file's writes go through its writer thread anyway).

use std::sync::Arc;

use actix::Addr;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::activity::{Activity, ActivityGuard};
use crate::actors::workflow::{MAX_STARTS, Started, WorkflowActor, answer_starts};
use crate::clock::Clock;
use crate::config::DatabaseConfig;
use crate::error::{Error, Result};
use crate::store::workflow_runs::{Runs, StartOne};

/// Starts waiting for the lane beyond this make their callers wait.
const QUEUE: usize = 4 * MAX_STARTS;

/// The lane's connections: one batch is recorded at a time.
const CONNECTIONS: u32 = 2;

/// A start asked of the lane.
struct Asked {
    one: StartOne,
    answer: oneshot::Sender<Result<i64>>,
    _activity: ActivityGuard,
}

/// A handle to the start lane; the lane's thread ends when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct StartLane(Arc<Lane>);

struct Lane {
    wiring: LaneWiring,
    /// The lane's queue, once its thread runs (it starts with the first start).
    tx: parking_lot::Mutex<Option<mpsc::Sender<Asked>>>,
}

/// What the lane's thread runs with.
#[derive(Clone)]
pub(crate) struct LaneWiring {
    pub(crate) database: DatabaseConfig,
    pub(crate) runs: Runs,
    pub(crate) clock: Clock,
    pub(crate) activity: Activity,
    pub(crate) workflows: Addr<WorkflowActor>,
    /// The workflow actor's dispatch permits ([`WorkflowActor::dispatching`]).
    pub(crate) dispatching: Arc<Semaphore>,
}

impl StartLane {
    /// Whether a lane serves an engine on `database` with `clock`, having connected itself.
    pub(crate) fn wanted(database: &DatabaseConfig, clock: &Clock, connected_itself: bool) -> bool {
        let server = ["postgres:", "postgresql:", "mysql:", "mariadb:"]
            .iter()
            .any(|p| database.url.starts_with(p));
        server && clock.is_system() && connected_itself
    }

    /// A lane whose thread and pool start with its first start (an engine that starts no
    /// workflow holds neither).
    pub(crate) fn new(wiring: LaneWiring) -> StartLane {
        StartLane(Arc::new(Lane {
            wiring,
            tx: parking_lot::Mutex::new(None),
        }))
    }

    /// The lane's queue, its thread started if it was not.
    fn queue(&self) -> Result<mpsc::Sender<Asked>> {
        let mut tx = self.0.tx.lock();
        if let Some(tx) = &*tx {
            return Ok(tx.clone());
        }
        let (sender, rx) = mpsc::channel(QUEUE);
        let w = self.0.wiring.clone();
        std::thread::Builder::new()
            .name("xjob-workflow-starts".into())
            .spawn(move || lane(w, rx))
            .map_err(|e| Error::Config(format!("cannot start the workflow start lane: {e}")))?;
        *tx = Some(sender.clone());
        Ok(sender)
    }

    /// Records a start; answers the run's id once committed (its node runs are sent after).
    pub(crate) async fn start_run(&self, one: StartOne) -> Result<i64> {
        let (answer, rx) = oneshot::channel();
        let asked = Asked {
            one,
            answer,
            _activity: self.0.wiring.activity.enter(),
        };
        self.queue()?
            .send(asked)
            .await
            .map_err(|_| Error::Stopped("the workflow start lane"))?;
        rx.await
            .map_err(|_| Error::Stopped("the workflow start lane"))?
    }
}

/// The lane's thread: a runtime of its own, its pool opened on it. Were the runtime not to
/// build, the queue's starts are answered `Stopped` as they are dropped.
fn lane(w: LaneWiring, rx: mpsc::Receiver<Asked>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "the workflow start lane's runtime cannot start");
            return;
        }
    };
    rt.block_on(async move {
        if let Some(db) = record(&w, rx).await {
            let _ = db.close().await;
        }
    });
}

/// Records batches of starts until every handle is gone; answers the pool it opened.
async fn record(
    w: &LaneWiring,
    mut rx: mpsc::Receiver<Asked>,
) -> Option<sea_orm::DatabaseConnection> {
    let mut pool: Option<sea_orm::DatabaseConnection> = None;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_STARTS {
            match rx.try_recv() {
                Ok(a) => batch.push(a),
                Err(_) => break,
            }
        }
        let guard = w.activity.enter();
        let mut starts = Vec::with_capacity(batch.len());
        let mut answers = Vec::with_capacity(batch.len());
        for a in batch {
            starts.push(a.one);
            answers.push(a.answer);
        }
        if pool.is_none() {
            let mut database = w.database.clone();
            database.max_connections = CONNECTIONS;
            match crate::store::connect(&database).await {
                Ok(db) => pool = Some(db),
                Err(e) => {
                    // nothing recorded; the next batch tries again
                    let why = format!("the workflow start lane cannot connect: {e}");
                    for answer in answers {
                        let _ = answer.send(Err(Error::Db(sea_orm::DbErr::Custom(why.clone()))));
                    }
                    continue;
                }
            }
        }
        let Some(db) = &pool else { continue };
        let recorded = w.runs.start_many(db, starts, w.clock.now_ms()).await;
        let Some(ch) = answer_starts(recorded, answers) else {
            continue;
        };
        // the next batch waits while as many batches as the actor allows are sent (as the
        // actor's own starts do, only a batch with node runs to send takes a permit)
        let permit = match ch.dispatch.is_empty() {
            true => None,
            false => match w.dispatching.clone().acquire_owned().await {
                Ok(p) => Some(p),
                Err(_) => continue,
            },
        };
        w.workflows.do_send(Started {
            ch,
            permit,
            activity: guard,
        });
    }
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane only for a database server the engine connected to itself, with the system
    /// clock: a SQLite database (file or in memory), a pool handed to the builder or a test's
    /// clock keeps the workflow actor's starts.
    #[tokio::test]
    async fn a_lane_serves_only_a_server_the_engine_connected_to_with_the_system_clock() {
        let at = |url: &str| DatabaseConfig {
            url: url.into(),
            ..DatabaseConfig::default()
        };
        let system = Clock::system();
        for url in [
            "postgres://u@h/db",
            "postgresql://u@h/db",
            "mysql://u@h/db",
            "mariadb://u@h/db",
        ] {
            assert!(StartLane::wanted(&at(url), &system, true), "{url}");
            assert!(!StartLane::wanted(&at(url), &system, false), "{url}");
        }
        for url in ["sqlite://x.db?mode=rwc", "sqlite::memory:"] {
            assert!(!StartLane::wanted(&at(url), &system, true), "{url}");
        }
        let paused = Clock::tokio_at(1_700_000_000_000);
        assert!(!StartLane::wanted(&at("postgres://u@h/db"), &paused, true));
    }
}
