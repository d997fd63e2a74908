//! Built-in handlers every executor of this project offers (`xjob serve`'s in-process executor
//! and `xjob executor`), so a job can call a URL or run a command without an executor of its
//! own:
//!
//! - `httpJobHandler`: one HTTP call described by a JSON param (XXL-JOB 3.3's keys: `url`,
//!   `method`, `contentType`, `headers`, `cookies`, `timeout` ms, `data`, `form`, `auth`). Only
//!   URLs under a prefix of `executor.http_allowlist` are called (an empty list refuses all:
//!   the guard against XXL-JOB's CVE-2025-7787, server-side request forgery through this
//!   handler); redirects are followed only while they stay in the list. A status other than
//!   2xx, a timeout or a refused URL fails the run.
//! - `commandJobHandler`: the param is a command line, split like a shell does (quotes,
//!   backslashes; no shell runs it: no pipes, globs or variables), run with the script
//!   machinery (own process group, output to the run log, killed on timeout or kill). Off
//!   unless `executor.scripts_enabled`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use awc::http::Method;
use awc::http::header::{self, HeaderName, HeaderValue};
use serde::Deserialize;
use url::Url;

use super::http_client::{HttpAnswer, HttpCall};
use super::{Handler, HandlerRegistry, HttpExecutorClient, JobContext, JobResult};
use crate::allowlist::Allowlist;
use crate::config::ExecutorConfig;
use crate::error::Result;

/// The HTTP handler's name.
pub const HTTP_HANDLER: &str = "httpJobHandler";
/// The command handler's name.
pub const COMMAND_HANDLER: &str = "commandJobHandler";

/// A call's timeout when the param names none.
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The longest timeout a param may ask for (10 minutes; the job's own timeout still applies).
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Redirects followed per run.
const MAX_REDIRECTS: usize = 5;
/// Bytes of a response body read and logged.
const BODY_LOGGED: usize = 4096;
/// Headers a job's param may not set: `Host` (the URL names the host the allowlist checked;
/// a different `Host` would reach another virtual host behind it) and the hop-by-hop and
/// framing headers the client owns (RFC 9110 §7.6.1).
const REFUSED_HEADERS: [&str; 11] = [
    "Host",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Content-Length",
];

/// Adds the built-in handlers to `registry` (a name the application registered itself keeps
/// its own handler). `http` is the node's HTTP client.
pub(crate) fn register(
    registry: &mut HandlerRegistry,
    cfg: &ExecutorConfig,
    http: HttpExecutorClient,
) -> Result<()> {
    let allow = Allowlist::parse("executor.http_allowlist", &cfg.http_allowlist)?;
    if registry.get(HTTP_HANDLER).is_none() {
        registry.register(
            HTTP_HANDLER,
            Handler::new(move |ctx| http_job(ctx, allow.clone(), http.clone())),
        )?;
    }
    if registry.get(COMMAND_HANDLER).is_none() {
        let enabled = cfg.scripts_enabled;
        registry.register(
            COMMAND_HANDLER,
            Handler::new(move |ctx| command_job(ctx, enabled)),
        )?;
    }
    Ok(())
}

/// `httpJobHandler`'s param (XXL-JOB 3.3's keys).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpParam {
    url: String,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    cookies: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<u64>,
    /// The body: a string as it is, any other JSON value as its JSON text.
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(default)]
    form: BTreeMap<String, String>,
    #[serde(default)]
    auth: Option<String>,
}

/// The first request of a run, checked and built from its param.
fn http_call(param: &str, allow: &Allowlist) -> std::result::Result<HttpCall, String> {
    let param = param.trim();
    if param.is_empty() {
        return Err(format!(
            "{HTTP_HANDLER} needs a JSON param, e.g. {{\"url\":\"https://example.com/hook\",\"method\":\"POST\",\"data\":\"...\"}}"
        ));
    }
    let p: HttpParam = serde_json::from_str(param)
        .map_err(|e| format!("{HTTP_HANDLER}: the param is not valid: {e}"))?;
    let url = checked_url(&p.url, allow)?;
    if p.data.is_some() && !p.form.is_empty() {
        return Err(format!("{HTTP_HANDLER}: give `data` or `form`, not both"));
    }
    let has_body = p.data.is_some() || !p.form.is_empty();
    let method = match p.method.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        None if has_body => Method::POST,
        None => Method::GET,
        Some(m) => match m.to_ascii_uppercase().as_str() {
            "GET" => Method::GET,
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "DELETE" => Method::DELETE,
            "PATCH" => Method::PATCH,
            "HEAD" => Method::HEAD,
            _ => {
                return Err(format!(
                    "{HTTP_HANDLER}: method `{m}` is not one of GET, POST, PUT, DELETE, PATCH, HEAD"
                ));
            }
        },
    };
    let mut headers = Vec::new();
    let mut add = |name: &str, value: &str| -> std::result::Result<(), String> {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("{HTTP_HANDLER}: `{name}` is not a valid header name"))?;
        let v = HeaderValue::from_str(value)
            .map_err(|_| format!("{HTTP_HANDLER}: the value of header `{name}` is not valid"))?;
        headers.push((n, v));
        Ok(())
    };
    let (body, default_type) = match (&p.data, p.form.is_empty()) {
        (Some(serde_json::Value::String(s)), _) => (s.clone().into_bytes(), "application/json"),
        (Some(v), _) => (v.to_string().into_bytes(), "application/json"),
        (None, false) => {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.extend_pairs(&p.form);
            (
                form.finish().into_bytes(),
                "application/x-www-form-urlencoded",
            )
        }
        (None, true) => (Vec::new(), ""),
    };
    match p
        .content_type
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(t) => add("Content-Type", t)?,
        None if !body.is_empty() => add("Content-Type", default_type)?,
        None => {}
    }
    for (name, value) in &p.headers {
        if let Some(refused) = REFUSED_HEADERS
            .iter()
            .find(|h| h.eq_ignore_ascii_case(name.trim()))
        {
            return Err(format!(
                "{HTTP_HANDLER}: header `{refused}` may not be set by a job (the client sets it \
                 from the URL and the body)"
            ));
        }
        add(name, value)?;
    }
    if !p.cookies.is_empty() {
        let cookie: Vec<String> = p.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        add("Cookie", &cookie.join("; "))?;
    }
    if let Some(auth) = p.auth.as_deref().filter(|a| !a.trim().is_empty()) {
        add("Authorization", auth)?;
    }
    let timeout = p.timeout.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout == 0 || timeout > MAX_TIMEOUT_MS {
        return Err(format!(
            "{HTTP_HANDLER}: timeout must be 1..={MAX_TIMEOUT_MS} ms, got {timeout}"
        ));
    }
    Ok(HttpCall {
        method,
        url: url.to_string(),
        headers,
        body,
        timeout: Duration::from_millis(timeout),
    })
}

/// `raw` parsed, an `http(s)` URL without user info, under the allowlist.
fn checked_url(raw: &str, allow: &Allowlist) -> std::result::Result<Url, String> {
    let url = Url::parse(raw.trim())
        .map_err(|e| format!("{HTTP_HANDLER}: `{raw}` is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "{HTTP_HANDLER}: only http:// and https:// URLs are called, not `{raw}`"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{HTTP_HANDLER}: URL refused: user info in a URL is not allowed (use `auth`)"
        ));
    }
    if allow.is_empty() {
        return Err(format!(
            "{HTTP_HANDLER}: URL refused: {url} — executor.http_allowlist is empty, so no URL \
             may be called; add a prefix such as https://api.example.com/ to it \
             (XJOB_EXECUTOR__HTTP_ALLOWLIST, comma-separated)"
        ));
    }
    if !allow.allows(&url) {
        return Err(format!(
            "{HTTP_HANDLER}: URL refused: {url} is not under a prefix of executor.http_allowlist"
        ));
    }
    Ok(url)
}

async fn http_job(ctx: JobContext, allow: Allowlist, http: HttpExecutorClient) -> JobResult {
    let mut call = http_call(&ctx.param, &allow).map_err(anyhow::Error::msg)?;
    for hop in 0..=MAX_REDIRECTS {
        ctx.log(format!("{} {}", call.method, call.url));
        let keep = if call.method == Method::HEAD {
            0
        } else {
            BODY_LOGGED
        };
        let answer = http.request(call.clone(), keep).await.map_err(|e| {
            anyhow::anyhow!("{HTTP_HANDLER}: {} {} failed: {e}", call.method, call.url)
        })?;
        ctx.log(format!("HTTP {}", answer.status));
        match (answer.status, answer.location.as_deref()) {
            (301 | 302 | 303 | 307 | 308, Some(location)) => {
                if hop == MAX_REDIRECTS {
                    anyhow::bail!("{HTTP_HANDLER}: more than {MAX_REDIRECTS} redirects");
                }
                call = redirected(call, answer.status, location, &allow)?;
                ctx.log(format!("redirected to {}", call.url));
            }
            _ => return finish(&ctx, &call, &answer),
        }
    }
    unreachable!("the loop returns or fails on its last hop")
}

/// The request a redirect asks for: its URL must be allowed too; 303 (and 301/302 after
/// anything but GET or HEAD) turns into a GET without a body, as browsers do.
fn redirected(
    mut call: HttpCall,
    status: u16,
    location: &str,
    allow: &Allowlist,
) -> anyhow::Result<HttpCall> {
    let from = Url::parse(&call.url)?;
    let next = from
        .join(location)
        .map_err(|e| anyhow::anyhow!("{HTTP_HANDLER}: redirect to `{location}`: {e}"))?;
    let next = checked_url(next.as_str(), allow)
        .map_err(|e| anyhow::anyhow!("redirect not followed: {e}"))?;
    let to_get = status == 303
        || (matches!(status, 301 | 302) && !matches!(call.method, Method::GET | Method::HEAD));
    if to_get {
        call.method = Method::GET;
        call.body.clear();
        call.headers.retain(|(n, _)| n != header::CONTENT_TYPE);
    }
    if next.origin() != from.origin() {
        // every header the job wrote (credentials, cookies, API keys under any name) is for the
        // origin it named; only the body's own type goes on with a body
        let keep_type = !call.body.is_empty();
        call.headers
            .retain(|(n, _)| keep_type && n == header::CONTENT_TYPE);
    }
    call.url = next.to_string();
    Ok(call)
}

/// Logs the start of the body; a 2xx status succeeds, any other fails naming it.
fn finish(ctx: &JobContext, call: &HttpCall, answer: &HttpAnswer) -> JobResult {
    if !answer.body.is_empty() {
        let text = String::from_utf8_lossy(&answer.body);
        let cut = if answer.more { " … (body cut)" } else { "" };
        ctx.log(format!("response body: {text}{cut}"));
    }
    if (200..300).contains(&answer.status) {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{HTTP_HANDLER}: {} {} answered HTTP {}",
            call.method,
            call.url,
            answer.status
        ))
    }
}

/// The words of a command line, split like a POSIX shell splits them (no expansion).
fn split_command(line: &str) -> std::result::Result<Vec<OsString>, String> {
    let words = shlex::split(line.trim())
        .ok_or_else(|| format!("{COMMAND_HANDLER}: unbalanced quotes in `{}`", line.trim()))?;
    if words.is_empty() {
        return Err(format!(
            "{COMMAND_HANDLER} needs a command line as its param, e.g. `ls -l /tmp`"
        ));
    }
    Ok(words.into_iter().map(OsString::from).collect())
}

async fn command_job(ctx: JobContext, enabled: bool) -> JobResult {
    if !enabled {
        anyhow::bail!(
            "{COMMAND_HANDLER} is off: commands (like GLUE scripts) run only with \
             executor.scripts_enabled = true (XJOB_EXECUTOR__SCRIPTS_ENABLED)"
        );
    }
    let words = split_command(&ctx.param).map_err(anyhow::Error::msg)?;
    ctx.log(format!("command: {}", ctx.param.trim()));
    let program = words[0].to_string_lossy().into_owned();
    super::script::run_process("command", &program, &words[1..], ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        Allowlist::parse("executor.http_allowlist", &entries).expect("valid list")
    }

    /// A param becomes one request: method defaults, body and content type from `data` or
    /// `form`, headers, cookies and auth; bad params are clear errors.
    #[test]
    fn a_param_becomes_a_request() {
        let l = list(&["https://h.example/"]);
        let c = http_call(
            r#"{"url":"https://h.example/a","data":{"k":1},"headers":{"X-A":"1"},"cookies":{"s":"2","t":"3"},"auth":"Bearer z","timeout":500}"#,
            &l,
        )
        .expect("call");
        assert_eq!(
            (c.method.clone(), c.url.as_str()),
            (Method::POST, "https://h.example/a")
        );
        assert_eq!(c.body, br#"{"k":1}"#);
        assert_eq!(c.timeout, Duration::from_millis(500));
        let h: Vec<(String, String)> = c
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().expect("ascii").to_string()))
            .collect();
        for want in [
            ("content-type", "application/json"),
            ("x-a", "1"),
            ("cookie", "s=2; t=3"),
            ("authorization", "Bearer z"),
        ] {
            assert!(h.contains(&(want.0.into(), want.1.into())), "{h:?}");
        }
        let form = http_call(
            r#"{"url":"https://h.example/f","method":"put","form":{"a b":"c&d"}}"#,
            &l,
        )
        .expect("form");
        assert_eq!(form.method, Method::PUT);
        assert_eq!(form.body, b"a+b=c%26d");
        let get = http_call(r#"{"url":"https://h.example/"}"#, &l).expect("get");
        assert_eq!((get.method, get.body.len()), (Method::GET, 0));
        for (param, says) in [
            ("", "needs a JSON param"),
            ("{", "not valid"),
            (r#"{"url":"https://h.example/","method":"TRACE"}"#, "TRACE"),
            (
                r#"{"url":"https://h.example/","data":"x","form":{"a":"b"}}"#,
                "not both",
            ),
            (r#"{"url":"https://other.example/"}"#, "not under a prefix"),
            (r#"{"url":"file:///etc/passwd"}"#, "only http"),
            (
                r#"{"url":"https://h.example/","headers":{"bad name":"x"}}"#,
                "header name",
            ),
            (r#"{"url":"https://h.example/","timeout":0}"#, "timeout"),
            (
                r#"{"url":"https://h.example/","headers":{"host":"internal.example"}}"#,
                "`Host` may not be set",
            ),
            (
                r#"{"url":"https://h.example/","headers":{" Transfer-Encoding":"chunked"}}"#,
                "`Transfer-Encoding` may not be set",
            ),
            (
                r#"{"url":"https://h.example/","headers":{"connection":"close"}}"#,
                "`Connection` may not be set",
            ),
            (r#"{"url":"https://h.example/","nope":1}"#, "nope"),
        ] {
            let e = http_call(param, &l).unwrap_err();
            assert!(e.contains(says), "{param}: {e}");
        }
        let e = http_call(r#"{"url":"https://h.example/"}"#, &Allowlist::default()).unwrap_err();
        assert!(e.contains("XJOB_EXECUTOR__HTTP_ALLOWLIST"), "{e}");
    }

    /// Redirects resolve against the current URL, stay in the list, turn into GET where
    /// browsers do, and drop credentials when they leave the origin.
    #[test]
    fn redirects_stay_in_the_list() {
        let l = list(&["https://h.example/", "https://g.example/ok/"]);
        let first = http_call(
            r#"{"url":"https://h.example/a/b","data":"x","auth":"Bearer z"}"#,
            &l,
        )
        .expect("call");
        let same = redirected(first.clone(), 307, "../c", &l).expect("relative");
        assert_eq!(
            (same.url.as_str(), same.method.clone()),
            ("https://h.example/c", Method::POST)
        );
        assert!(same.headers.iter().any(|(n, _)| n == header::AUTHORIZATION));
        let other = redirected(first.clone(), 303, "https://g.example/ok/x", &l).expect("other");
        assert_eq!((other.method, other.body.len()), (Method::GET, 0));
        assert!(
            !other
                .headers
                .iter()
                .any(|(n, _)| n == header::AUTHORIZATION)
        );
        // a header of any name the job set stays with its origin; a kept body keeps its type
        let keyed = http_call(
            r#"{"url":"https://h.example/a","data":"x","headers":{"X-Api-Key":"k","Private-Token":"t"},"cookies":{"s":"1"}}"#,
            &l,
        )
        .expect("call");
        let moved = redirected(keyed.clone(), 307, "https://g.example/ok/y", &l).expect("307");
        let names: Vec<String> = moved.headers.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(
            names,
            ["content-type"],
            "only the body's type crosses origins"
        );
        assert_eq!(moved.body, b"x");
        let same = redirected(keyed, 307, "/b", &l).expect("same origin");
        assert_eq!(same.headers.len(), 4, "same origin keeps every header");
        let e = redirected(first, 302, "http://169.254.169.254/latest", &l).unwrap_err();
        assert!(e.to_string().contains("redirect not followed"), "{e}");
    }

    /// Command lines split like a shell; unbalanced quotes and empty lines are errors.
    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(
            split_command(r#" echo "a b" 'c d' e\ f "#).expect("split"),
            ["echo", "a b", "c d", "e f"].map(OsString::from)
        );
        assert!(
            split_command("echo \"open")
                .unwrap_err()
                .contains("unbalanced")
        );
        assert!(
            split_command("  ")
                .unwrap_err()
                .contains("needs a command line")
        );
    }
}
