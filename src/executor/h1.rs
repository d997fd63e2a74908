//! The HTTP/1.1 exchange of XXL-JOB's small JSON calls (`/run`, `/beat`, `/idleBeat`, `/kill`,
//! `/api/callback`, `/api/registry`) to `http://` addresses, on the client thread.
//!
//! One `POST` written in one `write`, the answer parsed with `httparse` (actix's own parser),
//! kept-alive connections pooled per `host:port`. At 5,000 remote fires/s the general client
//! spent about as much of the client thread in its own request, pool and body machinery as the
//! kernel spent on the loopback sockets (BENCHMARKS.md, 2026-11-24, 74d9bc7); this path costs a
//! fraction of it. Anything else (`https://`, user info in the address, `/log`'s streamed
//! pages, webhooks, `httpJobHandler`) stays on the general client.
//!
//! A request is never sent twice: a pooled connection is checked for a close or stray bytes
//! before it is reused, and a failure after the request was written is the call's failure
//! (XXL-JOB's fail-retry decides), as with any other client.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A pooled connection unused this long is closed: below the shortest keep-alive of the usual
/// executor servers (actix-web 5 s; netty, Go and aiohttp keep them longer), so a pooled
/// connection is not one the executor is closing at that moment.
const IDLE_FOR: Duration = Duration::from_secs(4);
/// Idle connections kept per `host:port` at most (a burst's connections beyond it close).
const MAX_IDLE: usize = 256;
/// An answer's head (status line and headers) is at most this long.
const MAX_HEAD: usize = 64 * 1024;
/// Headers read per answer at most.
const MAX_HEADERS: usize = 64;
/// A request head's bytes besides its path, host, header names and values: the request
/// line's words, the content type, separators and a 20-digit length (119).
const HEAD_FIXED: usize = 128;

/// An `http://` URL split for the exchange.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target<'a> {
    /// `host:port` as written (the `Host` header), the pool's key.
    pub authority: &'a str,
    /// The request target: `/` and the rest of the URL.
    pub path: &'a str,
}

/// Splits an `http://` URL this path serves; `None` for any other (the general client's).
pub(super) fn target(url: &str) -> Option<Target<'_>> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        Some(_) => return None,
        None => (rest, "/"),
    };
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_graphic() && b != b'#');
    if authority.is_empty() || authority.contains('@') || !plain(authority) || !plain(path) {
        return None;
    }
    Some(Target { authority, path })
}

/// `authority` with the default port when it names none.
fn socket_address(authority: &str) -> String {
    let has_port = match authority.rfind(']') {
        // [v6]:port
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority.to_string()
    } else {
        format!("{authority}:80")
    }
}

/// A connection with the bytes read past the last answer (none when pooled).
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    idle_since: Instant,
}

/// Idle connections per `host:port`, and when they were last swept.
struct Pool {
    idle: foldhash::HashMap<String, Vec<Conn>>,
    swept: Instant,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool {
        idle: foldhash::HashMap::default(),
        swept: Instant::now(),
    });
}

/// A pooled connection to `authority` that is still open and quiet, if any.
fn take_idle(authority: &str) -> Option<Conn> {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let now = Instant::now();
        if now.duration_since(p.swept) >= IDLE_FOR {
            p.swept = now;
            p.idle.retain(|_, conns| {
                conns.retain(|c| now.duration_since(c.idle_since) < IDLE_FOR);
                !conns.is_empty()
            });
        }
        let conns = p.idle.get_mut(authority)?;
        while let Some(c) = conns.pop() {
            if now.duration_since(c.idle_since) < IDLE_FOR && quiet(&c.stream) {
                return Some(c);
            }
        }
        None
    })
}

/// An idle connection has nothing to read: a close (EOF), an error or stray bytes make it
/// unusable.
fn quiet(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

fn put_idle(authority: &str, mut conn: Conn) {
    conn.idle_since = Instant::now();
    conn.buf.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        let conns = match p.idle.get_mut(authority) {
            Some(c) => c,
            None => p.idle.entry(authority.to_string()).or_default(),
        };
        if conns.len() < MAX_IDLE {
            conns.push(conn);
        }
    });
}

/// An answer: its status and body.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// POSTs the JSON `body` to `t` (with the access token when given) and reads the answer, whose
/// body may be `cap` bytes at most; `timeout` bounds the whole exchange, connecting included.
/// The error is the reason, for XXL-JOB's "remoting error(…)" text.
pub(super) async fn post(
    t: &Target<'_>,
    body: &[u8],
    token: Option<&str>,
    app: Option<&str>,
    timeout: Duration,
    cap: usize,
) -> Result<Answer, String> {
    let request = build_request(t, body, token, app)?;
    match tokio::time::timeout(timeout, exchange(t.authority, &request, cap)).await {
        Ok(answer) => answer,
        Err(_) => Err("Timeout while waiting for response".into()),
    }
}

/// The request (head and `body`) in one buffer sized up front: a head with an access token
/// outgrew the fixed 192 bytes it was given and copied the request once more per call (1.5 %
/// of `xjob serve`'s CPU at 5,000 remote fires/s, BENCHMARKS.md, 2026-11-28, dac23a6).
fn build_request(
    t: &Target<'_>,
    body: &[u8],
    token: Option<&str>,
    app: Option<&str>,
) -> Result<Vec<u8>, String> {
    let mut request = Vec::with_capacity(request_len_at_most(t, body.len(), token, app));
    write_head(&mut request, t, body.len(), token, app)?;
    request.extend_from_slice(body);
    Ok(request)
}

/// The longest a request to `t` with a body of `body_len` bytes can be.
fn request_len_at_most(
    t: &Target<'_>,
    body_len: usize,
    token: Option<&str>,
    app: Option<&str>,
) -> usize {
    HEAD_FIXED
        + t.path.len()
        + t.authority.len()
        + crate::token::TOKEN_HEADER.len()
        + token.map_or(0, str::len)
        + crate::token::APP_HEADER.len()
        + app.map_or(0, str::len)
        + body_len
}

/// The request's head, with the access token and the app name (XXL-JOB 3.5's
/// `XXL-JOB-APPNAME`) when given; one that is no valid header value is refused.
fn write_head(
    out: &mut Vec<u8>,
    t: &Target<'_>,
    length: usize,
    token: Option<&str>,
    app: Option<&str>,
) -> Result<(), String> {
    use std::io::Write;
    let _ = write!(
        out,
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json;charset=UTF-8\r\n",
        t.path, t.authority
    );
    for (name, value, what) in [
        (crate::token::TOKEN_HEADER, token, "the access token"),
        (crate::token::APP_HEADER, app, "the app name"),
    ] {
        let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        if value.bytes().any(|b| b.is_ascii_control()) {
            return Err(format!("{what} holds a control character"));
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let _ = write!(out, "Content-Length: {length}\r\n\r\n");
    Ok(())
}

async fn exchange(authority: &str, request: &[u8], cap: usize) -> Result<Answer, String> {
    let mut conn = match take_idle(authority) {
        Some(c) => c,
        None => {
            let stream = TcpStream::connect(socket_address(authority))
                .await
                .map_err(|e| format!("Failed to connect to host: {e}"))?;
            let _ = stream.set_nodelay(true);
            Conn {
                stream,
                buf: Vec::with_capacity(512),
                idle_since: Instant::now(),
            }
        }
    };
    conn.stream
        .write_all(request)
        .await
        .map_err(|e| format!("Failed to send the request: {e}"))?;
    let (answer, reuse) = read_answer(&mut conn, cap).await?;
    if reuse {
        put_idle(authority, conn);
    }
    Ok(answer)
}

/// Reads more of the answer into the buffer; `false` at the end of the stream.
async fn fill(conn: &mut Conn) -> Result<bool, String> {
    if conn.buf.capacity() - conn.buf.len() < 256 {
        conn.buf.reserve(conn.buf.capacity().max(512));
    }
    let n = conn
        .stream
        .read_buf(&mut conn.buf)
        .await
        .map_err(|e| format!("Failed to read the answer: {e}"))?;
    Ok(n > 0)
}

/// How an answer's body ends.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Framing {
    Length(usize),
    Chunked,
    /// At the end of the stream (the connection is not reused).
    Close,
}

/// An answer's head: status, framing, whether the connection may serve another request, and
/// the head's length in bytes.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
    len: usize,
}

/// Parses the head at the start of `buf`; `Ok(None)` until it is complete.
fn parse_head(buf: &[u8], cap: usize) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Err(format!("the answer's head is longer than {MAX_HEAD} bytes"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("invalid answer: {e}")),
    };
    let status = r.code.unwrap_or(0);
    let mut keep_alive = r.version == Some(1);
    let (mut length, mut chunked, mut encoded) = (None, false, false);
    for h in r.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            // digits only: `+5` or `5 ` parse as numbers in Rust, not in HTTP
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("invalid Content-Length `{value}`"));
            }
            let n: usize = value
                .parse()
                .map_err(|_| format!("invalid Content-Length `{value}`"))?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting Content-Length headers".into());
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") && r.version == Some(0) {
                    keep_alive = true;
                }
            }
        }
    }
    if status == 101 || (encoded && length.is_some()) {
        // a switched protocol is no longer HTTP/1.1; an answer framed two ways (a way to
        // smuggle a second answer) is read by its Transfer-Encoding, and its connection closed
        keep_alive = false;
    }
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if encoded {
        // encoded, but not chunked last: the body ends with the connection (RFC 9112 §6.3)
        keep_alive = false;
        Framing::Close
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        keep_alive = false;
        Framing::Close
    };
    if let Framing::Length(n) = framing
        && n > cap
    {
        return Err(format!("the answer is longer than {cap} bytes"));
    }
    Ok(Some(Head {
        status,
        framing,
        keep_alive,
        len,
    }))
}

/// Reads one answer (skipping interim `1xx` ones); answers whether the connection can be
/// reused: kept alive, the body read to its end and nothing after it.
async fn read_answer(conn: &mut Conn, cap: usize) -> Result<(Answer, bool), String> {
    let head = loop {
        match parse_head(&conn.buf, cap)? {
            Some(h) if (100..200).contains(&h.status) && h.status != 101 => {
                conn.buf.drain(..h.len);
            }
            Some(h) => break h,
            None => {
                if !fill(conn).await? {
                    return Err("the connection closed before the answer".into());
                }
            }
        }
    };
    conn.buf.drain(..head.len);
    let (body, clean) = match head.framing {
        Framing::Length(n) => {
            while conn.buf.len() < n {
                if !fill(conn).await? {
                    return Err("the connection closed in the answer's body".into());
                }
            }
            let body: Vec<u8> = conn.buf.drain(..n).collect();
            (body, conn.buf.is_empty())
        }
        Framing::Chunked => {
            let body = read_chunked(conn, cap).await?;
            (body, conn.buf.is_empty())
        }
        Framing::Close => {
            while fill(conn).await? {
                if conn.buf.len() > cap {
                    return Err(format!("the answer is longer than {cap} bytes"));
                }
            }
            (std::mem::take(&mut conn.buf), false)
        }
    };
    Ok((
        Answer {
            status: head.status,
            body,
        },
        head.keep_alive && clean,
    ))
}

/// One step of a chunked body at the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
enum Chunk {
    /// More bytes are needed.
    Partial,
    /// A chunk of data: where it starts, its length, and the length of the whole chunk
    /// (size line, data and CRLF).
    Data {
        start: usize,
        len: usize,
        whole: usize,
    },
    /// The last chunk and its trailers: their length.
    End(usize),
}

fn next_chunk(buf: &[u8]) -> Result<Chunk, String> {
    let (start, size) = match httparse::parse_chunk_size(buf) {
        Ok(httparse::Status::Complete(s)) => s,
        Ok(httparse::Status::Partial) => return Ok(Chunk::Partial),
        Err(_) => return Err("invalid chunk size in the answer".into()),
    };
    if size == 0 {
        // trailers: lines up to an empty one
        let mut at = start;
        loop {
            let Some(eol) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
                return Ok(Chunk::Partial);
            };
            if eol == 0 {
                return Ok(Chunk::End(at + 2));
            }
            at += eol + 2;
        }
    }
    let len = usize::try_from(size).map_err(|_| "chunk too large".to_string())?;
    let whole = start
        .checked_add(len)
        .and_then(|n| n.checked_add(2))
        .ok_or("chunk too large")?;
    if buf.len() < whole {
        return Ok(Chunk::Partial);
    }
    if &buf[whole - 2..whole] != b"\r\n" {
        return Err("a chunk of the answer does not end with CRLF".into());
    }
    Ok(Chunk::Data { start, len, whole })
}

async fn read_chunked(conn: &mut Conn, cap: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match next_chunk(&conn.buf)? {
            Chunk::Data { start, len, whole } => {
                if body.len() + len > cap {
                    return Err(format!("the answer is longer than {cap} bytes"));
                }
                body.extend_from_slice(&conn.buf[start..start + len]);
                conn.buf.drain(..whole);
            }
            Chunk::End(n) => {
                conn.buf.drain(..n);
                return Ok(body);
            }
            Chunk::Partial => {
                // a chunk still being read may not outgrow the cap either
                if conn.buf.len() > cap + MAX_HEAD {
                    return Err(format!("the answer is longer than {cap} bytes"));
                }
                if !fill(conn).await? {
                    return Err("the connection closed in the answer's body".into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_take_this_path() {
        assert_eq!(
            target("http://127.0.0.1:9999/run"),
            Some(Target {
                authority: "127.0.0.1:9999",
                path: "/run"
            })
        );
        assert_eq!(
            target("http://exec.local/xxl/api/callback"),
            Some(Target {
                authority: "exec.local",
                path: "/xxl/api/callback"
            })
        );
        assert_eq!(
            target("http://[::1]:8081"),
            Some(Target {
                authority: "[::1]:8081",
                path: "/"
            })
        );
        for other in [
            "https://127.0.0.1:9999/run",
            "http://user:pw@host/run",
            "http:///run",
            "http://host:1/a b",
            "http://host?x=1",
            "HTTP://host/run",
        ] {
            assert_eq!(target(other), None, "{other}");
        }
    }

    #[test]
    fn the_default_port_is_added_only_when_none_is_named() {
        assert_eq!(socket_address("host"), "host:80");
        assert_eq!(socket_address("host:9999"), "host:9999");
        assert_eq!(socket_address("[::1]"), "[::1]:80");
        assert_eq!(socket_address("[::1]:81"), "[::1]:81");
    }

    #[test]
    fn a_request_fits_the_buffer_it_was_sized_for() {
        let long = "9".repeat(300);
        let path = format!("http://executor.example:65535/{long}");
        for url in ["http://h/", "http://10.0.0.1:9999/run", path.as_str()] {
            let t = target(url).unwrap();
            for (token, app) in [
                (None, None),
                (Some("t"), None),
                (
                    Some("a-64-character-access-token-0123456789abcdef0123456789abcdef01"),
                    Some("demo-app"),
                ),
                (Some(long.as_str()), Some(long.as_str())),
            ] {
                for body in [&b""[..], b"{}", long.as_bytes()] {
                    let request = build_request(&t, body, token, app).unwrap();
                    let mut head = Vec::new();
                    write_head(&mut head, &t, body.len(), token, app).unwrap();
                    assert_eq!(request, [head.as_slice(), body].concat(), "{url}");
                    // sized up front: writing it never grew the buffer (a grown one has at
                    // least twice the first capacity it outgrew)
                    let sized = request_len_at_most(&t, body.len(), token, app);
                    assert_eq!(request.capacity(), sized, "{url}");
                }
            }
        }
        // the fixed part of the longest head: every word but path, host and header values
        let t = target("http://h/").unwrap();
        let mut head = Vec::new();
        write_head(&mut head, &t, usize::MAX, Some("v"), Some("v")).unwrap();
        let fixed = head.len()
            - "/".len()
            - "h".len()
            - 2 * "v".len()
            - crate::token::TOKEN_HEADER.len()
            - crate::token::APP_HEADER.len();
        assert!(fixed <= HEAD_FIXED, "{fixed}");
    }

    #[test]
    fn the_request_head_names_the_host_token_and_length() {
        let t = target("http://10.0.0.1:9999/run").unwrap();
        let mut out = Vec::new();
        write_head(&mut out, &t, 12, Some("s3cret"), Some("demo-app")).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /run HTTP/1.1\r\nHost: 10.0.0.1:9999\r\n\
             Content-Type: application/json;charset=UTF-8\r\n\
             XXL-JOB-ACCESS-TOKEN: s3cret\r\nXXL-JOB-APPNAME: demo-app\r\n\
             Content-Length: 12\r\n\r\n"
        );
        let mut out = Vec::new();
        write_head(&mut out, &t, 0, Some("  "), None).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("ACCESS-TOKEN"));
        let mut out = Vec::new();
        assert!(write_head(&mut out, &t, 0, Some("a\r\nX-Evil: 1"), None).is_err());
        assert!(write_head(&mut out, &t, 0, None, Some("a\nX-Evil: 1")).is_err());
    }

    #[test]
    fn heads_give_status_framing_and_reuse() {
        let h = |s: &str| parse_head(s.as_bytes(), 1024);
        let head = h("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!(
            head,
            Head {
                status: 200,
                framing: Framing::Length(5),
                keep_alive: true,
                len: 38
            }
        );
        let head = h("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, Framing::Chunked);
        let head = h("HTTP/1.1 500 Oops\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((head.status, head.keep_alive), (500, false));
        let head = h("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!head.keep_alive);
        let head = h("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(head.keep_alive);
        let head = h("HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((head.framing, head.keep_alive), (Framing::Close, false));
        let head = h("HTTP/1.1 204 No Content\r\n\r\n").unwrap().unwrap();
        assert_eq!(head.framing, Framing::Length(0));
        assert_eq!(h("HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        assert!(h("HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n").is_err());
        assert!(h("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(h("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").is_err());
        assert!(h("garbage\r\n\r\n").is_err());
        // what a pooled connection must never carry on from, and lengths HTTP does not write
        let head = h("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((head.status, head.keep_alive), (101, false));
        let head = h("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((head.framing, head.keep_alive), (Framing::Chunked, false));
        for bad in ["+5", "5 5", "-1", "0x5", ""] {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
            assert!(h(&head).is_err(), "Content-Length: {bad}");
        }
        let head = h("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((head.framing, head.keep_alive), (Framing::Close, false));
        let head = h("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((head.framing, head.keep_alive), (Framing::Close, false));
        let long = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD + 1));
        assert!(h(&long).is_err());
    }

    #[test]
    fn chunks_are_read_step_by_step() {
        assert_eq!(next_chunk(b"5\r\nhel").unwrap(), Chunk::Partial);
        assert_eq!(
            next_chunk(b"5\r\nhello\r\n0\r\n\r\n").unwrap(),
            Chunk::Data {
                start: 3,
                len: 5,
                whole: 10
            }
        );
        assert_eq!(next_chunk(b"0\r\n\r\n").unwrap(), Chunk::End(5));
        assert_eq!(
            next_chunk(b"0\r\nX-T: 1\r\n\r\nrest").unwrap(),
            Chunk::End(13)
        );
        assert_eq!(next_chunk(b"0\r\nX-T: 1\r\n").unwrap(), Chunk::Partial);
        assert_eq!(next_chunk(b"a;ext=1\r\n").unwrap(), Chunk::Partial);
        assert!(next_chunk(b"5\r\nhelloXX").is_err());
        assert!(next_chunk(b"zz\r\n").is_err());
    }

    /// A one-connection-at-a-time server answering each request with the next canned answer
    /// (an answer ending in `|close` is sent and the connection closed, as a keep-alive timeout
    /// would); records "connect" per connection and each request, and counts the closes.
    async fn server(
        answers: Vec<&'static str>,
    ) -> (
        String,
        std::rc::Rc<RefCell<Vec<String>>>,
        std::rc::Rc<std::cell::Cell<usize>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = std::rc::Rc::new(RefCell::new(Vec::new()));
        let closed = std::rc::Rc::new(std::cell::Cell::new(0));
        let (log, closes) = (seen.clone(), closed.clone());
        tokio::task::spawn_local(async move {
            let mut answers = answers.into_iter();
            while let Ok((mut s, _)) = listener.accept().await {
                log.borrow_mut().push("connect".to_string());
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    let n = s.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    // one whole request: head and a Content-Length body
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    log.borrow_mut().push(text[..end + 4 + length].to_string());
                    buf.clear();
                    let Some(answer) = answers.next() else { return };
                    let (answer, close) = match answer.strip_suffix("|close") {
                        Some(a) => (a, true),
                        None => (answer, answer.contains("Connection: close")),
                    };
                    let _ = s.write_all(answer.as_bytes()).await;
                    if close {
                        break;
                    }
                }
                drop(s);
                closes.set(closes.get() + 1);
            }
        });
        (addr, seen, closed)
    }

    fn local<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    #[test]
    fn kept_alive_connections_serve_the_next_calls() {
        local(async {
            let ok = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"code\":200";
            let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                           4\r\n{\"co\r\n7\r\nde\":500\r\n0\r\n\r\n";
            let (addr, seen, _) = server(vec![ok, chunked, ok]).await;
            let url = format!("http://{addr}/run");
            let t = target(&url).unwrap();
            for want in [&b"{\"code\":200"[..], b"{\"code\":500", b"{\"code\":200"] {
                let a = post(&t, b"{}", Some("tok"), None, Duration::from_secs(5), 1024)
                    .await
                    .unwrap();
                assert_eq!((a.status, a.body.as_slice()), (200, want));
            }
            let seen = seen.borrow();
            assert_eq!(seen.iter().filter(|s| *s == "connect").count(), 1);
            assert!(seen[1].starts_with("POST /run HTTP/1.1\r\n"), "{}", seen[1]);
            assert!(seen[1].contains("XXL-JOB-ACCESS-TOKEN: tok\r\n"));
            assert!(seen[1].ends_with("\r\n\r\n{}"));
        });
    }

    #[test]
    fn closed_or_closing_connections_are_not_reused() {
        local(async {
            let close = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
            let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            let ok_then_close = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok|close";
            let (addr, seen, closed) = server(vec![close, ok_then_close, ok]).await;
            let url = format!("http://{addr}/beat");
            let t = target(&url).unwrap();
            let call = || post(&t, b"\"\"", None, None, Duration::from_secs(5), 1024);
            let connects = || seen.borrow().iter().filter(|s| *s == "connect").count();
            // "Connection: close": the next call connects anew
            assert_eq!(call().await.unwrap().body, b"ok");
            assert_eq!(call().await.unwrap().body, b"ok");
            assert_eq!(connects(), 2);
            // the executor closed the idle connection after answering: seen, not reused
            while closed.get() < 2 {
                tokio::task::yield_now().await;
            }
            tokio::task::yield_now().await;
            assert_eq!(call().await.unwrap().body, b"ok");
            assert_eq!(connects(), 3);
        });
    }

    #[test]
    fn failures_name_their_reason() {
        local(async {
            // nothing listens on the port of a dropped listener
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let url = format!("http://127.0.0.1:{port}/run");
            let t = target(&url).unwrap();
            let e = post(&t, b"{}", None, None, Duration::from_secs(5), 1024)
                .await
                .unwrap_err();
            assert!(e.starts_with("Failed to connect to host"), "{e}");

            let long = "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n";
            let cut = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc";
            let (addr, _, _) = server(vec![long, cut]).await;
            let url = format!("http://{addr}/run");
            let t = target(&url).unwrap();
            let e = post(&t, b"{}", None, None, Duration::from_secs(5), 1024)
                .await
                .unwrap_err();
            assert!(e.contains("longer than 1024 bytes"), "{e}");
            let e = post(&t, b"{}", None, None, Duration::from_secs(5), 1024)
                .await
                .unwrap_err();
            assert!(e.contains("closed in the answer's body"), "{e}");
        });
    }

    #[test]
    fn a_silent_executor_times_out() {
        local(async {
            // accepts and never answers
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            tokio::task::spawn_local(async move {
                let mut held = Vec::new();
                while let Ok((s, _)) = listener.accept().await {
                    held.push(s);
                }
            });
            let url = format!("http://{addr}/run");
            let t = target(&url).unwrap();
            tokio::time::pause();
            let e = post(&t, b"{}", None, None, Duration::from_secs(3), 1024)
                .await
                .unwrap_err();
            assert_eq!(e, "Timeout while waiting for response");
        });
    }
}
