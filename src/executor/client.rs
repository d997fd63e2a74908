//! The `ExecutorClient` trait (admin → executor calls of spec §3) and the node client that
//! routes the node's own address in-process.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::model::wire::{LogParam, LogResult, ReturnT, TriggerParam};

/// How the center talks to an executor at an address. Every call answers a `ReturnT`; transport
/// failures are code 500 with the spec's texts, never a panic or an `Err`.
pub trait ExecutorClient: Send + Sync + 'static {
    /// `POST /run`: enqueue one trigger.
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT>;
    /// `POST /beat`: liveness.
    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT>;
    /// `POST /idleBeat`: is the job idle on that executor.
    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT>;
    /// `POST /kill`: stop the job's worker.
    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT>;
    /// `POST /log`: read a run log from a line on.
    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>>;
}

/// Normalises an address for comparison: a trailing slash is added as XXL-JOB does.
pub(crate) fn normalise(address: &str) -> String {
    let a = address.trim();
    if a.ends_with('/') {
        a.to_string()
    } else {
        format!("{a}/")
    }
}

/// A node's client: its own address goes to the in-process executor without HTTP; others go to
/// `remote`, or fail with XXL-JOB's remoting error text when there is none.
pub struct NodeClient {
    local_address: Option<String>,
    local: Option<Arc<dyn ExecutorClient>>,
    remote: Option<Arc<dyn ExecutorClient>>,
}

impl NodeClient {
    /// A client with an optional in-process executor at `local_address` and an optional remote
    /// client for every other address.
    pub fn new(
        local: Option<(String, Arc<dyn ExecutorClient>)>,
        remote: Option<Arc<dyn ExecutorClient>>,
    ) -> Self {
        let (local_address, local) = match local {
            Some((a, c)) => (Some(normalise(&a)), Some(c)),
            None => (None, None),
        };
        NodeClient {
            local_address,
            local,
            remote,
        }
    }

    fn pick(&self, address: &str) -> Result<&Arc<dyn ExecutorClient>, ReturnT> {
        if let (Some(a), Some(l)) = (&self.local_address, &self.local)
            && *a == normalise(address)
        {
            return Ok(l);
        }
        self.remote.as_ref().ok_or_else(|| {
            ReturnT::fail(format!(
                "xxl-job remoting error(no remote executor client is configured), for url : {address}"
            ))
        })
    }
}

impl ExecutorClient for NodeClient {
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        match self.pick(address) {
            Ok(c) => c.run(address, param),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT> {
        match self.pick(address) {
            Ok(c) => c.beat(address),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        match self.pick(address) {
            Ok(c) => c.idle_beat(address, job_id),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        match self.pick(address) {
            Ok(c) => c.kill(address, job_id),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        match self.pick(address) {
            Ok(c) => c.log(address, param),
            Err(e) => futures::future::ready(ReturnT {
                code: e.code,
                msg: e.msg,
                content: None,
            })
            .boxed(),
        }
    }
}
