//! What an operator does to a node from its shell, beside running it (`xjob check`, `xjob
//! config`, `xjob admin reset-password`): each works on the configured database directly,
//! without starting the scheduler, so it is safe next to a running node.

use sea_orm::TransactionTrait;
use serde::Serialize;

use crate::config::{Config, DatabaseConfig};
use crate::error::{Error, Result};
use crate::store;

/// What `xjob check` found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The database answered.
    pub database_reachable: bool,
    /// Migrations applied.
    pub applied: usize,
    /// Migrations not applied yet (run `xjob migrate`).
    pub pending: Vec<String>,
}

/// Connects to the configured database and reads which migrations are applied and which are
/// pending. An unreachable database is an error ([`Error::Db`]).
pub async fn check(database: &DatabaseConfig) -> Result<CheckReport> {
    use migration::MigratorTrait;
    let db = store::connect(database).await?;
    db.ping().await?;
    let applied = migration::Migrator::get_applied_migrations(&db)
        .await?
        .len();
    let pending = migration::Migrator::get_pending_migrations(&db)
        .await?
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    db.close().await?;
    Ok(CheckReport {
        database_reachable: true,
        applied,
        pending,
    })
}

/// `cfg` as TOML, with every secret masked (tokens, passwords, and a database URL's password):
/// what `xjob config` prints.
pub fn masked_config(cfg: &Config) -> Result<String> {
    let mut c = cfg.clone();
    let mask = |s: &mut String| {
        if !s.is_empty() {
            *s = "********".into();
        }
    };
    mask(&mut c.security.access_token);
    mask(&mut c.security.admin_password);
    mask(&mut c.executor.access_token);
    mask(&mut c.alarm.smtp.password);
    c.database.url = masked_url(&c.database.url);
    toml::to_string_pretty(&c)
        .map_err(|e| Error::Config(format!("cannot print the configuration: {e}")))
}

/// Variables read by the binary itself that are not settings.
const NOT_SETTINGS: [&str; 1] = ["XJOB_NEW_PASSWORD"];

/// The `XJOB_*` variables among `vars` that name no setting (`XJOB_SECURITY__ADMIN_PASSWD`, say):
/// the configuration would ignore them, so a typo would go unnoticed. Each answer names the
/// variable and the key it spells.
pub fn unknown_env_settings(vars: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let known = settings_tree();
    let mut out: Vec<String> = vars
        .into_iter()
        .filter_map(|(k, _)| {
            let rest = k.strip_prefix("XJOB_")?;
            if NOT_SETTINGS.contains(&k.as_str()) || k.starts_with("XJOB_TEST_") {
                return None;
            }
            let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            (!has_path(&known, &path)).then(|| format!("{k} (no setting `{}`)", path.join(".")))
        })
        .collect();
    out.sort();
    out
}

/// The keys of a TOML configuration file that name no setting, as dotted paths.
pub fn unknown_file_settings(text: &str) -> Vec<String> {
    let Ok(file) = text.parse::<toml::Table>() else {
        return Vec::new(); // the configuration's own parse names a syntax error
    };
    let known = settings_tree();
    let mut out = Vec::new();
    fn walk(
        t: &toml::Table,
        at: &mut Vec<String>,
        known: &serde_json::Value,
        out: &mut Vec<String>,
    ) {
        for (k, v) in t {
            at.push(k.clone());
            match v {
                toml::Value::Table(inner) if has_table(known, at) => walk(inner, at, known, out),
                _ if has_path(known, at) => {}
                _ => out.push(at.join(".")),
            }
            at.pop();
        }
    }
    walk(&file, &mut Vec::new(), &known, &mut out);
    out
}

fn settings_tree() -> serde_json::Value {
    serde_json::to_value(Config::default()).unwrap_or_default()
}

fn lookup<'a>(known: &'a serde_json::Value, path: &[String]) -> Option<&'a serde_json::Value> {
    path.iter()
        .try_fold(known, |node, key| node.as_object()?.get(key))
}

fn has_path(known: &serde_json::Value, path: &[String]) -> bool {
    lookup(known, path).is_some()
}

fn has_table(known: &serde_json::Value, path: &[String]) -> bool {
    lookup(known, path).is_some_and(serde_json::Value::is_object)
}

/// A database URL with its password masked (`postgres://user:********@host/db`).
fn masked_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((auth, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:********@{host}"),
        None => url.to_string(),
    }
}

/// What a password reset ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Reset {
    /// Console sessions ended.
    pub sessions_ended: u64,
    /// API keys revoked.
    pub api_keys_ended: u64,
}

/// Sets console user `username`'s password (8–128 characters), ending every session and API key
/// of theirs in the same transaction, audited as done by the operator's shell (`cli`): for an
/// administrator locked out of the console. A node that is running keeps a session it checked
/// in memory for at most 30 s.
pub async fn reset_password(
    database: &DatabaseConfig,
    username: &str,
    password: &str,
) -> Result<Reset> {
    crate::console::auth::check_password("password", password)?;
    let db = store::connect(database).await?;
    let user = store::users::by_name(&db, username)
        .await?
        .ok_or_else(|| Error::Invalid {
            field: "user",
            reason: format!("there is no console user `{username}`"),
        })?;
    let hash = crate::console::auth::hash_password_blocking(password.to_string()).await?;
    let txn = db.begin().await?;
    store::users::set_password(&txn, user.id, &hash).await?;
    let reset = Reset {
        sessions_ended: store::users::delete_other_sessions(&txn, user.id, "").await?,
        api_keys_ended: store::api_keys::delete_for_user(&txn, user.id).await?,
    };
    store::audit::record(
        &txn,
        store::audit::Entry {
            time: chrono::Utc::now().naive_utc(),
            username: "cli".into(),
            client_ip: "local".into(),
            action: "user.update",
            target_type: "user",
            target_id: user.id.to_string(),
            detail: format!(
                "password reset from the command line; {} session(s) and {} API key(s) ended",
                reset.sessions_ended, reset.api_keys_ended
            ),
        },
    )
    .await?;
    txn.commit().await?;
    db.close().await?;
    Ok(reset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Secrets never print: tokens, passwords and a URL's password are masked.
    #[test]
    fn secrets_are_masked() {
        let mut cfg = Config::default();
        cfg.security.access_token = "very-secret-token".into();
        cfg.alarm.smtp.password = "smtp-secret".into();
        cfg.database.url = "postgres://xjob:db-secret@db.example:5432/xjob".into();
        let out = masked_config(&cfg).unwrap();
        for secret in ["very-secret-token", "smtp-secret", "db-secret"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(
            out.contains("postgres://xjob:********@db.example:5432/xjob"),
            "{out}"
        );
        assert_eq!(
            masked_url("sqlite://data/xjob.db?mode=rwc"),
            "sqlite://data/xjob.db?mode=rwc"
        );
    }

    /// A variable or file key that names no setting is reported; real ones are not.
    #[test]
    fn settings_that_do_not_exist_are_named() {
        let vars = [
            ("XJOB_SECURITY__ADMIN_PASSWD", "x"),
            ("XJOB_SECURITY__ADMIN_PASSWORD", "x"),
            ("XJOB_DATABASE__URL", "x"),
            ("XJOB_ALARM__SMTP__HOST", "x"),
            ("XJOB_ALARM__SMTP__HOSTNAME", "x"),
            ("XJOB_NEW_PASSWORD", "x"),
            ("XJOB_TEST_PG_URL", "x"),
            ("XJOB_DATABASE__URL__X", "x"),
            ("PATH", "x"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            unknown_env_settings(vars),
            vec![
                "XJOB_ALARM__SMTP__HOSTNAME (no setting `alarm.smtp.hostname`)".to_string(),
                "XJOB_DATABASE__URL__X (no setting `database.url.x`)".to_string(),
                "XJOB_SECURITY__ADMIN_PASSWD (no setting `security.admin_passwd`)".to_string(),
            ]
        );
        let file = "log_retention_days = 7\nbogus = 1\n[http]\nbind = \"0.0.0.0:8080\"\nbnid = \"x\"\n[alarm.smtp]\nhost = \"h\"\n[nosuch]\nx = 1\n";
        assert_eq!(
            unknown_file_settings(file),
            vec!["bogus", "http.bnid", "nosuch"]
        );
    }
}
