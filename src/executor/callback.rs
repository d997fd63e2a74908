//! CallbackActor: delivers a standalone executor's results to the admin (protocol.md §6.6).
//!
//! Receives [`Callback`] from the job threads and sends what has accumulated as one JSON array
//! to the admin addresses in order; the first to answer code 200 takes the batch. One batch is
//! in flight at a time; results arriving meanwhile wait in the queue and all go in the next
//! batch (one request for everything queued, as XXL-JOB drains its whole queue). A batch no
//! admin took is written to the spool directory (one JSON file per batch, written atomically)
//! and retried every retry period, also right after a restart, so results survive an admin
//! outage and an executor restart. [`FlushCallbacks`] drains everything (sent or spooled) on
//! shutdown.

use std::path::{Path, PathBuf};
use std::time::Duration;

use actix::prelude::*;

use super::Callback;
use super::HttpExecutorClient;
use crate::clock::Clock;
use crate::model::wire::HandleCallbackParam;

/// Sends or spools everything queued, then stops the sender (shutdown); answers once done.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct FlushCallbacks;

/// Retries the spool now; answers how many batches were delivered.
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct RetrySpool;

/// The callback sender.
pub struct CallbackActor {
    admins: Vec<String>,
    client: HttpExecutorClient,
    spool: PathBuf,
    retry_every: Duration,
    /// Names spool files.
    clock: Clock,
    queue: Vec<HandleCallbackParam>,
    /// A batch is being delivered (or spooled).
    sending: bool,
    /// [`FlushCallbacks`] arrived: stop once the queue is empty.
    stopping: bool,
    /// [`FlushCallbacks`] callers, answered once everything was sent or spooled.
    flushed: Vec<tokio::sync::oneshot::Sender<()>>,
    /// How often each spooled batch was refused by an admin that answered.
    refusals: std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<PathBuf, u32>>>,
    /// The admin node that sent each run, when known: its result goes there first.
    routes: Option<super::AdminRoutes>,
}

/// What became of a batch sent to the admins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    /// An admin took it (code 200).
    Taken,
    /// An admin answered and refused it (a code other than 200: a wrong token, a batch it
    /// cannot parse): sending it again may never work, so it must not hold up other batches.
    Refused,
    /// No admin answered (down, unreachable, an HTTP error status): try again later, in order.
    Unreachable,
}

/// Tries the admins in order until one takes the batch.
async fn deliver(
    client: &HttpExecutorClient,
    admins: &[String],
    batch: &[HandleCallbackParam],
) -> Delivery {
    let mut outcome = Delivery::Unreachable;
    for a in admins {
        let r = client.callback(a, batch.to_vec()).await;
        if r.is_success() {
            return Delivery::Taken;
        }
        // the client's own failure texts (no answer, a status other than 200) begin so
        let transport = r
            .msg
            .as_deref()
            .is_some_and(|m| m.starts_with("xxl-job remoting"));
        if !transport {
            outcome = Delivery::Refused;
        }
        tracing::warn!(admin = %a, code = r.code, msg = ?r.msg, "callback not accepted");
    }
    outcome
}

/// Writes a batch to the spool atomically (write then rename).
fn spool(dir: &Path, batch: &[HandleCallbackParam], now_ms: i64) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name = format!(
        "xjob-callback-{}-{:08x}.json",
        now_ms,
        rand::random::<u32>()
    );
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(batch).unwrap_or_default())?;
    let path = dir.join(name);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Times a spooled batch may be refused by an admin that answers before it is set aside (as
/// `*.refused`, with an error in the log): every retry period, a day at the default 30 s.
const MAX_REFUSALS: u32 = 2_880;

/// Re-sends every spooled batch, oldest first. When no admin answers it stops (the rest waits
/// for the next period, in order); a batch an admin refuses is kept for the next period and
/// the later batches are sent all the same, so one batch no admin takes never holds up the
/// others. A batch refused [`MAX_REFUSALS`] times is set aside. `refusals` counts per file.
async fn retry(
    client: HttpExecutorClient,
    admins: Vec<String>,
    dir: PathBuf,
    refusals: std::sync::Arc<parking_lot::Mutex<std::collections::HashMap<PathBuf, u32>>>,
) -> usize {
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return 0;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut delivered = 0;
    for f in files {
        // claim the file first: of two senders on one spool, only one gets it
        let sending = f.with_extension("sending");
        if std::fs::rename(&f, &sending).is_err() {
            continue;
        }
        let batch: Vec<HandleCallbackParam> = match std::fs::read(&sending)
            .map(|b| serde_json::from_slice(&b))
        {
            Ok(Ok(b)) => b,
            _ => {
                tracing::error!(file = %f.display(), "unreadable callback spool file set aside");
                let _ = std::fs::rename(&sending, f.with_extension("unreadable"));
                continue;
            }
        };
        let outcome = if batch.is_empty() {
            Delivery::Taken
        } else {
            deliver(&client, &admins, &batch).await
        };
        match outcome {
            Delivery::Taken => {
                let _ = std::fs::remove_file(&sending);
                refusals.lock().remove(&f);
                delivered += 1;
            }
            Delivery::Refused => {
                let n = {
                    let mut r = refusals.lock();
                    let n = r.entry(f.clone()).or_default();
                    *n += 1;
                    *n
                };
                if n >= MAX_REFUSALS {
                    tracing::error!(
                        file = %f.display(),
                        results = batch.len(),
                        refusals = n,
                        "callback batch refused by every admin too often; set aside as .refused"
                    );
                    let _ = std::fs::rename(&sending, f.with_extension("refused"));
                    refusals.lock().remove(&f);
                } else {
                    let _ = std::fs::rename(&sending, &f);
                }
            }
            Delivery::Unreachable => {
                let _ = std::fs::rename(&sending, &f);
                break;
            }
        }
    }
    if delivered > 0 {
        tracing::info!(delivered, "spooled callbacks delivered");
    }
    delivered
}

impl CallbackActor {
    /// A sender to `admins` (base URLs), spooling to `spool`, retrying every `retry_every`.
    pub fn new(
        admins: Vec<String>,
        client: HttpExecutorClient,
        spool: PathBuf,
        retry_every: Duration,
        clock: Clock,
    ) -> Self {
        CallbackActor {
            admins,
            client,
            spool,
            retry_every,
            clock,
            queue: Vec::new(),
            sending: false,
            stopping: false,
            flushed: Vec::new(),
            refusals: Default::default(),
            routes: None,
        }
    }

    /// Sends each result first to the admin node that sent its run ([`super::AdminRoutes`]).
    pub(crate) fn with_routes(mut self, routes: super::AdminRoutes) -> Self {
        self.routes = Some(routes);
        self
    }

    /// `batch` split by the admin each result goes to first, each part with the admins in the
    /// order to try them (one part, in the configured order, without routes).
    fn by_admin(
        &self,
        batch: Vec<HandleCallbackParam>,
    ) -> Vec<(Vec<String>, Vec<HandleCallbackParam>)> {
        let Some(routes) = &self.routes else {
            return vec![(self.admins.clone(), batch)];
        };
        let mut parts: Vec<(Option<String>, Vec<HandleCallbackParam>)> = Vec::new();
        for item in batch {
            let first = routes.take(item.log_id);
            match parts.iter_mut().find(|(f, _)| *f == first) {
                Some((_, items)) => items.push(item),
                None => parts.push((first, vec![item])),
            }
        }
        parts
            .into_iter()
            .map(|(first, items)| {
                (
                    super::AdminRoutes::ordered(&self.admins, first.as_deref()),
                    items,
                )
            })
            .collect()
    }

    /// Sends everything queued as one batch unless a batch is in flight (then the queue goes
    /// when it is done); stops after the last batch once flushing.
    fn send_batch(&mut self, ctx: &mut Context<Self>) {
        if self.sending {
            return;
        }
        if self.queue.is_empty() {
            if self.stopping {
                for w in self.flushed.drain(..) {
                    let _ = w.send(());
                }
                ctx.stop();
            }
            return;
        }
        self.sending = true;
        let batch = std::mem::take(&mut self.queue);
        let (client, dir) = (self.client.clone(), self.spool.clone());
        let clock = self.clock.clone();
        let parts = self.by_admin(batch);
        // one batch at a time, in order; the mailbox keeps filling the queue meanwhile
        ctx.spawn(
            async move {
                for (admins, batch) in parts {
                    if deliver(&client, &admins, &batch).await != Delivery::Taken {
                        match spool(&dir, &batch, clock.now_ms()) {
                            Ok(p) => tracing::warn!(file = %p.display(), results = batch.len(), "callbacks spooled for retry"),
                            Err(e) => tracing::error!(error = %e, "cannot spool callbacks; results lost"),
                        }
                    }
                }
            }
            .into_actor(self)
            .map(|_, act, ctx| {
                act.sending = false;
                act.send_batch(ctx);
            }),
        );
    }
}

impl Actor for CallbackActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // a batch being sent when the previous process died goes back into the spool
        if let Ok(entries) = std::fs::read_dir(&self.spool) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "sending") {
                    let _ = std::fs::rename(&p, p.with_extension("json"));
                }
            }
        }
        let tick = |a: &mut Self, ctx: &mut Context<Self>| {
            let f = retry(
                a.client.clone(),
                a.admins.clone(),
                a.spool.clone(),
                a.refusals.clone(),
            );
            ctx.wait(f.into_actor(a).map(|_, _, _| ()));
        };
        tick(self, ctx);
        ctx.run_interval(self.retry_every, tick);
    }
}

impl Handler<Callback> for CallbackActor {
    type Result = ();

    fn handle(&mut self, msg: Callback, ctx: &mut Self::Context) {
        self.queue.extend(msg.0);
        self.send_batch(ctx);
    }
}

impl Handler<FlushCallbacks> for CallbackActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: FlushCallbacks, ctx: &mut Self::Context) -> Self::Result {
        // sends what is queued after the batch in flight, then stops
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.flushed.push(tx);
        self.stopping = true;
        self.send_batch(ctx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<RetrySpool> for CallbackActor {
    type Result = ResponseActFuture<Self, usize>;

    fn handle(&mut self, _: RetrySpool, _ctx: &mut Self::Context) -> Self::Result {
        Box::pin(
            retry(
                self.client.clone(),
                self.admins.clone(),
                self.spool.clone(),
                self.refusals.clone(),
            )
            .into_actor(self),
        )
    }
}
