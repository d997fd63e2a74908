//! Cross-site writes refused: a change authenticated by a login cookie alone must come from the
//! console's own origin (or one of `security.trusted_origins`). A browser sends the cookie with
//! a request another site makes it send; `SameSite=Strict` stops other sites, not other ports
//! of the same host or sibling hosts, so the request's own headers decide:
//!
//! 1. a safe method (`GET`, `HEAD`, `OPTIONS`) changes nothing and passes;
//! 2. `Sec-Fetch-Site` (every current browser sends it): `same-origin` or `none` (typed by the
//!    user) passes, anything else is refused unless its `Origin` is trusted;
//! 3. else `Origin`: passes when its host and port are the request's `Host`, or it is trusted;
//! 4. neither header: not a browser (curl, scripts, XXL-JOB's tools), which a cookie cannot be
//!    borrowed from: passes.
//!
//! Requests authenticated by `Authorization: Bearer` (a token or an API key a page cannot
//! attach for another site) are not checked. This is the rule Go's `net/http` adopted as
//! `CrossOriginProtection` in 1.25 (the behaviour, not its code).

use actix_web::HttpRequest;
use actix_web::http::{Method, header};

/// Why `req`, a request whose authentication is a cookie (or nothing yet), is refused as a
/// cross-site write; `None` when it may go on. `trusted` lists extra origins
/// (`scheme://host[:port]`).
pub(crate) fn cross_site(req: &HttpRequest, trusted: &[String]) -> Option<String> {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let is_trusted = |o: &str| {
        trusted
            .iter()
            .any(|t| t.trim_end_matches('/').eq_ignore_ascii_case(o))
    };
    if let Some(site) = req
        .headers()
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
    {
        if matches!(site.trim(), "same-origin" | "none") || origin.is_some_and(is_trusted) {
            return None;
        }
        return Some(format!(
            "a change sent by another site ({site}, origin {}) with the login cookie is refused",
            origin.unwrap_or("unknown")
        ));
    }
    let origin = origin?;
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(origin);
    if (!host.is_empty() && authority.eq_ignore_ascii_case(host.trim())) || is_trusted(origin) {
        return None;
    }
    Some(format!(
        "a change sent from origin {origin} with the login cookie is refused (not this console's origin, {host})"
    ))
}

/// Whether `req` carries `Authorization: Bearer …` (then no cookie decides who it is).
pub(crate) fn has_bearer(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") && !v[7..].trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn req(method: Method, headers: &[(&'static str, &'static str)]) -> HttpRequest {
        let mut r = TestRequest::default()
            .method(method)
            .insert_header((header::HOST, "127.0.0.1:8080"));
        for h in headers {
            r = r.insert_header(*h);
        }
        r.to_http_request()
    }

    /// Same-origin and non-browser writes pass; other sites, ports and hosts do not, unless
    /// trusted; reads always pass.
    #[test]
    fn cross_site_writes_are_refused() {
        let none: &[String] = &[];
        assert!(cross_site(&req(Method::POST, &[]), none).is_none(), "curl");
        assert!(
            cross_site(
                &req(Method::POST, &[("origin", "http://127.0.0.1:8080")]),
                none
            )
            .is_none()
        );
        assert!(
            cross_site(
                &req(Method::POST, &[("origin", "http://127.0.0.1:9090")]),
                none
            )
            .is_some(),
            "another port"
        );
        assert!(
            cross_site(
                &req(Method::DELETE, &[("origin", "https://evil.example")]),
                none
            )
            .is_some()
        );
        assert!(
            cross_site(&req(Method::POST, &[("origin", "null")]), none).is_some(),
            "an opaque origin"
        );
        assert!(
            cross_site(
                &req(Method::GET, &[("origin", "https://evil.example")]),
                none
            )
            .is_none()
        );
        let fetch = |site| {
            req(
                Method::PUT,
                &[("sec-fetch-site", site), ("origin", "https://ops.example")],
            )
        };
        assert!(cross_site(&fetch("same-origin"), none).is_none());
        assert!(cross_site(&fetch("none"), none).is_none());
        assert!(
            cross_site(&fetch("same-site"), none).is_some(),
            "a sibling host"
        );
        assert!(cross_site(&fetch("cross-site"), none).is_some());
        let trusted = vec!["https://ops.example/".to_string()];
        assert!(cross_site(&fetch("cross-site"), &trusted).is_none());
        assert!(
            cross_site(
                &req(Method::POST, &[("origin", "https://ops.example")]),
                &trusted
            )
            .is_none()
        );
    }
}
