//! Console authentication: argon2 password hashes, random bearer tokens kept as SHA-256 in
//! `xjob_session` (shared by every node), a login rate limit, and the first `admin`.
//!
//! Tokens are 256 random bits in hex, sent as `Authorization: Bearer <token>` or in the
//! HttpOnly cookie `xjob_token`. Password hashing and checking run on the blocking pool, never on
//! an actix worker.

use std::collections::HashMap;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use parking_lot::Mutex;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{Console, split_ids};
use crate::error::{Error, Result};
use crate::store::users;
use crate::token::{hex, random_hex};

/// The name of the login cookie.
pub(crate) const COOKIE: &str = "xjob_token";
/// Shortest password accepted.
pub(crate) const MIN_PASSWORD: usize = 8;
/// Longest password accepted.
pub(crate) const MAX_PASSWORD: usize = 128;

/// A signed-in user as the console sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// User id.
    pub id: i32,
    /// User name.
    pub username: String,
    /// 0 normal user, 1 administrator.
    pub role: i16,
    /// Groups a normal user may see and act on.
    pub permission: Vec<i32>,
    /// The client's address this request came from (for the audit log; empty when unknown).
    #[serde(skip)]
    pub client: String,
    /// The API key the request came with (its name), when not a login session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Principal {
    pub(crate) fn of(u: &entity::xxl_job_user::Model) -> Self {
        Principal {
            id: u.id,
            username: u.username.clone(),
            role: u.role,
            permission: split_ids(u.permission.as_deref()),
            client: String::new(),
            key: None,
        }
    }

    /// The engine acting for its embedder ([`crate::Engine`]'s own queries): an administrator
    /// that is no stored user.
    pub(crate) fn engine() -> Self {
        Principal {
            id: 0,
            username: "engine".into(),
            role: 1,
            permission: Vec::new(),
            client: String::new(),
            key: None,
        }
    }

    /// Whether this is an administrator.
    pub fn is_admin(&self) -> bool {
        self.role == 1
    }

    /// Refuses anyone but an administrator.
    pub fn require_admin(&self) -> Result<()> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(Error::Forbidden {
                field: None,
                reason: "administrators only".into(),
            })
        }
    }

    /// Refuses a group outside a normal user's permission; `field` names the input concerned.
    pub fn require_group(&self, group: i32, field: &'static str) -> Result<()> {
        if self.is_admin() || self.permission.contains(&group) {
            Ok(())
        } else {
            Err(Error::Forbidden {
                field: Some(field),
                reason: format!("no permission for executor group {group}"),
            })
        }
    }

    /// The groups this user may see (None = all).
    pub fn visible_groups(&self) -> Option<Vec<i32>> {
        (!self.is_admin()).then(|| self.permission.clone())
    }
}

/// What a password change ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// Console sessions ended.
    pub sessions_ended: u64,
    /// API keys revoked.
    pub api_keys_ended: u64,
}

/// Refuses a request made with an API key: `what` (credentials: a password, API keys) is done
/// by a signed-in user, as a person's password is not changed with a token made for a pipeline.
pub(crate) fn require_session(who: &Principal, what: &str) -> Result<()> {
    match &who.key {
        Some(_) => Err(Error::Forbidden {
            field: None,
            reason: format!("{what} by a signed-in user, not with an API key"),
        }),
        None => Ok(()),
    }
}

/// A new login: the token to present and when it expires (epoch ms).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Login {
    /// The bearer token.
    pub token: String,
    /// Epoch ms after which the token is refused.
    pub expires_at: i64,
    /// Who signed in.
    pub user: Principal,
}

/// Hashes a password with argon2id (random salt) into a PHC string.
pub(crate) fn hash_password(password: &str) -> Result<String> {
    let bytes: [u8; 16] = rand::random();
    let salt =
        SaltString::encode_b64(&bytes).map_err(|e| Error::Config(format!("password salt: {e}")))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::Config(format!("password hashing failed: {e}")))
}

/// Checks a password against a stored hash: an argon2 PHC string, or (for a database taken
/// over from XXL-JOB) its hex digest of the password — MD5 (32 characters, 2.x–3.1) or
/// SHA-256 (64 characters, 3.2 on) — compared in constant time.
pub(crate) fn verify_password(stored: &str, password: &str) -> bool {
    if let Ok(h) = PasswordHash::new(stored) {
        return Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok();
    }
    if stored.len() == 32 && stored.bytes().all(|b| b.is_ascii_hexdigit()) {
        use md5::Digest as _;
        let md5 = hex(&md5::Md5::digest(password.as_bytes()));
        return crate::token::constant_time_eq(
            md5.as_bytes(),
            stored.to_ascii_lowercase().as_bytes(),
        );
    }
    if stored.len() == 64 && stored.bytes().all(|b| b.is_ascii_hexdigit()) {
        let sha = hex(&Sha256::digest(password.as_bytes()));
        return crate::token::constant_time_eq(
            sha.as_bytes(),
            stored.to_ascii_lowercase().as_bytes(),
        );
    }
    false
}

/// The session key of a token: its SHA-256 in lower-case hex.
pub(crate) fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Checks a new password's length.
pub(crate) fn check_password(field: &'static str, p: &str) -> Result<()> {
    let n = p.chars().count();
    if !(MIN_PASSWORD..=MAX_PASSWORD).contains(&n) {
        return Err(Error::Invalid {
            field,
            reason: format!("must be {MIN_PASSWORD} to {MAX_PASSWORD} characters"),
        });
    }
    Ok(())
}

/// [`hash_password`] on the blocking pool (it takes tens of milliseconds by design).
pub(crate) async fn hash_password_blocking(password: String) -> Result<String> {
    hashing(true, move || hash_password(&password)).await?
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| Error::Stopped("password hashing task"))
}

/// Password hashes computed at once (argon2id takes ~19 MiB and tens of milliseconds each):
/// a flood of logins waits its turn or is refused, it cannot take the node's memory and CPUs.
const HASHING_AT_ONCE: usize = 2;
/// The longest user name a login looks up, counts or logs (the column's length): a longer one
/// cannot exist and is refused without hashing anything.
pub(crate) const MAX_USERNAME: usize = 50;
/// Entries the rate limiter keeps at most (a flood of client addresses cannot grow it further;
/// past it the oldest windows are forgotten first).
const LIMITER_MAX: usize = 10_000;

static HASHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(HASHING_AT_ONCE);

/// Runs the password work `f` on the blocking pool once one of the [`HASHING_AT_ONCE`] places
/// is free (`wait`), or refuses at once with 429 when none is (`!wait`: logins, which anyone
/// can send).
async fn hashing<T: Send + 'static>(
    wait: bool,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let permit = if wait {
        HASHING
            .acquire()
            .await
            .map_err(|_| Error::Stopped("password hashing"))?
    } else {
        HASHING.try_acquire().map_err(|_| Error::TooManyAttempts {
            retry_after_secs: 1,
        })?
    };
    let out = blocking(f).await;
    drop(permit);
    out
}

/// Counts failed logins per key within a window: per client address and user name
/// (`max` each) and per client address alone (`max_per_client`). An attempt is counted when it
/// starts ([`LoginLimiter::attempt`]: checked and counted under one lock, so parallel attempts
/// cannot all pass the check) and given back when it succeeds.
#[derive(Debug)]
pub(crate) struct LoginLimiter {
    max: u32,
    max_per_client: u32,
    window_ms: i64,
    failures: Mutex<HashMap<String, (u32, i64)>>,
}

/// The two limiter keys of one attempt.
pub(crate) struct Attempt {
    name: String,
    client: String,
}

impl LoginLimiter {
    /// At most `max` failures per client and name, and `max_per_client` per client, per
    /// `window_ms`.
    pub(crate) fn new(max: u32, max_per_client: u32, window_ms: i64) -> Self {
        LoginLimiter {
            max,
            max_per_client: max_per_client.max(max),
            window_ms,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Refuses an attempt of `username` from `client` when either key has too many recent
    /// failures; otherwise counts it as a failure until [`LoginLimiter::succeeded`].
    pub(crate) fn attempt(&self, client: &str, username: &str, now: i64) -> Result<Attempt> {
        let keys = Attempt {
            name: format!("{client}\u{0}{username}"),
            client: format!("{client}\u{0}"),
        };
        let mut map = self.failures.lock();
        let mut refused = None;
        for (key, max) in [(&keys.name, self.max), (&keys.client, self.max_per_client)] {
            if let Some(&(n, start)) = map.get(key.as_str())
                && n >= max
                && now - start < self.window_ms
            {
                let secs = ((start + self.window_ms - now + 999) / 1000) as u64;
                refused = Some(refused.map_or(secs, |s: u64| s.max(secs)));
            }
        }
        if let Some(retry_after_secs) = refused {
            return Err(Error::TooManyAttempts { retry_after_secs });
        }
        if map.len() + 2 > LIMITER_MAX {
            self.prune(&mut map, now);
        }
        for key in [&keys.name, &keys.client] {
            let e = map.entry(key.clone()).or_insert((0, now));
            if now - e.1 >= self.window_ms {
                *e = (0, now);
            }
            e.0 += 1;
        }
        Ok(keys)
    }

    /// Gives a successful attempt back: the name's failures are forgotten, the client's
    /// count goes down by this attempt.
    pub(crate) fn succeeded(&self, a: Attempt) {
        let mut map = self.failures.lock();
        map.remove(&a.name);
        if let Some(e) = map.get_mut(&a.client) {
            e.0 = e.0.saturating_sub(1);
        }
    }

    /// Whether `key` (a client address, for a limiter of plain keys) has `max_per_client`
    /// failures in the current window: answers the seconds until it may try again. Counts
    /// nothing and allocates nothing (the check every admin API call makes).
    pub(crate) fn refused(&self, key: &str, now: i64) -> Option<u64> {
        let map = self.failures.lock();
        let &(n, start) = map.get(key)?;
        (n >= self.max_per_client && now - start < self.window_ms)
            .then(|| ((start + self.window_ms - now + 999) / 1000) as u64)
    }

    /// Counts a failure of `key` (see [`LoginLimiter::refused`]).
    pub(crate) fn failed(&self, key: &str, now: i64) {
        let mut map = self.failures.lock();
        if map.len() + 1 > LIMITER_MAX {
            self.prune(&mut map, now);
        }
        let e = map.entry(key.to_string()).or_insert((0, now));
        if now - e.1 >= self.window_ms {
            *e = (0, now);
        }
        e.0 += 1;
    }

    /// Drops expired windows, then (still full) the oldest half.
    fn prune(&self, map: &mut HashMap<String, (u32, i64)>, now: i64) {
        let w = self.window_ms;
        map.retain(|_, &mut (_, start)| now - start < w);
        if map.len() + 2 > LIMITER_MAX {
            let mut starts: Vec<i64> = map.values().map(|&(_, s)| s).collect();
            starts.sort_unstable();
            let cut = starts[starts.len() / 2];
            map.retain(|_, &mut (_, start)| start > cut);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.failures.lock().len()
    }
}

/// A user name as it may be counted, logged and stored: at most [`MAX_USERNAME`] characters
/// (cut, marked with `…`), control characters replaced.
fn loggable_name(username: &str) -> String {
    let mut s: String = username
        .chars()
        .take(MAX_USERNAME)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if username.chars().count() > MAX_USERNAME {
        s.push('…');
    }
    s
}

/// How long a checked session is trusted without reading it again.
const SESSION_CACHE_MS: i64 = 30_000;
/// Most sessions remembered (past it the cache starts over).
const SESSION_CACHE_MAX: usize = 10_000;

/// Sessions this node has checked, kept only on a single-node database: every session and user
/// change then goes through this process, and each one clears the cache (logout, password
/// change, user update or delete). An entry also lapses at its session's expiry and after
/// [`SESSION_CACHE_MS`]. Shared by every clone of the console.
#[derive(Default)]
pub(crate) struct SessionCache(Mutex<SessionMap>);

#[derive(Default)]
struct SessionMap {
    /// Bumped by every [`SessionCache::clear`]: a read that began before a change is not kept.
    generation: u64,
    entries: HashMap<String, (Principal, i64)>,
}

impl SessionCache {
    fn get(&self, hash: &str, now: i64) -> Option<Principal> {
        let map = self.0.lock();
        map.entries
            .get(hash)
            .filter(|(_, until)| *until > now)
            .map(|(p, _)| p.clone())
    }

    /// The generation to hand to [`SessionCache::put`] for a read starting now.
    fn generation(&self) -> u64 {
        self.0.lock().generation
    }

    /// Keeps a session read from the database, unless a change cleared the cache since the
    /// read began (`generation`).
    fn put(&self, generation: u64, hash: String, who: Principal, expires_at: i64, now: i64) {
        let mut map = self.0.lock();
        if map.generation != generation {
            return;
        }
        if map.entries.len() >= SESSION_CACHE_MAX {
            map.entries.clear();
        }
        map.entries
            .insert(hash, (who, expires_at.min(now + SESSION_CACHE_MS)));
    }

    /// Forgets every session: called after any change to sessions or users is written.
    pub(crate) fn clear(&self) {
        let mut map = self.0.lock();
        map.generation += 1;
        map.entries.clear();
    }
}

impl Console {
    /// Creates `admin` when no user exists: with `security.admin_password`, or a generated
    /// password that is returned (for the caller to show once). `Ok(None)` when users exist or
    /// the configured password was used.
    pub async fn bootstrap_admin(&self) -> Result<Option<String>> {
        use sea_orm::TransactionTrait;
        if users::count(self.db()).await? > 0 {
            return Ok(None);
        }
        let configured = self.engine.config().security.admin_password.clone();
        let (password, generated) = if configured.is_empty() {
            (random_hex(12), true)
        } else {
            check_password("security.admin_password", &configured)?;
            (configured, false)
        };
        let hash = hash_password_blocking(password.clone()).await?;
        // nodes starting at once on a new database: one creates the user, the others see it
        let txn = self.db().begin().await?;
        crate::store::lock_one_off(&txn).await?;
        if users::count(&txn).await? > 0 {
            return Ok(None);
        }
        users::insert(&txn, "admin", &hash, 1, None).await?;
        txn.commit().await?;
        tracing::info!("created the console user `admin`");
        Ok(generated.then_some(password))
    }

    /// Signs a user in. `client` (the peer address) keys the rate limit, with the user name
    /// and alone. At most [`HASHING_AT_ONCE`] logins hash at once; another one is refused
    /// (429) rather than queued.
    pub async fn login(&self, username: &str, password: &str, client: &str) -> Result<Login> {
        let now = self.engine.clock().now_ms();
        let name = loggable_name(username);
        let attempt = self.limiter.attempt(client, &name, now)?;
        // a name longer than the column cannot exist: refused without hashing anything
        let user = if username.chars().count() > MAX_USERNAME {
            None
        } else {
            users::by_name(self.db(), username).await?
        };
        let ok = match (&user, username.chars().count() > MAX_USERNAME) {
            (_, true) => false,
            (user, false) => {
                let stored = user.as_ref().map(|u| u.password.clone());
                let pw = password.to_string();
                // an unknown user costs a hash too, so timing does not reveal which names exist
                hashing(false, move || match stored {
                    Some(s) => verify_password(&s, &pw),
                    None => {
                        let _ = hash_password(&pw);
                        false
                    }
                })
                .await?
            }
        };
        let Some(user) = user.filter(|_| ok) else {
            tracing::warn!(username = %name, client, "console login refused");
            self.audit_as(
                &name,
                client,
                "auth.login_failed",
                "user",
                "",
                "wrong user name or password",
            )
            .await;
            return Err(Error::Unauthenticated);
        };
        self.limiter.succeeded(attempt);
        if !user.password.starts_with("$argon2") {
            // re-hash a taken-over XXL-JOB hash (MD5 or SHA-256) with argon2id on first login
            let hash = hash_password_blocking(password.to_string()).await?;
            users::set_password(self.db(), user.id, &hash).await?;
        }
        let token = random_hex(32);
        let ttl = self.engine.config().security.session_ttl_secs.max(60) as i64 * 1000;
        let expires_at = now + ttl;
        users::delete_expired_sessions(self.db(), now).await?;
        users::insert_session(self.db(), &token_hash(&token), user.id, expires_at).await?;
        tracing::info!(username, "console login");
        self.audit_as(username, client, "auth.login", "user", user.id, "")
            .await;
        Ok(Login {
            token,
            expires_at,
            user: Principal::of(&user),
        })
    }

    /// The user a token belongs to, if the token is valid.
    pub async fn authenticate(&self, token: &str) -> Result<Principal> {
        let now = self.engine.clock().now_ms();
        let hash = token_hash(token);
        if let Some(p) = self.sessions.get(&hash, now) {
            return Ok(p);
        }
        let generation = self.sessions.generation();
        let (who, expires_at) = if token.starts_with(super::api_keys::KEY_PREFIX) {
            self.key_principal(&hash, now).await?
        } else {
            let (user, expires_at) = users::session(self.db(), &hash, now)
                .await?
                .ok_or(Error::Unauthenticated)?;
            (Principal::of(&user), expires_at)
        };
        if self.engine.single_node() {
            self.sessions
                .put(generation, hash, who.clone(), expires_at, now);
        }
        Ok(who)
    }

    /// Ends the session of `token` (`who`'s).
    pub async fn logout(&self, who: &Principal, token: &str) -> Result<()> {
        let r = users::delete_session(self.db(), &token_hash(token)).await;
        self.sessions.clear();
        r?;
        self.audit(who, "auth.logout", "user", who.id, "").await;
        Ok(())
    }

    /// Changes the signed-in user's own password (the old one is required), ends their other
    /// sessions and, with `end_api_keys`, revokes their API keys; answers what it ended. Not
    /// with an API key.
    pub async fn change_password(
        &self,
        who: &Principal,
        token: &str,
        old_password: &str,
        new_password: &str,
        end_api_keys: bool,
    ) -> Result<Ended> {
        require_session(who, "a password is changed")?;
        check_password("password", new_password)?;
        let user = users::get(self.db(), who.id)
            .await?
            .ok_or(Error::Unauthenticated)?;
        let (stored, old, new) = (
            user.password.clone(),
            old_password.to_string(),
            new_password.to_string(),
        );
        let hash = hashing(true, move || {
            if verify_password(&stored, &old) {
                hash_password(&new).map(Some)
            } else {
                Ok(None)
            }
        })
        .await??;
        let Some(hash) = hash else {
            return Err(Error::Invalid {
                field: "oldPassword",
                reason: "is not the current password".into(),
            });
        };
        let r = async {
            use sea_orm::TransactionTrait;
            let txn = self.db().begin().await?;
            users::set_password(&txn, who.id, &hash).await?;
            let ended = Ended {
                sessions_ended: users::delete_other_sessions(&txn, who.id, &token_hash(token))
                    .await?,
                api_keys_ended: if end_api_keys {
                    crate::store::api_keys::delete_for_user(&txn, who.id).await?
                } else {
                    0
                },
            };
            txn.commit().await?;
            Ok::<_, Error>(ended)
        }
        .await;
        self.sessions.clear();
        let ended = r?;
        let detail = format!(
            "{} other session(s) and {} API key(s) ended",
            ended.sessions_ended, ended.api_keys_ended
        );
        self.audit(who, "auth.password", "user", who.id, detail)
            .await;
        Ok(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// argon2 hashes verify only their password, and a taken-over XXL-JOB MD5 (2.x) or SHA-256
    /// (3.2+) hash is accepted.
    #[test]
    fn hashes_verify_and_legacy_md5_is_accepted() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "wrong horse"));
        // XXL-JOB 2.4's seed: MD5("123456")
        assert!(verify_password(
            "e10adc3949ba59abbe56e057f20f883e",
            "123456"
        ));
        assert!(!verify_password(
            "e10adc3949ba59abbe56e057f20f883e",
            "1234567"
        ));
        assert!(!verify_password("", ""));
        // XXL-JOB 3.2+'s seed: SHA-256("123456")
        let sha = "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92";
        assert!(verify_password(sha, "123456"));
        assert!(verify_password(&sha.to_ascii_uppercase(), "123456"));
        assert!(!verify_password(sha, "12345"));
    }

    /// The login limiter refuses a client and name after the configured failures until its
    /// window passes; a client trying many names is refused too; a success gives its attempt
    /// back.
    #[test]
    fn the_limiter_refuses_after_max_failures_until_the_window_passes() {
        let l = LoginLimiter::new(3, 5, 1000);
        for _ in 0..3 {
            l.attempt("c", "k", 0).unwrap();
        }
        assert!(matches!(
            l.attempt("c", "k", 10),
            Err(Error::TooManyAttempts {
                retry_after_secs: 1
            })
        ));
        // other names from the same client: two more, then the client is refused whatever it
        // names
        l.attempt("c", "x", 10).unwrap();
        l.attempt("c", "y", 10).unwrap();
        assert!(l.attempt("c", "z", 10).is_err(), "the client's own limit");
        l.attempt("other", "k", 10).unwrap();
        // after the window the name may try again
        let a = l.attempt("c", "k", 1000).unwrap();
        l.succeeded(a);
        let a = l.attempt("c", "k", 1001).unwrap();
        l.succeeded(a);
        l.attempt("c", "k", 1002).unwrap();
    }

    /// Parallel attempts are counted as they start: with a limit of 3, of many attempts begun
    /// before any finished only 3 pass.
    #[test]
    fn attempts_are_checked_and_counted_at_once() {
        let l = std::sync::Arc::new(LoginLimiter::new(3, 100, 60_000));
        let passed: usize = (0..8)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || l.attempt("c", "admin", 0).is_ok())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| usize::from(t.join().unwrap()))
            .sum();
        assert_eq!(passed, 3);
    }

    /// The limiter's table stays bounded whatever the number of clients and names.
    #[test]
    fn the_limiter_table_is_bounded() {
        let l = LoginLimiter::new(5, 20, 60_000);
        for i in 0..(3 * LIMITER_MAX) {
            let _ = l.attempt(&format!("10.0.{}.{}", i / 250, i % 250), "n", i as i64);
        }
        assert!(l.len() <= LIMITER_MAX, "{}", l.len());
        // the newest client is still counted
        let last = 3 * LIMITER_MAX - 1;
        let who = format!("10.0.{}.{}", last / 250, last % 250);
        for _ in 0..4 {
            l.attempt(&who, "n", last as i64).unwrap();
        }
        assert!(l.attempt(&who, "n", last as i64).is_err());
    }

    /// At most two password hashes run at once: with both places taken, a login is refused at
    /// once (429, retry in a second) while other password work waits for a place.
    #[tokio::test]
    async fn password_hashing_is_bounded() {
        let held = HASHING.acquire_many(HASHING_AT_ONCE as u32).await.unwrap();
        let refused = hashing(false, || 1).await;
        assert!(
            matches!(
                refused,
                Err(Error::TooManyAttempts {
                    retry_after_secs: 1
                })
            ),
            "{refused:?}"
        );
        let waiting = tokio::spawn(hashing(true, || 2));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits for a place");
        drop(held);
        assert_eq!(waiting.await.unwrap().unwrap(), 2);
        assert_eq!(hashing(false, || 3).await.unwrap(), 3);
    }

    /// Names are cut to the column's length and freed of control characters before they are
    /// counted, logged or stored.
    #[test]
    fn long_names_are_cut_before_they_are_kept() {
        let long = "a".repeat(10_000);
        let shown = loggable_name(&long);
        assert_eq!(shown.chars().count(), MAX_USERNAME + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(loggable_name("ad\nmin"), "ad?min");
        assert_eq!(loggable_name("admin"), "admin");
    }
}
