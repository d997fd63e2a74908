//! The audit log: every change made through the console (or the engine's API) and every login,
//! failed login, logout and password change, with who, from where, what and a short detail
//! (what changed; never a password or token). Read by administrators at `GET /v1/audit`; kept
//! for the run-log retention.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Console, Page, Principal, page_bounds, parse_time, rfc3339};
use crate::error::Result;
use crate::store::audit::{self, Entry, Filter};

/// `GET /v1/audit` filters (all optional; `from`/`to` as the run log's time filters).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditQuery {
    /// Exactly this user.
    pub username: Option<String>,
    /// Exactly this action (`job.create`, …).
    pub action: Option<String>,
    /// `job`, `group`, `user` or `log`.
    pub target_type: Option<String>,
    /// Exactly this target id.
    pub target_id: Option<String>,
    /// At or after.
    pub from: Option<String>,
    /// At or before.
    pub to: Option<String>,
    /// First item.
    pub offset: Option<u64>,
    /// Page size.
    pub limit: Option<u64>,
}

/// One audit entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditView {
    /// Entry id.
    pub id: i64,
    /// When (RFC 3339, UTC).
    pub time: Option<String>,
    /// Who (the name tried, for a failed login).
    pub username: String,
    /// The client's address as the node saw it.
    pub client_ip: String,
    /// What: `auth.login`, `auth.login_failed`, `auth.logout`, `auth.password`, `job.create`,
    /// `job.update`, `job.delete`, `job.start`, `job.stop`, `job.trigger`, `job.glue`,
    /// `group.create`, `group.update`, `group.delete`, `user.create`, `user.update`,
    /// `user.delete`, `log.clear`, `log.kill`.
    pub action: String,
    /// `job`, `group`, `user` or `log`.
    pub target_type: String,
    /// The target's id (empty when none).
    pub target_id: String,
    /// What changed, shortened.
    pub detail: String,
}

impl From<entity::xjob_audit::Model> for AuditView {
    fn from(m: entity::xjob_audit::Model) -> Self {
        AuditView {
            id: m.id,
            time: rfc3339(Some(m.time)),
            username: m.username,
            client_ip: m.client_ip,
            action: m.action,
            target_type: m.target_type,
            target_id: m.target_id,
            detail: m.detail,
        }
    }
}

/// The longest value a detail shows of one changed field.
const VALUE_SHOWN: usize = 60;

/// `"text"` cut to [`VALUE_SHOWN`] characters, for a detail.
pub(crate) fn shown(v: &str) -> String {
    let mut s: String = v.chars().take(VALUE_SHOWN).collect();
    if v.chars().count() > VALUE_SHOWN {
        s.push('…');
    }
    format!("{s:?}")
}

/// What differs between two views of the same thing: `field: old → new` for each top-level
/// field that changed (fields in `skip` left out).
pub(crate) fn changes<T: Serialize>(old: &T, new: &T, skip: &[&str]) -> String {
    let (Ok(Value::Object(old)), Ok(Value::Object(new))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return String::new();
    };
    let text = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "∅".to_string(),
        Some(Value::String(s)) => shown(s),
        Some(v) => shown(&v.to_string()),
    };
    let mut out = Vec::new();
    for (k, v) in &new {
        if skip.contains(&k.as_str()) || old.get(k) == Some(v) {
            continue;
        }
        out.push(format!("{k}: {} → {}", text(old.get(k)), text(Some(v))));
    }
    if out.is_empty() {
        "no change".into()
    } else {
        out.join("; ")
    }
}

impl Console {
    /// Records `action` by `who` on `target_type` `target_id`. A failed write is logged, not
    /// answered: the change it describes has been made.
    pub(crate) async fn audit(
        &self,
        who: &Principal,
        action: &'static str,
        target_type: &'static str,
        target_id: impl ToString,
        detail: impl Into<String>,
    ) {
        let entry = self.audit_entry(who, action, target_type, target_id, detail);
        self.write_audit(entry).await;
    }

    /// The entry [`Console::audit`] records, for a store that writes it with the change.
    pub(crate) fn audit_entry(
        &self,
        who: &Principal,
        action: &'static str,
        target_type: &'static str,
        target_id: impl ToString,
        detail: impl Into<String>,
    ) -> Entry {
        let detail = match &who.key {
            // a change made with an API key names the key
            Some(key) => format!("[key {key}] {}", detail.into()),
            None => detail.into(),
        };
        self.entry_as(
            &who.username,
            &who.client,
            action,
            target_type,
            target_id,
            detail,
        )
    }

    /// [`Console::audit`] for a user not signed in (login attempts).
    pub(crate) async fn audit_as(
        &self,
        username: &str,
        client: &str,
        action: &'static str,
        target_type: &'static str,
        target_id: impl ToString,
        detail: impl Into<String>,
    ) {
        let entry = self.entry_as(username, client, action, target_type, target_id, detail);
        self.write_audit(entry).await;
    }

    /// The entry of `action` by `username` from `client`, stamped now.
    fn entry_as(
        &self,
        username: &str,
        client: &str,
        action: &'static str,
        target_type: &'static str,
        target_id: impl ToString,
        detail: impl Into<String>,
    ) -> Entry {
        Entry {
            time: self.now(),
            username: username.to_string(),
            client_ip: client.to_string(),
            action,
            target_type,
            target_id: target_id.to_string(),
            detail: detail.into(),
        }
    }

    /// Writes `entry`: with the run-row writer's next batch; straight to the database when it
    /// is stopped. A failure is logged.
    pub(crate) async fn write_audit(&self, entry: Entry) {
        let entry = match self.engine.audit(entry).await {
            Ok(()) => return,
            Err(entry) => entry,
        };
        let action = entry.action;
        if let Err(e) = audit::record(self.db(), entry).await {
            tracing::error!(error = %e, action, "cannot write the audit log");
        }
    }

    /// A page of the audit log, newest first (administrators only).
    pub async fn list_audit(&self, who: &Principal, q: &AuditQuery) -> Result<Page<AuditView>> {
        who.require_admin()?;
        self.engine.audit_visible().await;
        let (offset, limit) = page_bounds(q.offset, q.limit)?;
        let text = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let tz = self.tz();
        let f = Filter {
            username: text(&q.username),
            action: text(&q.action),
            target_type: text(&q.target_type),
            target_id: text(&q.target_id),
            from: text(&q.from)
                .map(|s| parse_time("from", &s, tz))
                .transpose()?,
            to: text(&q.to).map(|s| parse_time("to", &s, tz)).transpose()?,
        };
        let (total, items) = audit::page(self.db(), &f, offset, limit).await?;
        Ok(Page {
            total,
            items: items.into_iter().map(AuditView::from).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A detail names each changed field with its old and new value, cut short; unchanged and
    /// skipped fields are left out.
    #[test]
    fn changes_name_the_fields_that_differ() {
        let old = serde_json::json!({"a": 1, "b": "x", "c": null, "t": 1, "long": "y"});
        let new = serde_json::json!({"a": 2, "b": "x", "c": "z", "t": 2, "long": "w".repeat(100)});
        let d = changes(&old, &new, &["t"]);
        assert!(d.contains(r#"a: "1" → "2""#), "{d}");
        assert!(d.contains(r#"c: ∅ → "z""#), "{d}");
        assert!(!d.contains("b:") && !d.contains("t:"), "{d}");
        assert!(d.contains("…"), "{d}");
        assert_eq!(changes(&old, &old, &[]), "no change");
    }
}
