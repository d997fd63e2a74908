//! The console's operations (protocol.md §9) over the [`Engine`], with authentication and per-group
//! permissions applied: what the `/v1` routes call. Every operation takes the signed-in
//! [`Principal`], checks its role and groups, validates input (errors name the field) and
//! answers plain view structs that serialise with XXL-JOB's camelCase field names.
//!
//! One file per resource: [`auth`] (passwords, sessions, login rate limit, the first admin),
//! [`groups`], [`jobs`] (with GLUE source), [`logs`], [`users`], [`dashboard`], [`workflows`],
//! [`reach`] (what a workflow reaches, checked before it runs or changes).

pub mod api_keys;
pub mod audit;
pub mod auth;
pub mod dashboard;
pub mod groups;
pub mod jobs;
pub mod logs;
pub mod reach;
pub mod users;
pub mod workflow_runs;
pub mod workflows;

use std::sync::Arc;

use chrono::{NaiveDateTime, SecondsFormat, TimeZone};
use serde::Serialize;

use crate::engine::Engine;
use crate::error::{Error, Result};

pub use auth::Principal;

/// Largest page a list answers.
pub const MAX_LIMIT: u64 = 1000;
/// Page size when none is asked for.
pub const DEFAULT_LIMIT: u64 = 20;

/// A page of a list: `{"total": n, "items": [...]}`.
#[derive(Clone, Debug, Serialize)]
pub struct Page<T> {
    /// How many items match, over all pages.
    pub total: u64,
    /// This page's items.
    pub items: Vec<T>,
}

/// Which page of a list an [`Engine`] query answers: `limit` items (1 to [`MAX_LIMIT`]) from
/// item `offset` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Paging {
    /// First item (0 is the first).
    pub offset: u64,
    /// Page size.
    pub limit: u64,
}

impl Paging {
    /// The first `limit` items.
    pub fn first(limit: u64) -> Self {
        Paging { offset: 0, limit }
    }

    /// `limit` items from item `offset` on.
    pub fn new(offset: u64, limit: u64) -> Self {
        Paging { offset, limit }
    }
}

impl Default for Paging {
    /// The first [`DEFAULT_LIMIT`] items.
    fn default() -> Self {
        Paging::first(DEFAULT_LIMIT)
    }
}

/// The console service: the engine plus login state. Cheap to clone.
#[derive(Clone)]
pub struct Console {
    engine: Engine,
    limiter: Arc<auth::LoginLimiter>,
    sessions: Arc<auth::SessionCache>,
    /// Workflow versions' references (what a workflow reaches), kept by version.
    reach_cache: Arc<reach::RefsCache>,
}

impl Console {
    /// A console over `engine`, with the security settings of its config.
    pub fn new(engine: Engine) -> Self {
        let sec = &engine.config().security;
        let limiter = auth::LoginLimiter::new(
            sec.login_max_failures.max(1),
            sec.login_max_failures_per_client.max(1),
            sec.login_window_secs.max(1) as i64 * 1000,
        );
        Console {
            engine,
            limiter: Arc::new(limiter),
            sessions: Arc::default(),
            reach_cache: Arc::default(),
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn db(&self) -> &sea_orm::DatabaseConnection {
        self.engine.db()
    }

    fn now(&self) -> NaiveDateTime {
        self.engine.clock().now_naive()
    }

    fn tz(&self) -> chrono_tz::Tz {
        self.engine.config().time_zone()
    }
}

/// `offset` / `limit` of a list request, bounded.
pub(crate) fn page_bounds(offset: Option<u64>, limit: Option<u64>) -> Result<(u64, u64)> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(Error::Invalid {
            field: "limit",
            reason: format!("must be between 1 and {MAX_LIMIT}"),
        });
    }
    let offset = offset.unwrap_or(0);
    // the databases take signed 64-bit numbers (a larger one made the SQLite driver panic)
    if offset > i64::MAX as u64 {
        return Err(Error::Invalid {
            field: "offset",
            reason: format!("must be at most {}", i64::MAX),
        });
    }
    Ok((offset, limit))
}

/// A stored UTC DATETIME as RFC 3339 (`2026-11-21T14:00:00Z`).
pub(crate) fn rfc3339(t: Option<NaiveDateTime>) -> Option<String> {
    t.map(|t| t.and_utc().to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// [`rfc3339`] of an epoch-ms time (xjob's own tables keep times as epoch ms).
pub(crate) fn rfc3339_ms(ms: Option<i64>) -> Option<String> {
    rfc3339(ms.map(crate::clock::ms_to_naive))
}

/// Parses a time filter: RFC 3339, epoch milliseconds, or `yyyy-MM-dd[ HH:mm:ss]` in `tz`.
/// Answers the UTC instant (as stored in DATETIME columns).
pub(crate) fn parse_time(field: &'static str, s: &str, tz: chrono_tz::Tz) -> Result<NaiveDateTime> {
    let s = s.trim();
    let bad = || Error::Invalid {
        field,
        reason: format!(
            "`{s}` is not a time (RFC 3339, epoch ms, or yyyy-MM-dd[ HH:mm:ss] in the center's zone)"
        ),
    };
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.naive_utc());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.naive_utc())
            .ok_or_else(bad);
    }
    let local = NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .map_err(|_| bad())?;
    tz.from_local_datetime(&local)
        .earliest()
        .map(|t| t.naive_utc())
        .ok_or_else(bad)
}

/// The longest executor address (the run row's `executor_address` column).
pub(crate) const MAX_ADDRESS_CHARS: usize = 255;
/// The longest address list, in characters (at most 64,000 bytes: a MySQL `TEXT` holds it).
pub(crate) const MAX_ADDRESS_LIST_CHARS: usize = 16_000;

/// Checks that every non-empty item of a comma-separated executor address list is an
/// `http://` or `https://` URL of at most [`MAX_ADDRESS_CHARS`], and the list at most
/// [`MAX_ADDRESS_LIST_CHARS`]; answers the trimmed items.
pub(crate) fn check_addresses<'a>(field: &'static str, list: &'a str) -> Result<Vec<&'a str>> {
    crate::jobs::check_len(field, list, MAX_ADDRESS_LIST_CHARS)?;
    let items: Vec<&str> = list.split(',').map(str::trim).collect();
    if let Some(long) = items.iter().find(|a| a.chars().count() > MAX_ADDRESS_CHARS) {
        return Err(Error::Invalid {
            field,
            reason: format!(
                "`{}…` is longer than {MAX_ADDRESS_CHARS} characters",
                long.chars().take(40).collect::<String>()
            ),
        });
    }
    if let Some(bad) = items
        .iter()
        .find(|a| !(a.is_empty() || a.starts_with("http://") || a.starts_with("https://")))
    {
        return Err(Error::Invalid {
            field,
            reason: format!("`{bad}` is not an http:// or https:// address"),
        });
    }
    Ok(items)
}

/// Splits a comma-separated id list (`"1,2"`) into numbers, ignoring blanks and junk.
pub(crate) fn split_ids(s: Option<&str>) -> Vec<i32> {
    s.unwrap_or_default()
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Console time filters parse as RFC 3339, epoch ms and `yyyy-MM-dd[ HH:mm:ss]` in the zone.
    #[test]
    fn times_parse_in_every_accepted_form() {
        let tz: chrono_tz::Tz = "Asia/Shanghai".parse().unwrap();
        let want = chrono::DateTime::from_timestamp(1_795_269_600, 0)
            .unwrap()
            .naive_utc();
        assert_eq!(
            parse_time("from", "2026-11-21T14:00:00Z", tz).unwrap(),
            want
        );
        assert_eq!(parse_time("from", "1795269600000", tz).unwrap(), want);
        assert_eq!(parse_time("from", "2026-11-21 22:00:00", tz).unwrap(), want);
        let e = parse_time("to", "yesterday", tz).unwrap_err().to_string();
        assert!(e.contains("to"), "{e}");
        assert_eq!(rfc3339(Some(want)).unwrap(), "2026-11-21T14:00:00Z");
        assert_eq!(split_ids(Some("3, x,,4")), vec![3, 4]);
    }
}
