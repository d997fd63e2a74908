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
}
