//! The HTTP [`ExecutorClient`]: XXL-JOB 2.4 calls to remote executors (protocol.md §1, §2).
//!
//! Requests run on one dedicated client thread with a pooled keep-alive client (awc's client is
//! bound to its thread); callers get `Send` futures. The small JSON calls to `http://`
//! addresses take the lean exchange of [`super::h1`]; the rest goes through awc. Every call answers a `ReturnT`: a non-200
//! status, an unparsable body or an I/O error become code 500 with XXL-JOB's texts.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use actix::{Arbiter, ArbiterHandle};
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use rustls::ClientConfig;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use super::ExecutorClient;
use super::client::Answers;
use super::h1;
use super::log_page::{LOG_BODY_CAP, page_from_prefix};
use crate::error::{Error, Result};
use crate::model::wire::{
    HandleCallbackParam, JobIdParam, LogParam, LogResult, RegistryParam, ReturnT, TriggerParam,
};
use crate::token::{APP_HEADER, TOKEN_HEADER};

type Bytes = actix_web::web::Bytes;

/// `body` as JSON, or XXL-JOB's failure when it cannot be encoded.
fn encode<B: Serialize + ?Sized, T>(body: &B) -> std::result::Result<Bytes, ReturnT<T>> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ReturnT::fail(format!("request encoding: {e}")))
}

/// XXL-JOB's default connect and read timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

thread_local! {
    /// The client thread's pooled client (set when the thread starts, see
    /// [`HttpExecutorClient::with_ca_file`]; built with the default roots otherwise).
    static CLIENT: RefCell<Option<awc::Client>> = const { RefCell::new(None) };
    /// `/run` calls the client thread is making.
    static RUNS_IN_FLIGHT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How long the client thread waits before it sleeps while `/run` calls are in flight, so that
/// the answers that come meanwhile are read on one wake-up instead of one each (an executor
/// answers a burst of calls one by one; every wake-up of a thread costs far more than reading
/// one more answer). Adds at most this to a call's answer, never to an idle thread.
const NAP: Duration = Duration::from_millis(1);

/// The client thread: a runtime like actix's default, napping before it sleeps while `/run`
/// calls are in flight ([`NAP`]).
fn client_thread() -> Arbiter {
    let made = Arbiter::try_with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(|| {
                if RUNS_IN_FLIGHT.with(std::cell::Cell::get) > 0 {
                    std::thread::sleep(NAP);
                }
            })
            .build()
    });
    match made {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "the HTTP client thread runs without its nap");
            Arbiter::new()
        }
    }
}

/// Counts one `/run` call in flight on the client thread for as long as it lives.
struct InFlight;

impl InFlight {
    fn new() -> InFlight {
        RUNS_IN_FLIGHT.with(|n| n.set(n.get() + 1));
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        RUNS_IN_FLIGHT.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// This thread's client.
fn client() -> awc::Client {
    CLIENT.with(|c| {
        c.borrow_mut()
            .get_or_insert_with(|| build_client(default_tls()))
            .clone()
    })
}

fn build_client(tls: Option<Arc<ClientConfig>>) -> awc::Client {
    let mut connector = awc::Connector::new().limit(4096);
    if let Some(tls) = tls {
        connector = connector.rustls_0_23(tls);
    }
    awc::Client::builder()
        .connector(connector)
        .disable_redirects()
        .finish()
}

/// TLS with the default roots, built once (`None` if it cannot be built: `https://` calls then
/// fail with the connector's error).
fn default_tls() -> Option<Arc<ClientConfig>> {
    static DEFAULT: OnceLock<Option<Arc<ClientConfig>>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| match tls_config(None) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(error = %e, "HTTPS is unavailable");
                None
            }
        })
        .clone()
}

/// The client's TLS settings: certificates are verified against the system's roots, Mozilla's
/// list and, when given, the PEM bundle at `ca_file` (a private CA); HTTP/1.1 only.
pub(crate) fn tls_config(ca_file: Option<&str>) -> Result<Arc<ClientConfig>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // a missing or partly unreadable system store leaves Mozilla's list
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(path) = ca_file.map(str::trim).filter(|p| !p.is_empty()) {
        let bad = |reason: String| Error::Config(format!("http.client_ca_file `{path}`: {reason}"));
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(e.to_string()))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("holds no PEM certificate".into()));
        }
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(bad("no certificate in it can be used as a root".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Calls remote executors over HTTP.
#[derive(Clone)]
pub struct HttpExecutorClient {
    thread: ArbiterHandle,
    cred: Credentials,
    timeout: Duration,
    peers: Arc<Peers>,
}

/// What a call sends besides its body: the access token and the app name (XXL-JOB 3.5's
/// `XXL-JOB-APPNAME`; older peers ignore it).
#[derive(Clone, Debug, Default)]
struct Credentials {
    token: Option<Arc<str>>,
    app: Option<Arc<str>>,
}

/// What the client learned about the peers it calls, shared by its copies: the executors that
/// speak XXL-JOB 3.5 (`/trigger` instead of `/run`) and the admins that take 3.5's callback
/// object (`{"callbackList": [...]}` instead of an array). Both start empty (the 2.x–3.4
/// protocol) and follow each peer's answers.
/// It also knows the executors that take xjob's `/runBatch` (those that registered as xjob's:
/// [`ExecutorClient::learn`]; one that then refuses a batch is dropped from them), and the
/// addresses whose path is known (from a registration or an answer): an address whose path is
/// not known yet is sent one call alone first, the rest once that call taught the path.
#[derive(Debug, Default)]
struct Peers {
    triggers: parking_lot::RwLock<std::collections::HashSet<String>>,
    callback_objects: parking_lot::RwLock<std::collections::HashSet<String>>,
    batch: parking_lot::RwLock<std::collections::HashSet<String>>,
    known: parking_lot::RwLock<std::collections::HashSet<String>>,
}

impl Peers {
    fn has(set: &parking_lot::RwLock<std::collections::HashSet<String>>, peer: &str) -> bool {
        let set = set.read();
        !set.is_empty() && set.contains(&super::client::normalise(peer))
    }

    fn set(set: &parking_lot::RwLock<std::collections::HashSet<String>>, peer: &str, on: bool) {
        let peer = super::client::normalise(peer);
        if on {
            set.write().insert(peer);
        } else {
            set.write().remove(&peer);
        }
    }
}

/// Whether an answer says the path is not served: XXL-JOB's executors answer an unknown path
/// `invalid request, uri-mapping(<path>) not found.`; other servers a 404.
fn path_unknown<T>(r: &ReturnT<T>) -> bool {
    !r.is_success()
        && r.msg.as_deref().is_some_and(|m| {
            (m.contains("uri-mapping(") && m.contains("not found")) || m.contains("StatusCode(404)")
        })
}

/// Whether a call failed in the exchange itself (not sent, or its answer not read): the
/// executor may have acted on it. Any other failure is an answer the executor gave.
fn exchange_failed<T>(r: &ReturnT<T>) -> bool {
    !r.is_success()
        && r.msg
            .as_deref()
            .is_some_and(|m| m.starts_with("xxl-job remoting error("))
}

/// `address` + `path`, adding the `/` XXL-JOB adds.
pub(super) fn join_url(address: &str, path: &str) -> String {
    let a = address.trim();
    if a.ends_with('/') {
        format!("{a}{path}")
    } else {
        format!("{a}/{path}")
    }
}

/// Sends the POST; a failed send or a status other than 200 is the failure it answers.
async fn send(
    url: &str,
    body: Bytes,
    cred: &Credentials,
    timeout: Duration,
) -> std::result::Result<Response, ReturnT<()>> {
    let mut req = client().post(url);
    req = req
        .timeout(timeout)
        .insert_header(("Content-Type", "application/json;charset=UTF-8"));
    if let Some(t) = cred.token.as_deref().filter(|t| !t.trim().is_empty()) {
        req = req.insert_header((TOKEN_HEADER, t));
    }
    if let Some(a) = cred.app.as_deref().filter(|a| !a.trim().is_empty()) {
        req = req.insert_header((APP_HEADER, a));
    }
    let resp = match req.send_body(body).await {
        Ok(r) => r,
        Err(e) => return Err(remoting_error(e, url)),
    };
    if resp.status().as_u16() != 200 {
        return Err(bad_status(resp.status().as_u16(), url));
    }
    Ok(resp)
}

/// XXL-JOB's text for a call that failed to send or to read its answer.
fn remoting_error<T>(e: impl std::fmt::Display, url: &str) -> ReturnT<T> {
    ReturnT::fail(format!("xxl-job remoting error({e}), for url : {url}"))
}

/// XXL-JOB's text for an answer whose status is not 200.
fn bad_status<T>(status: u16, url: &str) -> ReturnT<T> {
    ReturnT::fail(format!(
        "xxl-job remoting fail, StatusCode({status}) invalid. for url : {url}"
    ))
}

type Response = awc::ClientResponse;

fn refail<T>(f: ReturnT<()>) -> ReturnT<T> {
    ReturnT {
        code: f.code,
        msg: f.msg,
        content: None,
    }
}

/// How much of an answer that is not the expected JSON is quoted in the failure (it ends up in
/// the run's stored summary, which the console shows).
const INVALID_QUOTED: usize = 2048;

fn invalid<T>(url: &str, bytes: &[u8]) -> ReturnT<T> {
    let start = &bytes[..bytes.len().min(INVALID_QUOTED)];
    let mut text = String::from_utf8_lossy(start).into_owned();
    if bytes.len() > start.len() {
        text.push_str(&format!("… [cut: {} bytes in all]", bytes.len()));
    }
    ReturnT::fail(format!(
        "xxl-job remoting (url={url}) response content invalid({text})."
    ))
}

async fn post<T: DeserializeOwned>(
    url: String,
    body: Bytes,
    cred: Credentials,
    timeout: Duration,
) -> ReturnT<T> {
    if let Some(t) = h1::target(&url) {
        let (token, app) = (cred.token.as_deref(), cred.app.as_deref());
        return match h1::post(&t, &body, token, app, timeout, LOG_BODY_CAP).await {
            Ok(a) if a.status == 200 => {
                serde_json::from_slice(&a.body).unwrap_or_else(|_| invalid(&url, &a.body))
            }
            Ok(a) => bad_status(a.status, &url),
            Err(e) => remoting_error(e, &url),
        };
    }
    let mut resp = match send(&url, body, &cred, timeout).await {
        Ok(r) => r,
        Err(f) => return refail(f),
    };
    let bytes = match resp.body().limit(LOG_BODY_CAP).await {
        Ok(b) => b,
        Err(e) => return remoting_error(e, &url),
    };
    serde_json::from_slice(&bytes).unwrap_or_else(|_| invalid(&url, &bytes))
}

/// `/log`: reads at most [`LOG_BODY_CAP`] bytes of the answer; a longer one (a foreign
/// executor sends the whole rest of the file) is read as the page of whole lines in that prefix.
async fn post_log(
    url: String,
    body: Bytes,
    cred: Credentials,
    timeout: Duration,
    from: i32,
) -> ReturnT<LogResult> {
    use futures::StreamExt;
    let mut resp = match send(&url, body, &cred, timeout).await {
        Ok(r) => r,
        Err(f) => return refail(f),
    };
    let read = async {
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.next().await {
            bytes.extend_from_slice(&chunk?);
            if bytes.len() >= LOG_BODY_CAP {
                bytes.truncate(LOG_BODY_CAP);
                return Ok((bytes, false));
            }
        }
        Ok::<_, awc::error::PayloadError>((bytes, true))
    };
    let (bytes, whole) = match actix_rt::time::timeout(timeout, read).await {
        Ok(Ok(read)) => read,
        Ok(Err(e)) => return remoting_error(e, &url),
        Err(_) => {
            return ReturnT::fail(format!(
                "xxl-job remoting error(timed out reading the answer), for url : {url}"
            ));
        }
    };
    if whole {
        return serde_json::from_slice(&bytes).unwrap_or_else(|_| invalid(&url, &bytes));
    }
    // the connection is dropped with the rest of the body unread
    page_from_prefix(&bytes, from).unwrap_or_else(|| {
        ReturnT::fail(format!(
            "xxl-job remoting (url={url}) answered more than {LOG_BODY_CAP} bytes that hold no log page"
        ))
    })
}

impl HttpExecutorClient {
    /// A client on its own thread; `token` is sent when set; `timeout` bounds each call.
    /// `https://` addresses are verified against the system's and Mozilla's roots.
    pub fn new(token: Option<String>, timeout: Duration) -> Self {
        Self::on_thread(token, timeout, default_tls())
    }

    /// [`HttpExecutorClient::new`] that also trusts the certificates of the PEM bundle at
    /// `ca_file` (`http.client_ca_file`: a private CA of executors or admins); an unreadable or
    /// empty bundle is an error naming the key.
    pub fn with_ca_file(token: Option<String>, timeout: Duration, ca_file: &str) -> Result<Self> {
        if ca_file.trim().is_empty() {
            return Ok(Self::new(token, timeout));
        }
        Ok(Self::on_thread(
            token,
            timeout,
            Some(tls_config(Some(ca_file))?),
        ))
    }

    fn on_thread(token: Option<String>, timeout: Duration, tls: Option<Arc<ClientConfig>>) -> Self {
        let thread = client_thread().handle();
        // the thread's first task: everything it sends later goes through this client
        thread.spawn_fn(move || CLIENT.with(|c| *c.borrow_mut() = Some(build_client(tls))));
        HttpExecutorClient {
            thread,
            cred: Credentials {
                token: token.map(Arc::from),
                app: None,
            },
            timeout,
            peers: Arc::default(),
        }
    }

    /// This client naming `app_name` in XXL-JOB 3.5's `XXL-JOB-APPNAME` header on every call
    /// (an executor's own app name, for its calls to admins).
    pub fn with_app_name(mut self, app_name: &str) -> Self {
        let app = app_name.trim();
        self.cred.app = (!app.is_empty()).then(|| Arc::from(app));
        self
    }

    fn call<B, T>(&self, address: &str, path: &str, body: &B) -> BoxFuture<'static, ReturnT<T>>
    where
        B: Serialize + Send + 'static,
        T: DeserializeOwned + Send + 'static,
    {
        self.call_with(address, path, body, post::<T>)
    }

    /// POSTs `body` to `address`/`path` on the client thread with `send` (url, body,
    /// credentials, timeout); an unencodable body or a stopped thread answer XXL-JOB's failure
    /// texts.
    fn call_with<B, T, F, Fut>(
        &self,
        address: &str,
        path: &str,
        body: &B,
        send: F,
    ) -> BoxFuture<'static, ReturnT<T>>
    where
        B: Serialize,
        T: Send + 'static,
        F: FnOnce(String, Bytes, Credentials, Duration) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ReturnT<T>> + 'static,
    {
        match encode(body) {
            Ok(payload) => self.send_with(address, path, payload, send),
            Err(f) => futures::future::ready(f).boxed(),
        }
    }

    /// [`Self::call_with`] of an encoded body.
    fn send_with<T, F, Fut>(
        &self,
        address: &str,
        path: &str,
        payload: Bytes,
        send: F,
    ) -> BoxFuture<'static, ReturnT<T>>
    where
        T: Send + 'static,
        F: FnOnce(String, Bytes, Credentials, Duration) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ReturnT<T>> + 'static,
    {
        let url = join_url(address, path);
        let (cred, timeout, u) = (self.cred.clone(), self.timeout, url.clone());
        let stopped = ReturnT::fail(format!(
            "xxl-job remoting error(client thread stopped), for url : {url}"
        ));
        self.on_client_thread(move || send(u, payload, cred, timeout), stopped)
    }

    /// POSTs an encoded body, answering a `ReturnT`.
    fn send(&self, address: &str, path: &str, payload: Bytes) -> BoxFuture<'static, ReturnT> {
        self.send_with(address, path, payload, post::<String>)
    }
}

impl HttpExecutorClient {
    /// POSTs a JSON body to any URL (webhooks); answers the HTTP status.
    pub fn post_json(&self, url: &str, body: Vec<u8>) -> BoxFuture<'static, Result<u16, String>> {
        let (u, timeout) = (url.to_string(), self.timeout);
        let send = move || async move {
            let req = client().post(&u);
            req.timeout(timeout)
                .insert_header(("Content-Type", "application/json"))
                .send_body(body)
                .await
                .map(|resp| resp.status().as_u16())
                .map_err(|e| e.to_string())
        };
        self.on_client_thread(send, Err("HTTP client thread stopped".to_string()))
    }

    /// Runs the future `make` builds on the client thread (awc is bound to its thread) and
    /// answers its output, or `stopped` when the thread is gone.
    fn on_client_thread<T, F, Fut>(&self, make: F, stopped: T) -> BoxFuture<'static, T>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + 'static,
    {
        let (tx, rx) = oneshot::channel();
        // the closure crosses threads; the request future stays on the client thread
        let sent = self.thread.spawn_fn(move || {
            actix::spawn(async move {
                let _ = tx.send(make().await);
            });
        });
        async move {
            if !sent {
                return stopped;
            }
            rx.await.unwrap_or(stopped)
        }
        .boxed()
    }
}

/// One HTTP request of a built-in job handler (`httpJobHandler`).
#[derive(Clone, Debug)]
pub(crate) struct HttpCall {
    /// GET, POST, PUT, DELETE, PATCH or HEAD.
    pub method: awc::http::Method,
    /// Absolute `http://` or `https://` URL.
    pub url: String,
    /// Request headers, names and values already checked.
    pub headers: Vec<(
        awc::http::header::HeaderName,
        awc::http::header::HeaderValue,
    )>,
    /// Body (empty: none).
    pub body: Vec<u8>,
    /// Bounds the whole call, body included.
    pub timeout: Duration,
}

/// What the server answered.
#[derive(Clone, Debug)]
pub(crate) struct HttpAnswer {
    /// Status code.
    pub status: u16,
    /// `Location`, if any (redirects are followed by the caller, not the client).
    pub location: Option<String>,
    /// The first [`HttpCall`] body bytes (at most `keep`).
    pub body: Vec<u8>,
    /// Whether the body went on past what was kept.
    pub more: bool,
}

impl HttpExecutorClient {
    /// Sends `call` and reads at most `keep` bytes of the answer's body (the rest is not read).
    pub(crate) fn request(
        &self,
        call: HttpCall,
        keep: usize,
    ) -> BoxFuture<'static, std::result::Result<HttpAnswer, String>> {
        let send = move || async move {
            use futures::StreamExt;
            let mut req = client()
                .request(call.method, &call.url)
                .timeout(call.timeout);
            for (name, value) in call.headers {
                req = req.insert_header((name, value));
            }
            let ms = call.timeout.as_millis();
            let exchange = async {
                let mut resp = req.send_body(call.body).await.map_err(|e| match e {
                    awc::error::SendRequestError::Timeout => format!("timed out after {ms} ms"),
                    e => e.to_string(),
                })?;
                let location = resp
                    .headers()
                    .get(awc::http::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let (mut body, mut more) = (Vec::new(), false);
                while let Some(chunk) = resp.next().await {
                    let chunk = chunk.map_err(|e| e.to_string())?;
                    let room = keep - body.len();
                    if chunk.len() > room {
                        body.extend_from_slice(&chunk[..room]);
                        more = true;
                        break;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(HttpAnswer {
                    status: resp.status().as_u16(),
                    location,
                    body,
                    more,
                })
            };
            match actix_rt::time::timeout(call.timeout, exchange).await {
                Ok(answer) => answer,
                Err(_) => Err(format!("timed out after {ms} ms")),
            }
        };
        self.on_client_thread(send, Err("HTTP client thread stopped".to_string()))
    }
}

/// A batch of encoded `/run` calls (index, address, body) on its way to the client thread, and
/// where their answers go. Dropped with its calls unmade (the thread stopped, or never ran it),
/// it answers each of them with XXL-JOB's remoting error text.
struct Unsent {
    calls: Vec<(usize, String, Bytes)>,
    answers: tokio::sync::mpsc::UnboundedSender<Vec<(usize, ReturnT)>>,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        let failed = self
            .calls
            .drain(..)
            .map(|(i, address, _)| {
                let url = join_url(&address, "run");
                let msg = format!("xxl-job remoting error(client thread stopped), for url : {url}");
                (i, ReturnT::fail(msg))
            })
            .collect();
        let _ = self.answers.send(failed);
    }
}

/// How long answers to a batch of `/run` calls wait on the client thread for more answers
/// before going back to the dispatching thread as one group.
const ANSWER_GROUP_WAIT: Duration = Duration::from_millis(2);

/// Most bytes of encoded triggers one `/runBatch` request carries (the executor takes
/// [`EXECUTOR_MAX_BODY`](super::server::EXECUTOR_MAX_BODY)); a trigger alone larger than
/// this goes in a request of its own.
const RUN_BATCH_BYTES: usize = 2 << 20;

/// One executor's calls of a batch (index, encoded trigger) cut into `/runBatch` requests of at
/// most [`RUN_BATCH_MAX`](super::server::RUN_BATCH_MAX) triggers and about
/// [`RUN_BATCH_BYTES`].
fn batch_chunks(calls: Vec<(usize, Bytes)>) -> Vec<Vec<(usize, Bytes)>> {
    let mut chunks = Vec::new();
    let (mut chunk, mut bytes) = (Vec::new(), 0);
    for (i, payload) in calls {
        if !chunk.is_empty()
            && (chunk.len() == super::server::RUN_BATCH_MAX
                || bytes + payload.len() > RUN_BATCH_BYTES)
        {
            chunks.push(std::mem::take(&mut chunk));
            bytes = 0;
        }
        bytes += payload.len();
        chunk.push((i, payload));
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    chunks
}

/// A JSON array of the encoded triggers: a `/runBatch` body.
fn batch_body(calls: &[(usize, Bytes)]) -> Bytes {
    let mut body = Vec::with_capacity(calls.iter().map(|(_, p)| p.len() + 1).sum::<usize>() + 2);
    body.push(b'[');
    for (k, (_, p)) in calls.iter().enumerate() {
        if k > 0 {
            body.push(b',');
        }
        body.extend_from_slice(p);
    }
    body.push(b']');
    Bytes::from(body)
}

impl HttpExecutorClient {
    /// `POST /run` (2.x–3.4), or `/trigger` to an executor known to speak XXL-JOB 3.5; an
    /// executor that does not serve the path is sent the other one at once, and the one it
    /// serves is remembered. On the client thread.
    async fn run_here(self, address: String, payload: Bytes) -> ReturnT {
        let _counted = InFlight::new();
        let next = Peers::has(&self.peers.triggers, &address);
        let (first, other) = if next {
            ("trigger", "run")
        } else {
            ("run", "trigger")
        };
        let (cred, timeout) = (self.cred.clone(), self.timeout);
        let r = post::<String>(join_url(&address, first), payload.clone(), cred, timeout).await;
        if !path_unknown(&r) {
            if !exchange_failed(&r) && !Peers::has(&self.peers.known, &address) {
                Peers::set(&self.peers.known, &address, true);
            }
            return r;
        }
        let cred = self.cred.clone();
        let again = post::<String>(join_url(&address, other), payload, cred, timeout).await;
        if !path_unknown(&again) {
            tracing::info!(%address, path = other, "the executor serves the other trigger path");
            Peers::set(&self.peers.triggers, &address, !next);
            if !exchange_failed(&again) {
                Peers::set(&self.peers.known, &address, true);
            }
        }
        again
    }

    /// One executor's calls as one `/runBatch` request; each call answers its own answer from
    /// the batch's. An executor that does not take the batch ran none of it, whatever it
    /// answered (a 404, XXL-JOB's unknown-path text, another executor's own words, a success
    /// without the answers): its calls go one by one at once, and it is sent no batch again
    /// until it registers as xjob's anew. Only a failed exchange (nothing or not all of the
    /// answer came back: the batch may have run) answers every call with its failure, as a
    /// `/run` would. On the client thread.
    async fn run_batch_here(
        self,
        address: String,
        calls: Vec<(usize, Bytes)>,
    ) -> Vec<(usize, ReturnT)> {
        let _counted = InFlight::new();
        let url = join_url(&address, super::server::RUN_BATCH);
        let (cred, timeout) = (self.cred.clone(), self.timeout);
        let r = post::<Vec<ReturnT>>(url.clone(), batch_body(&calls), cred, timeout).await;
        let taken = r.is_success() && r.content.is_some();
        if !taken && !exchange_failed(&r) {
            // it ran none of it: no batch again until it registers as xjob's anew
            tracing::info!(%address, "the executor takes no /runBatch: its calls one by one");
            Peers::set(&self.peers.batch, &address, false);
            return self.run_one_by_one(address, calls).await;
        }
        match r.content {
            Some(answers) if answers.len() == calls.len() => calls
                .into_iter()
                .zip(answers)
                .map(|((i, _), r)| (i, r))
                .collect(),
            Some(answers) => {
                let msg = format!(
                    "xxl-job remoting (url={url}) response content invalid({} answers to {} triggers).",
                    answers.len(),
                    calls.len()
                );
                calls
                    .into_iter()
                    .map(|(i, _)| (i, ReturnT::fail(msg.clone())))
                    .collect()
            }
            None => calls
                .into_iter()
                .map(|(i, _)| (i, ReturnT::fail(r.msg.clone().unwrap_or_default())))
                .collect(),
        }
    }

    /// One executor's calls one by one: while its path (`/run` or 3.5's `/trigger`) is not
    /// known, the first alone, which learns it, then the rest on it (one refused call to learn,
    /// not one per call); all at once otherwise. On the client thread.
    async fn run_one_by_one(
        self,
        address: String,
        calls: Vec<(usize, Bytes)>,
    ) -> Vec<(usize, ReturnT)> {
        let mut calls = calls.into_iter();
        let mut answers = Vec::with_capacity(calls.len());
        if !Peers::has(&self.peers.known, &address)
            && let Some((i, payload)) = calls.next()
        {
            answers.push((i, self.clone().run_here(address.clone(), payload).await));
        }
        let each = calls.map(|(i, payload)| {
            let call = self.clone().run_here(address.clone(), payload);
            call.map(move |r| (i, r))
        });
        answers.extend(futures::future::join_all(each).await);
        answers
    }

    /// Makes the batch's calls concurrently on the client thread, sending their answers in
    /// groups ([`ANSWER_GROUP_WAIT`]): an executor's several calls as `/runBatch` requests
    /// ([`Self::run_batch_here`]) when it registered as xjob's, the rest one by one
    /// ([`Self::run_one_by_one`]).
    async fn run_all_here(self, mut batch: Unsent) {
        let answers = batch.answers.clone();
        let mut by_address: std::collections::HashMap<String, Vec<(usize, Bytes)>> =
            std::collections::HashMap::new();
        for (i, address, payload) in std::mem::take(&mut batch.calls) {
            by_address.entry(address).or_default().push((i, payload));
        }
        let pending: FuturesUnordered<
            futures::future::LocalBoxFuture<'static, Vec<(usize, ReturnT)>>,
        > = FuturesUnordered::new();
        for (address, calls) in by_address {
            if calls.len() > 1 && Peers::has(&self.peers.batch, &address) {
                for chunk in batch_chunks(calls) {
                    pending.push(
                        self.clone()
                            .run_batch_here(address.clone(), chunk)
                            .boxed_local(),
                    );
                }
            } else if calls.len() > 1 && !Peers::has(&self.peers.known, &address) {
                pending.push(self.clone().run_one_by_one(address, calls).boxed_local());
            } else {
                for (i, payload) in calls {
                    let call = self.clone().run_here(address.clone(), payload);
                    pending.push(call.map(move |r| vec![(i, r)]).boxed_local());
                }
            }
        }
        let mut pending = pending.flat_map(futures::stream::iter);
        let mut group = Vec::new();
        let mut due: Option<tokio::time::Instant> = None;
        loop {
            let next = match due {
                None => pending.next().await,
                Some(at) => match tokio::time::timeout_at(at, pending.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        let _ = answers.send(std::mem::take(&mut group));
                        due = None;
                        continue;
                    }
                },
            };
            let Some(answer) = next else { break };
            group.push(answer);
            if due.is_none() {
                due = Some(tokio::time::Instant::now() + ANSWER_GROUP_WAIT);
            }
        }
        if !group.is_empty() {
            let _ = answers.send(group);
        }
    }
}

impl HttpExecutorClient {
    /// `POST {admin}/api/callback` with a batch of results: a JSON array (2.x–3.4), or the
    /// object `{"callbackList": [...]}` to an admin known to speak XXL-JOB 3.5. An admin that
    /// answers but refuses one shape is offered the other at once, and the shape it takes is
    /// remembered.
    pub fn callback(
        &self,
        admin: &str,
        items: Vec<HandleCallbackParam>,
    ) -> BoxFuture<'static, ReturnT> {
        let object = Peers::has(&self.peers.callback_objects, admin);
        let array = match encode(&items) {
            Ok(b) => b,
            Err(f) => return futures::future::ready(f).boxed(),
        };
        let (this, admin) = (self.clone(), admin.to_string());
        async move {
            let api = join_url(&admin, "api");
            let wrapped = || encode(&serde_json::json!({ "callbackList": &items }));
            let first = if object { wrapped() } else { Ok(array.clone()) };
            let r = match first {
                Ok(b) => this.send(&api, "callback", b).await,
                Err(f) => f,
            };
            // no answer at all: the other shape would fare no better
            let unanswered = r
                .msg
                .as_deref()
                .is_some_and(|m| m.starts_with("xxl-job remoting error("));
            if r.is_success() || unanswered {
                return r;
            }
            let second = if object { Ok(array) } else { wrapped() };
            let Ok(second) = second else { return r };
            let again = this.send(&api, "callback", second).await;
            if again.is_success() {
                tracing::info!(%admin, object = !object, "the admin takes the other callback shape");
                Peers::set(&this.peers.callback_objects, &admin, !object);
                return again;
            }
            r
        }
        .boxed()
    }

    /// `POST {admin}/api/registry` or `/api/registryRemove` (`which`).
    pub fn registry(
        &self,
        admin: &str,
        which: &str,
        param: RegistryParam,
    ) -> BoxFuture<'static, ReturnT> {
        self.call(&join_url(admin, "api"), which, &param)
    }
}

impl ExecutorClient for HttpExecutorClient {
    fn learn(&self, address: &str, kind: super::client::ExecutorKind) {
        use super::client::ExecutorKind;
        Peers::set(&self.peers.triggers, address, kind == ExecutorKind::Xxl35);
        Peers::set(&self.peers.batch, address, kind == ExecutorKind::Xjob);
        Peers::set(&self.peers.known, address, true);
    }

    /// `POST /run` (2.x–3.4), or `/trigger` to an executor known to speak XXL-JOB 3.5; an
    /// executor that does not serve the path is sent the other one at once, and the one it
    /// serves is remembered.
    fn run(&self, address: &str, param: TriggerParam) -> BoxFuture<'static, ReturnT> {
        let payload = match encode(&param) {
            Ok(b) => b,
            Err(f) => return futures::future::ready(f).boxed(),
        };
        let (this, address) = (self.clone(), address.to_string());
        let stopped = ReturnT::fail(format!(
            "xxl-job remoting error(client thread stopped), for url : {}",
            join_url(&address, "run")
        ));
        self.on_client_thread(move || this.run_here(address, payload), stopped)
    }

    /// The calls go to the client thread in one hop and are made there concurrently; their
    /// answers come back in groups, each at most [`ANSWER_GROUP_WAIT`] after its first answer
    /// (or when the last call answered), so the dispatching thread is woken a few times per
    /// batch instead of once per call.
    fn run_each(&self, calls: Vec<(String, TriggerParam)>) -> Answers {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Vec<(usize, ReturnT)>>();
        let mut ready = Vec::new();
        let mut encoded = Vec::with_capacity(calls.len());
        for (i, (address, param)) in calls.into_iter().enumerate() {
            match encode(&param) {
                Ok(b) => encoded.push((i, address, b)),
                Err(f) => ready.push((i, f)),
            }
        }
        if !ready.is_empty() {
            let _ = tx.send(ready);
        }
        let batch = Unsent {
            calls: encoded,
            answers: tx.clone(),
        };
        let this = self.clone();
        // a stopped thread drops the batch unsent, and the batch answers its calls itself
        self.thread.spawn_fn(move || {
            actix::spawn(this.run_all_here(batch));
        });
        drop(tx);
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|a| (a, rx)) })
            .boxed()
    }

    fn run_each_counted(&self, calls: Vec<(String, TriggerParam)>) -> (usize, Answers) {
        // as `run_all_here` will send them: an executor's share in `/runBatch` requests of up
        // to `RUN_BATCH_MAX` when it takes them (the 2 MiB cut is not counted), else a `/run`
        // per call
        let mut per_address: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::new();
        for (a, _) in &calls {
            *per_address.entry(a.as_str()).or_default() += 1;
        }
        let made = per_address
            .iter()
            .map(|(a, &n)| {
                if n > 1 && Peers::has(&self.peers.batch, a) {
                    n.div_ceil(super::server::RUN_BATCH_MAX)
                } else {
                    n
                }
            })
            .sum();
        (made, self.run_each(calls))
    }

    fn beat(&self, address: &str) -> BoxFuture<'static, ReturnT> {
        // 2.x admins send the JSON string literal "" as the body
        self.call(address, "beat", &"")
    }

    fn idle_beat(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.call(address, "idleBeat", &JobIdParam { job_id })
    }

    fn kill(&self, address: &str, job_id: i32) -> BoxFuture<'static, ReturnT> {
        self.call(address, "kill", &JobIdParam { job_id })
    }

    fn with_token(&self, token: &str) -> Option<Arc<dyn ExecutorClient>> {
        let mut c = self.clone();
        c.cred.token = Some(Arc::from(token));
        Some(Arc::new(c))
    }

    fn with_app(&self, app_name: &str) -> Option<Arc<dyn ExecutorClient>> {
        Some(Arc::new(self.clone().with_app_name(app_name)))
    }

    fn log(&self, address: &str, param: LogParam) -> BoxFuture<'static, ReturnT<LogResult>> {
        let from = param.from_line_num;
        self.call_with(address, "log", &param, move |url, body, cred, timeout| {
            post_log(url, body, cred, timeout, from)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch the client thread never ran answers every call with the remoting error naming
    /// its URL; a batch whose calls were taken to be made answers nothing itself.
    #[test]
    fn a_batch_dropped_unsent_answers_each_call_with_the_remoting_error() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let call = |i: usize, a: &str| (i, a.to_string(), Bytes::from_static(b"{}"));
        drop(Unsent {
            calls: vec![call(3, "http://a:1"), call(7, "http://b:2/")],
            answers: tx.clone(),
        });
        let failed = rx.try_recv().unwrap();
        let got: Vec<(usize, i32, String)> = failed
            .into_iter()
            .map(|(i, r)| (i, r.code, r.msg.unwrap_or_default()))
            .collect();
        let text =
            |u: &str| format!("xxl-job remoting error(client thread stopped), for url : {u}");
        assert_eq!(
            got,
            vec![
                (3, 500, text("http://a:1/run")),
                (7, 500, text("http://b:2/run")),
            ]
        );
        let mut taken = Unsent {
            calls: vec![call(1, "http://a:1")],
            answers: tx,
        };
        let calls = std::mem::take(&mut taken.calls);
        drop(taken);
        assert_eq!(calls.len(), 1);
        assert!(
            rx.try_recv().is_err(),
            "nothing answered for calls being made"
        );
    }
}
