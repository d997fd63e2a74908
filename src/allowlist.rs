//! URL allow-lists: the prefixes a node may send a request to on a user's behalf
//! (`executor.http_allowlist` for `httpJobHandler`, `alarm.webhook_allowlist` for job alarm
//! webhooks). Matching is on the parsed URL: same scheme, host and port, and a path that is the
//! prefix's or continues it at a `/`; user info is never allowed.

use url::Url;

use crate::error::{Error, Result};

/// URL prefixes requests may go to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Allowlist(Vec<Url>);

impl Allowlist {
    /// Parses the list under config key `key`: each entry an absolute `http://` or `https://`
    /// URL without user info; an entry without a path allows the whole host.
    pub(crate) fn parse(key: &str, entries: &[String]) -> Result<Self> {
        let bad = |entry: &str, why: &str| Error::Config(format!("{key}: `{entry}` {why}"));
        let mut prefixes = Vec::new();
        for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let url = Url::parse(entry).map_err(|e| bad(entry, &format!("is not a URL ({e})")))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(bad(
                    entry,
                    "must start with http:// or https:// and name a host",
                ));
            }
            if !url.username().is_empty() || url.password().is_some() {
                return Err(bad(entry, "must not carry a user name or password"));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err(bad(entry, "must not carry a query or fragment"));
            }
            prefixes.push(url);
        }
        Ok(Allowlist(prefixes))
    }

    /// Whether `url` is under one of the prefixes: same scheme, host and port, and a path that
    /// is the prefix's path or continues it at a `/` (so `/api` allows `/api/x` and `/api?q`,
    /// not `/apix`).
    pub(crate) fn allows(&self, url: &Url) -> bool {
        self.0.iter().any(|p| {
            p.scheme() == url.scheme()
                && p.host() == url.host()
                && p.port_or_known_default() == url.port_or_known_default()
                && url.username().is_empty()
                && url.password().is_none()
                && path_under(p.path(), url.path())
        })
    }

    /// Whether the list allows nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn path_under(prefix: &str, path: &str) -> bool {
    if prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        Allowlist::parse("executor.http_allowlist", &entries).expect("valid list")
    }

    fn allowed(l: &Allowlist, url: &str) -> bool {
        l.allows(&Url::parse(url).expect("url"))
    }

    /// Prefixes match scheme, host, port and whole path segments; look-alike hosts, other
    /// ports, user info and sibling paths are refused.
    #[test]
    fn the_allowlist_matches_whole_hosts_and_path_segments() {
        let l = list(&["https://api.example.com/v1", "http://10.0.0.5:8080/"]);
        for ok in [
            "https://api.example.com/v1",
            "https://api.example.com/v1/jobs?x=1",
            "https://API.example.com:443/v1/",
            "http://10.0.0.5:8080/anything",
        ] {
            assert!(allowed(&l, ok), "{ok}");
        }
        for refused in [
            "https://api.example.com/v10",
            "https://api.example.com/",
            "http://api.example.com/v1",
            "https://api.example.com.evil.net/v1",
            "https://evil.net/https://api.example.com/v1",
            "https://user@api.example.com/v1",
            "https://api.example.com:8443/v1",
            "http://10.0.0.5/anything",
            "http://10.0.0.5:8080@169.254.169.254/",
        ] {
            assert!(!allowed(&l, refused), "{refused}");
        }
        assert!(!allowed(
            &Allowlist::default(),
            "https://api.example.com/v1"
        ));
        for bad in ["ftp://x/", "not a url", "https://u:p@x/", "https://x/?q=1"] {
            let e = Allowlist::parse("executor.http_allowlist", &[bad.to_string()])
                .unwrap_err()
                .to_string();
            assert!(e.contains("executor.http_allowlist"), "{e}");
        }
    }
}
