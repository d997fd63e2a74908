//! The `ExecutorClient` trait (admin → executor calls of protocol.md §2) and the node client that
//! routes the node's own address in-process.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, FuturesUnordered};
use futures::{FutureExt, StreamExt};

use crate::directory::AddressToken;
use crate::model::wire::{HandleCallbackParam, LogParam, LogResult, ReturnT, TriggerParam};

/// Results of runs (executor → center, `/api/callback`, protocol.md §3.3), as a message: what the job
/// threads send to the standalone executor's callback sender and the in-process executor to
/// the center's completion actor. Queued for writing; the sender does not wait for the write.
#[derive(actix::Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Callback(pub Vec<HandleCallbackParam>);

/// Answers to a batch of `/run` calls ([`ExecutorClient::run_each`]): (index of the call,
/// answer), several in one item when they came together.
pub type Answers = BoxStream<'static, Vec<(usize, ReturnT)>>;

/// What an executor that registered speaks, told by how it registered: xjob's own executors
/// say so in their registration, XXL-JOB 3.5's send `XXL-JOB-APPNAME` with it, older ones
/// neither. The HTTP client then sends an address its calls on the right path from the first
/// call, instead of learning it from refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutorKind {
    /// xjob's executor: takes `/runBatch` (and `/run`, `/trigger`).
    Xjob,
    /// XXL-JOB 3.5: `/trigger` only.
    Xxl35,
    /// XXL-JOB 2.x–3.4, or another implementation of that protocol: `/run` only.
    Xxl,
}

/// How the center talks to an executor at an address. Every call answers a `ReturnT`; transport
/// failures are code 500 with the spec's texts, never a panic or an `Err`.
pub trait ExecutorClient: Send + Sync + 'static {
    /// `POST /run`: enqueue one trigger.
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT>;
    /// `POST /run` for several triggers at once (one dispatch pass): every answer as soon as it
    /// comes, with its call's index (answers that came together in one item), so a run's
    /// outcome can be recorded before its result arrives. The default makes the calls
    /// concurrently; a client that can hand a batch over in one step (the in-process executor,
    /// the HTTP client's thread) overrides it.
    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
        let n = calls.len().max(1);
        calls
            .into_iter()
            .enumerate()
            .map(|(i, (a, p))| self.run(&a, p).map(move |r| (i, r)))
            .collect::<FuturesUnordered<_>>()
            .ready_chunks(n)
            .boxed()
    }
    /// [`ExecutorClient::run_each`], answering also how many executor calls it makes for
    /// them: one per trigger unless the client sends several in one call (the in-process
    /// executor takes a batch in one message, xjob's executors in one `/runBatch`). Each call
    /// holds a trigger-lane place while in flight, as one of XXL-JOB's trigger threads would.
    fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
        (calls.len(), self.run_each(calls))
    }
    /// `POST /beat`: liveness.
    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT>;
    /// `POST /idleBeat`: is the job idle on that executor.
    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT>;
    /// `POST /kill`: stop the job's worker.
    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT>;
    /// `POST /log`: read a run log from a line on.
    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>>;
    /// This client sending `token` instead of its own (a group's own access token), for the
    /// executors of that group; an empty `token` means none at all (for an address that belongs
    /// to no group). `None` (the default) when the client sends no token: a client that does
    /// send one must implement this, or addresses outside every group get its token too.
    fn with_token(&self, token: &str) -> Option<Arc<dyn ExecutorClient>> {
        let _ = token;
        None
    }
    /// This client naming `app_name` as the executors' app (XXL-JOB 3.5's `XXL-JOB-APPNAME`,
    /// which its executors require), for the executors of that group. `None` (the default)
    /// when the client has no use for it.
    fn with_app(&self, app_name: &str) -> Option<Arc<dyn ExecutorClient>> {
        let _ = app_name;
        None
    }
    /// This client for the executors of group `group` (what a dispatch of that group's jobs
    /// uses): the token and app name it sends are the group's, whatever other group lists the
    /// same address. `None` (the default) when the client does not tell groups apart.
    fn for_group(&self, group: i32) -> Option<Arc<dyn ExecutorClient>> {
        let _ = group;
        None
    }
    /// The executor at `address` registered as `kind`: calls to it go where it listens from
    /// now on. The default ignores it (a client with one path for everyone); a client that
    /// wraps another must pass it on, or executors that take batches get one call at a time.
    fn learn(&self, address: &str, kind: ExecutorKind) {
        let _ = (address, kind);
    }
}

/// One remote client's share of a batch: the client, its calls, their indexes in the batch.
type Share = (
    Arc<dyn ExecutorClient>,
    Vec<(String, TriggerParam)>,
    Vec<usize>,
);

/// Normalises an address for comparison: a trailing slash is added as XXL-JOB does.
pub(crate) fn normalise(address: &str) -> String {
    let a = address.trim();
    if a.ends_with('/') {
        a.to_string()
    } else {
        format!("{a}/")
    }
}

/// Remote clients by group appName, then by the token they send (`None`: the global one).
type GroupClients = std::collections::HashMap<
    String,
    std::collections::HashMap<Option<String>, Arc<dyn ExecutorClient>>,
>;

/// A node's client: its own address goes to the in-process executor without HTTP; others go to
/// `remote`, or fail with XXL-JOB's remoting error text when there is none.
///
/// Calls are made for a group ([`ExecutorClient::for_group`]): the group's token goes only to
/// the addresses that group lists (its own token, or the global one when it has none), no token
/// to any other address, and the group's app name with it; the in-process executor takes only
/// its own group's calls (another group listing this node's address reaches it over HTTP,
/// where its token and app name are checked). A call made without a group sends no token.
#[derive(Clone)]
pub(crate) struct NodeClient(Arc<Inner>);

struct Inner {
    /// This node's address (normalised) and app name.
    local_address: Option<(String, String)>,
    local: Option<Arc<dyn ExecutorClient>>,
    remote: Option<Arc<dyn ExecutorClient>>,
    /// Where groups' tokens and addresses come from.
    tokens: Option<crate::directory::Directory>,
    /// The remote client per group appName and token sent (`None`: the global one), made once.
    made: parking_lot::Mutex<GroupClients>,
    /// The client per group, made once.
    groups: parking_lot::Mutex<std::collections::HashMap<i32, Arc<dyn ExecutorClient>>>,
}

/// What a call for a group needs to know of it (read once per batch).
struct Route<'a> {
    /// The group's tokens and addresses (`None`: no group, or one no longer known).
    call: Option<&'a crate::directory::GroupCall>,
    /// The dispatched group's app name (`None`: a call without a group; `""`: a group no
    /// longer known, which no executor may take in-process).
    app: Option<&'a str>,
    /// Whether the node tells tokens apart at all (without a directory every call sends the
    /// remote client's own token).
    tokens: bool,
}

impl<'a> Route<'a> {
    fn of(group: Option<i32>, tokens: Option<&'a crate::directory::GroupTokens>) -> Self {
        let call = group.and_then(|g| tokens?.group_call(g));
        Route {
            call,
            app: match (group, call) {
                (Some(_), Some(c)) => Some(c.app.as_str()),
                (Some(_), None) => Some(""),
                (None, _) => None,
            },
            tokens: tokens.is_some(),
        }
    }
}

/// A [`NodeClient`] for the executors of one group.
struct GroupClient {
    node: NodeClient,
    group: i32,
}

impl NodeClient {
    /// A client with an optional in-process executor at `local` (address, app name, client),
    /// an optional remote client for every other address, and the groups' tokens from
    /// `tokens` (without one, every call sends the remote client's own token).
    pub(crate) fn new(
        local: Option<(String, String, Arc<dyn ExecutorClient>)>,
        remote: Option<Arc<dyn ExecutorClient>>,
        tokens: Option<crate::directory::Directory>,
    ) -> Self {
        let (local_address, local) = match local {
            Some((a, app, c)) => (Some((normalise(&a), app)), Some(c)),
            None => (None, None),
        };
        NodeClient(Arc::new(Inner {
            local_address,
            local,
            remote,
            tokens,
            made: Default::default(),
            groups: Default::default(),
        }))
    }

    /// The in-process executor when `address` is this node's own and the call is for its
    /// group (`group`: the dispatched group's app name, `None` for a call without one).
    fn local_for(&self, address: &str, group: Option<&str>) -> Option<&Arc<dyn ExecutorClient>> {
        let ((own, app), local) = (self.0.local_address.as_ref()?, self.0.local.as_ref()?);
        if group.is_some_and(|g| g != app) {
            return None;
        }
        let a = address.trim();
        // `own` is normalised (ends with '/'): compare without allocating
        let same = if a.ends_with('/') {
            a == own
        } else {
            own.len() == a.len() + 1 && own.starts_with(a)
        };
        same.then_some(local)
    }

    /// The client a call to `address` for `group` goes through.
    fn pick(&self, address: &str, group: Option<i32>) -> Result<Arc<dyn ExecutorClient>, ReturnT> {
        let tokens = self.0.tokens.as_ref().map(|d| d.tokens());
        let route = Route::of(group, tokens.as_deref());
        self.pick_in(address, &route, &mut [None, None])
    }

    /// [`NodeClient::pick`] on a batch's `route`, with the batch's remote clients `memo` (for
    /// the group's own addresses, and for any other).
    fn pick_in(
        &self,
        address: &str,
        route: &Route<'_>,
        memo: &mut [Option<Arc<dyn ExecutorClient>>; 2],
    ) -> Result<Arc<dyn ExecutorClient>, ReturnT> {
        if let Some(l) = self.local_for(address, route.app) {
            return Ok(l.clone());
        }
        let remote = self.0.remote.as_ref().ok_or_else(|| {
            ReturnT::fail(format!(
                "xxl-job remoting error(no remote executor client is configured), for url : {address}"
            ))
        })?;
        if !route.tokens {
            return Ok(remote.clone());
        }
        // the token goes only where it belongs: a group's own token to that group's addresses,
        // the global token to the addresses of a group without one, none anywhere else
        let listed = route.call.is_some_and(|c| c.lists(address));
        let slot = &mut memo[usize::from(listed)];
        if let Some(c) = slot {
            return Ok(c.clone());
        }
        let token = match route.call.map(|c| &c.token).filter(|_| listed) {
            Some(AddressToken::Global) => None,
            Some(AddressToken::Own(t)) => Some(t.clone()),
            None => Some(String::new()),
        };
        let app = route.app.unwrap_or_default();
        let c = self.made(remote, app, token);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// The remote client sending `token` (`None`: its own) and naming `app`, made once.
    fn made(
        &self,
        remote: &Arc<dyn ExecutorClient>,
        app: &str,
        token: Option<String>,
    ) -> Arc<dyn ExecutorClient> {
        let mut made = self.0.made.lock();
        if let Some(c) = made.get(app).and_then(|by_token| by_token.get(&token)) {
            return c.clone();
        }
        let with_token = match &token {
            None => remote.clone(),
            Some(t) => remote.with_token(t).unwrap_or_else(|| remote.clone()),
        };
        let c = if app.is_empty() {
            with_token
        } else {
            with_token.with_app(app).unwrap_or(with_token)
        };
        made.entry(app.to_string())
            .or_default()
            .insert(token, c.clone());
        c
    }

    /// [`ExecutorClient::run_each_counted`] for `group`'s executors.
    fn run_each_for(
        &self,
        calls: Vec<(String, TriggerParam)>,
        group: Option<i32>,
    ) -> (usize, Answers) {
        // the in-process executor's share goes over in one step, and so does each remote
        // client's share (the HTTP client makes its calls on its own thread)
        // most batches are all local or all remote: sized for the whole batch
        let mut local = Vec::with_capacity(calls.len());
        let mut local_at = Vec::with_capacity(calls.len());
        let mut failed = Vec::new();
        let mut remote: Vec<Share> = Vec::new();
        let tokens = self.0.tokens.as_ref().map(|d| d.tokens());
        let route = Route::of(group, tokens.as_deref());
        let mut memo = [None, None];
        for (i, (a, p)) in calls.into_iter().enumerate() {
            match self.pick_in(&a, &route, &mut memo) {
                Ok(c) if self.0.local.as_ref().is_some_and(|l| Arc::ptr_eq(l, &c)) => {
                    local_at.push(i);
                    local.push((a, p));
                }
                Ok(c) => match remote.iter_mut().find(|(k, _, _)| Arc::ptr_eq(k, &c)) {
                    Some((_, calls, at)) => {
                        calls.push((a, p));
                        at.push(i);
                    }
                    None => remote.push((c, vec![(a, p)], vec![i])),
                },
                Err(e) => failed.push((i, e)),
            }
        }
        let mut streams: Vec<Answers> = Vec::new();
        let mut made = 0;
        if !failed.is_empty() {
            streams.push(futures::stream::once(futures::future::ready(failed)).boxed());
        }
        if let (Some(l), false) = (&self.0.local, local.is_empty()) {
            let (n, answers) = l.run_each_counted(local);
            made += n;
            streams.push(reindexed(answers, local_at));
        }
        for (c, calls, at) in remote {
            let (n, answers) = c.run_each_counted(calls);
            made += n;
            streams.push(reindexed(answers, at));
        }
        (made, futures::stream::select_all(streams).boxed())
    }

    fn beat_for(&self, address: &str, group: Option<i32>) -> BoxFuture<'static, ReturnT> {
        match self.pick(address, group) {
            Ok(c) => c.beat(address),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn idle_beat_for(
        &self,
        address: &str,
        job_id: i32,
        group: Option<i32>,
    ) -> BoxFuture<'static, ReturnT> {
        match self.pick(address, group) {
            Ok(c) => c.idle_beat(address, job_id),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn kill_for(
        &self,
        address: &str,
        job_id: i32,
        group: Option<i32>,
    ) -> BoxFuture<'static, ReturnT> {
        match self.pick(address, group) {
            Ok(c) => c.kill(address, job_id),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }

    fn log_for(
        &self,
        address: &str,
        param: LogParam,
        group: Option<i32>,
    ) -> BoxFuture<'static, ReturnT<LogResult>> {
        match self.pick(address, group) {
            Ok(c) => c.log(address, param),
            Err(e) => futures::future::ready(ReturnT {
                code: e.code,
                msg: e.msg,
                content: None,
            })
            .boxed(),
        }
    }

    fn run_for(
        &self,
        address: &str,
        param: TriggerParam,
        group: Option<i32>,
    ) -> BoxFuture<'static, ReturnT> {
        match self.pick(address, group) {
            Ok(c) => c.run(address, param),
            Err(e) => futures::future::ready(e).boxed(),
        }
    }
}

/// `answers` of a share of a batch, their indexes mapped back to the batch's (`at`).
pub(crate) fn reindexed(answers: Answers, at: Vec<usize>) -> Answers {
    answers
        .map(move |answers| {
            answers
                .into_iter()
                .filter_map(|(j, r)| at.get(j).map(|&i| (i, r)))
                .collect::<Vec<_>>()
        })
        .boxed()
}

impl ExecutorClient for NodeClient {
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        self.run_for(address, param, None)
    }

    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
        self.run_each_for(calls, None).1
    }

    fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
        self.run_each_for(calls, None)
    }

    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT> {
        self.beat_for(address, None)
    }

    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.idle_beat_for(address, job_id, None)
    }

    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.kill_for(address, job_id, None)
    }

    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        self.log_for(address, param, None)
    }

    fn for_group(&self, group: i32) -> Option<Arc<dyn ExecutorClient>> {
        let mut made = self.0.groups.lock();
        if let Some(c) = made.get(&group) {
            return Some(c.clone());
        }
        if made.len() >= 10_000 {
            made.clear();
        }
        let c: Arc<dyn ExecutorClient> = Arc::new(GroupClient {
            node: self.clone(),
            group,
        });
        made.insert(group, c.clone());
        Some(c)
    }

    fn learn(&self, address: &str, kind: ExecutorKind) {
        // the remote client's per-group copies share what it knows about peers
        if let Some(r) = &self.0.remote {
            r.learn(address, kind);
        }
    }
}

impl ExecutorClient for GroupClient {
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        self.node.run_for(address, param, Some(self.group))
    }

    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
        self.node.run_each_for(calls, Some(self.group)).1
    }

    fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
        self.node.run_each_for(calls, Some(self.group))
    }

    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT> {
        self.node.beat_for(address, Some(self.group))
    }

    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.node.idle_beat_for(address, job_id, Some(self.group))
    }

    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.node.kill_for(address, job_id, Some(self.group))
    }

    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        self.node.log_for(address, param, Some(self.group))
    }

    fn for_group(&self, group: i32) -> Option<Arc<dyn ExecutorClient>> {
        self.node.for_group(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    /// Answers every call with its own name and the log id; counts `run_each` calls; with
    /// `one_call`, says it hands a batch over in one executor call.
    struct Named {
        name: &'static str,
        batches: Mutex<Vec<usize>>,
        one_call: bool,
    }

    impl ExecutorClient for Named {
        fn run(&self, address: &str, p: TriggerParam) -> BoxFuture<'static, ReturnT> {
            futures::future::ready(ReturnT::fail(format!(
                "{} {address} {}",
                self.name, p.log_id
            )))
            .boxed()
        }
        fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
            self.batches.lock().push(calls.len());
            let out = calls
                .into_iter()
                .enumerate()
                .map(|(i, (a, p))| (i, ReturnT::fail(format!("{} {a} {}", self.name, p.log_id))))
                .collect();
            futures::stream::once(futures::future::ready(out)).boxed()
        }
        fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
            let made = if self.one_call {
                usize::from(!calls.is_empty())
            } else {
                calls.len()
            };
            (made, self.run_each(calls))
        }
        fn beat(&self, _: &str) -> BoxFuture<'static, ReturnT> {
            futures::future::ready(ReturnT::success()).boxed()
        }
        fn idle_beat(&self, _: &str, _: i32) -> BoxFuture<'static, ReturnT> {
            futures::future::ready(ReturnT::success()).boxed()
        }
        fn kill(&self, _: &str, _: i32) -> BoxFuture<'static, ReturnT> {
            futures::future::ready(ReturnT::success()).boxed()
        }
        fn log(&self, _: &str, _: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
            futures::future::ready(ReturnT::success()).boxed()
        }
    }

    /// Every answer of `run_each`, in the order of the calls (each call answered once).
    fn in_order(client: &NodeClient, calls: Vec<(String, TriggerParam)>) -> Vec<ReturnT> {
        let n = calls.len();
        let mut answers: Vec<(usize, ReturnT)> =
            futures::executor::block_on(client.run_each(calls).collect::<Vec<_>>())
                .into_iter()
                .flatten()
                .collect();
        answers.sort_by_key(|(i, _)| *i);
        let indices: Vec<usize> = answers.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            indices,
            (0..n).collect::<Vec<_>>(),
            "each call answered once"
        );
        answers.into_iter().map(|(_, r)| r).collect()
    }

    fn param(log_id: i64) -> TriggerParam {
        TriggerParam {
            log_id,
            ..Default::default()
        }
    }

    /// A batch mixing the node's own address (with and without its trailing slash) and other
    /// executors answers every call under its index; the local share and each remote client's
    /// share go over in one step each.
    #[test]
    fn run_each_answers_every_call_by_index_and_hands_the_local_share_over_at_once() {
        let local = Arc::new(Named {
            name: "local",
            batches: Mutex::new(Vec::new()),
            one_call: true,
        });
        let remote = Arc::new(Named {
            name: "remote",
            batches: Mutex::new(Vec::new()),
            one_call: false,
        });
        let node = NodeClient::new(
            Some((
                "http://me:1".into(),
                "me".into(),
                local.clone() as Arc<dyn ExecutorClient>,
            )),
            Some(remote.clone() as Arc<dyn ExecutorClient>),
            None,
        );
        let calls = vec![
            ("http://me:1/".to_string(), param(1)),
            ("http://other:2/".to_string(), param(2)),
            (" http://me:1".to_string(), param(3)),
            ("http://me:12/".to_string(), param(4)),
        ];
        // the executor calls made: the local share's one, the remote client's one per trigger
        let (made, _) = node.run_each_counted(calls.clone());
        assert_eq!(made, 1 + 2);
        local.batches.lock().clear();
        remote.batches.lock().clear();
        let answers = in_order(&node, calls);
        let msgs: Vec<String> = answers.into_iter().map(|r| r.msg.unwrap()).collect();
        assert_eq!(
            msgs,
            vec![
                "local http://me:1/ 1",
                "remote http://other:2/ 2",
                "local  http://me:1 3",
                "remote http://me:12/ 4",
            ]
        );
        assert_eq!(
            *local.batches.lock(),
            vec![2],
            "one hand-over for the local share"
        );
        assert_eq!(
            *remote.batches.lock(),
            vec![2],
            "one hand-over for the remote client's share"
        );
        // no remote client: other addresses fail with the remoting text, in place
        let alone = NodeClient::new(
            Some(("http://me:1".into(), "me".into(), local.clone() as _)),
            None,
            None,
        );
        let answers = in_order(
            &alone,
            vec![
                ("http://x:9".into(), param(5)),
                ("http://me:1".into(), param(6)),
            ],
        );
        assert!(
            answers[0]
                .msg
                .as_deref()
                .unwrap()
                .contains("no remote executor client")
        );
        assert_eq!(answers[1].msg.as_deref(), Some("local http://me:1 6"));
    }
}
