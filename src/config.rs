//! The typed configuration tree, with XXL-JOB's defaults where XXL-JOB has one.
//!
//! The library never reads the environment or files: the `xjob` binary builds a [`Config`] from a
//! TOML file and `XJOB_*` variables (`__` separates nesting, e.g. `XJOB_HTTP__BIND`), and an
//! embedding application builds one however it likes.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The whole configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// The HTTP listener of the `xjob` binary.
    pub http: HttpConfig,
    /// Where jobs, logs and the registry live.
    pub database: DatabaseConfig,
    /// The scan and ring.
    pub scheduler: SchedulerConfig,
    /// The fast and slow trigger lanes.
    pub trigger_pool: TriggerPoolConfig,
    /// Executor heartbeats.
    pub registry: RegistryConfig,
    /// The in-process executor served by this node, if any.
    pub executor: ExecutorConfig,
    /// Access control.
    pub security: SecurityConfig,
    /// Alarms for failed runs.
    pub alarm: AlarmConfig,
    /// Days of run logs (log rows) the center keeps; below 7 the cleanup is off (XXL-JOB's
    /// `logretentiondays` rule).
    pub log_retention_days: i64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            http: HttpConfig::default(),
            database: DatabaseConfig::default(),
            scheduler: SchedulerConfig::default(),
            trigger_pool: TriggerPoolConfig::default(),
            registry: RegistryConfig::default(),
            executor: ExecutorConfig::default(),
            security: SecurityConfig::default(),
            alarm: AlarmConfig::default(),
            log_retention_days: 30,
        }
    }
}

/// Alarms for failed runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AlarmConfig {
    /// A URL that receives every failed run as a JSON POST (empty = none; jobs may set their own).
    pub webhook_url: String,
    /// URL prefixes a job's own `alarmWebhook` may point under (a list or one comma-separated
    /// string, matched like `executor.http_allowlist`); `webhook_url` is allowed as well. Empty
    /// (the default): jobs may name no webhook but `webhook_url` — a webhook is a request the
    /// node sends wherever a group's user points it.
    #[serde(deserialize_with = "list_or_csv")]
    pub webhook_allowlist: Vec<String>,
    /// The SMTP server for `alarm_email` (empty host = e-mail alarms off).
    pub smtp: SmtpConfig,
}

/// An SMTP server.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct SmtpConfig {
    /// Host name (empty = no e-mail).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Login (empty = no authentication); `username` is accepted too.
    #[serde(alias = "username")]
    pub user: String,
    /// Password.
    pub password: String,
    /// Sender address.
    pub from: String,
    /// `none`, `starttls` or `tls` (implicit TLS).
    pub tls: String,
    /// Seconds before giving up on the server.
    pub timeout_secs: u64,
}

impl Default for SmtpConfig {
    fn default() -> Self {
        SmtpConfig {
            host: String::new(),
            port: 25,
            user: String::new(),
            password: String::new(),
            from: "xjob@localhost".into(),
            tls: "starttls".into(),
            timeout_secs: 10,
        }
    }
}

/// Access control.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct SecurityConfig {
    /// The `XXL-JOB-ACCESS-TOKEN` executors and the center exchange. There is no default: the
    /// `xjob` binary generates one on first start (kept in `data/access_token`) when unset.
    pub access_token: String,
    /// The password of the `admin` user created on first start (when no user exists). Empty:
    /// a random password is generated and printed once to the log.
    pub admin_password: String,
    /// Whether the console accepts script (GLUE) jobs and script source. Off by default: a
    /// script job runs arbitrary code on an executor.
    pub scripts_enabled: bool,
    /// Lifetime of a console login token, seconds (default 12 hours).
    pub session_ttl_secs: u64,
    /// Failed logins allowed per client address and user name within
    /// [`login_window_secs`](Self::login_window_secs) before logins are refused (429).
    pub login_max_failures: u32,
    /// Failed logins allowed per client address (whatever the user names) within the window:
    /// a client trying many names is refused too (default 20).
    pub login_max_failures_per_client: u32,
    /// The window of the login rate limit, seconds (default 15 minutes).
    pub login_window_secs: u64,
    /// Mark the login cookie `Secure` (set when the console is served over HTTPS).
    pub secure_cookie: bool,
    /// Calls of XXL-JOB's job API (`/api/addJob`, …) allowed per client address per minute.
    pub job_api_per_minute: u32,
    /// Origins (`https://console.example.com`) besides the console's own whose pages may make
    /// cookie-authenticated changes (a list, or one comma-separated string); empty: none. A
    /// change made with a login cookie from any other site is refused.
    #[serde(deserialize_with = "list_or_csv")]
    pub trusted_origins: Vec<String>,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            access_token: String::new(),
            admin_password: String::new(),
            scripts_enabled: false,
            session_ttl_secs: 12 * 3600,
            login_max_failures: 5,
            login_max_failures_per_client: 20,
            login_window_secs: 15 * 60,
            secure_cookie: false,
            job_api_per_minute: 600,
            trusted_origins: Vec::new(),
        }
    }
}

/// HTTP settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct HttpConfig {
    /// Address the binary listens on.
    pub bind: String,
    /// Timeout of each call to a remote executor, seconds (XXL-JOB: 3).
    pub client_timeout_secs: u64,
    /// A PEM bundle of CA certificates trusted for `https://` executors and admins besides the
    /// system's roots (empty: none).
    pub client_ca_file: String,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            client_timeout_secs: 3,
            client_ca_file: String::new(),
        }
    }
}

/// Database settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct DatabaseConfig {
    /// A sea-orm URL: `sqlite://path?mode=rwc`, `postgres://…`, `mysql://…`.
    pub url: String,
    /// Pool size; 0 (the default) picks one: 8 on PostgreSQL and MySQL, 4 on SQLite, where
    /// one connection does the hot writes and each pooled connection's page cache is memory
    /// that more readers than cores do not pay back (8 cost 18–24 MB of RSS at 5,000 fires/s).
    /// On PostgreSQL and MySQL the workflow start lane opens up to two connections of its own
    /// besides, at the first workflow start.
    pub max_connections: u32,
    /// On a SQLite file with several CPUs: the run-row writer thread gets one CPU and the
    /// thread that starts the engine (the dispatch) keeps off it; with the system clock the
    /// in-process executor runs on a thread of its own on the writer's CPU, ahead of the
    /// writer (which lowers its priority); processes that script and command jobs start get
    /// every CPU the process had ([`crate::with_process_cpus`]). Turn off when you manage thread
    /// affinity yourself.
    pub separate_writer_cpu: bool,
}

impl DatabaseConfig {
    /// The pool size [`DatabaseConfig::max_connections`] means for this URL.
    pub fn pool_size(&self) -> u32 {
        match self.max_connections {
            0 if self.url.starts_with("sqlite:") => 4,
            0 => 8,
            n => n,
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://data/xjob.db?mode=rwc".into(),
            max_connections: 0,
            separate_writer_cpu: true,
        }
    }
}

/// Scan and ring settings (protocol.md §7.2, §7.3).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerConfig {
    /// How far ahead fires are recorded, in ms (XXL-JOB: 5000). A pass reads a job when its
    /// next fire is within half of this (at least 2 s, at most all of it).
    pub pre_read_ms: i64,
    /// A fire later than this is a misfire and its job's misfire policy decides (XXL-JOB: 5000).
    pub misfire_threshold_ms: i64,
    /// Most jobs one scan reads; 0 = XXL-JOB's `(fast_max + slow_max) × 20`.
    pub pre_read_count: u64,
    /// Most fires one job may record in one scan (a guard against runaway schedules).
    pub max_fires_per_job_scan: usize,
    /// A recorded fire still pending this long after its nominal time is taken over (its node
    /// is presumed dead). Must be below `misfire_threshold_ms` for takeovers to fire on time.
    pub recover_after_ms: i64,
    /// IANA time zone in which CRON expressions are evaluated (a job may set its own).
    pub time_zone: String,
    /// Most parent jobs above a child run; a deeper chain (a loop) stops with a message.
    pub max_chain_depth: i16,
    /// A fire claimed for dispatch but not recorded this long after it was recorded belongs to
    /// a node that died (or stalled) mid-dispatch: it is in doubt, and settled by asking its
    /// executors. A fire in doubt that no executor can answer for this long is recorded as a
    /// failed trigger (retried and alarmed like any failure).
    pub claim_timeout_ms: i64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            pre_read_ms: 5000,
            misfire_threshold_ms: 5000,
            pre_read_count: 0,
            max_fires_per_job_scan: 1000,
            recover_after_ms: 2000,
            time_zone: "UTC".into(),
            max_chain_depth: 16,
            claim_timeout_ms: 60_000,
        }
    }
}

/// Trigger lanes (protocol.md §7.4).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct TriggerPoolConfig {
    /// Most executor calls in flight on the fast lane (XXL-JOB: 200 trigger threads, each
    /// making one call). A call is one trigger, except a batch of fires handed over in one
    /// call (the in-process executor's message, an xjob executor's `/runBatch`), which holds
    /// a place per fire until it is made and one place after.
    pub fast_max: usize,
    /// Most triggers in flight on the slow lane (XXL-JOB: 100).
    pub slow_max: usize,
    /// A trigger slower than this counts against its job (XXL-JOB: 500 ms).
    pub slow_threshold_ms: u64,
    /// A job with more slow triggers than this in the current minute goes to the slow lane
    /// (XXL-JOB: 10).
    pub slow_count_limit: u32,
}

impl Default for TriggerPoolConfig {
    fn default() -> Self {
        Self {
            fast_max: 200,
            slow_max: 100,
            slow_threshold_ms: 500,
            slow_count_limit: 10,
        }
    }
}

/// Executor registry settings (protocol.md §6.7, §7.8).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct RegistryConfig {
    /// Heartbeat period in seconds (XXL-JOB: 30).
    pub beat_secs: u64,
    /// An executor silent this long is evicted (XXL-JOB: 90).
    pub dead_secs: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            beat_secs: 30,
            dead_secs: 90,
        }
    }
}

/// The executor of this node (in-process under `xjob serve`, standalone under `xjob executor`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecutorConfig {
    /// Group appname under which the executor registers; empty = no executor.
    pub app_name: String,
    /// Address it registers; empty = `http://<http.bind>/`.
    pub address: String,
    /// Most triggers waiting per job; more are refused with a clear failure.
    pub queue_capacity: usize,
    /// Whether GLUE script jobs (shell, python, node, php, powershell) may run. Off by default.
    pub scripts_enabled: bool,
    /// Where run logs (and script sources) are written.
    pub log_path: String,
    /// Whether every run writes a log file (`<log_path>/<day>/<logId>.log`, read by the
    /// console through `/log`). Off: no file per run — for jobs firing every second, which
    /// otherwise create 86,400 files a day each — and `/log` says run logs are off.
    pub run_logs: bool,
    /// Days of run logs kept; below 3 the cleanup is off (XXL-JOB's rule).
    pub log_retention_days: i64,
    /// Admin base URLs a standalone executor registers with and reports to: a list, or
    /// XXL-JOB's comma-separated string (`http://a/xxl-job-admin,http://b/xxl-job-admin`).
    #[serde(deserialize_with = "list_or_csv")]
    pub admin_addresses: Vec<String>,
    /// IP a standalone executor listens on and registers (empty = 127.0.0.1; set the host's
    /// address to be reachable from other hosts).
    pub ip: String,
    /// Port a standalone executor listens on (XXL-JOB: 9999; 0 = any free port).
    pub port: u16,
    /// The token a standalone executor requires and sends (the admin's); empty = the
    /// `security.access_token`.
    pub access_token: String,
    /// Seconds between retries of spooled callbacks (XXL-JOB: 30).
    pub callback_retry_secs: u64,
    /// URL prefixes the built-in `httpJobHandler` may call (a list, or one comma-separated
    /// string): `https://api.example.com/v1` allows that host and port under `/v1`. Empty (the
    /// default) = it calls nothing.
    #[serde(deserialize_with = "list_or_csv")]
    pub http_allowlist: Vec<String>,
}

/// A list of strings given as a list or as one comma-separated string (XXL-JOB writes lists
/// that way, and an environment variable can hold nothing else); blank entries are dropped.
fn list_or_csv<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Clone, Copy)]
    struct ListOrCsv;
    impl<'de> serde::de::Visitor<'de> for ListOrCsv {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of strings or one comma-separated string")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
            Ok(v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element::<String>()? {
                out.extend(self.visit_str::<A::Error>(&item)?);
            }
            Ok(out)
        }
    }
    d.deserialize_any(ListOrCsv)
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            app_name: String::new(),
            address: String::new(),
            queue_capacity: 1000,
            scripts_enabled: false,
            log_path: "data/joblogs".into(),
            run_logs: true,
            log_retention_days: 30,
            admin_addresses: Vec::new(),
            ip: String::new(),
            port: 9999,
            access_token: String::new(),
            callback_retry_secs: 30,
            http_allowlist: Vec::new(),
        }
    }
}

impl Config {
    /// Checks values that would make the engine misbehave; names the offending key.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &str, why: &str| Err(Error::Config(format!("{key}: {why}")));
        if self.scheduler.pre_read_ms < 1000 {
            return bad("scheduler.pre_read_ms", "must be at least 1000");
        }
        if self.scheduler.misfire_threshold_ms < 1000 {
            return bad("scheduler.misfire_threshold_ms", "must be at least 1000");
        }
        if self.scheduler.recover_after_ms < 1000 {
            return bad("scheduler.recover_after_ms", "must be at least 1000");
        }
        if self.scheduler.claim_timeout_ms < 5_000 {
            return bad("scheduler.claim_timeout_ms", "must be at least 5000");
        }
        if self.scheduler.max_fires_per_job_scan == 0 {
            return bad("scheduler.max_fires_per_job_scan", "must be at least 1");
        }
        if self.scheduler.time_zone.parse::<chrono_tz::Tz>().is_err() {
            return bad("scheduler.time_zone", "not an IANA time zone name");
        }
        if self.trigger_pool.fast_max == 0 || self.trigger_pool.slow_max == 0 {
            return bad("trigger_pool", "fast_max and slow_max must be at least 1");
        }
        if self.registry.beat_secs == 0 || self.registry.dead_secs <= self.registry.beat_secs {
            return bad("registry", "dead_secs must exceed beat_secs, both positive");
        }
        if !(1..=60).contains(&self.http.client_timeout_secs) {
            return bad("http.client_timeout_secs", "must be 1-60");
        }
        crate::allowlist::Allowlist::parse(
            "executor.http_allowlist",
            &self.executor.http_allowlist,
        )?;
        crate::allowlist::Allowlist::parse(
            "alarm.webhook_allowlist",
            &self.alarm.webhook_allowlist,
        )?;
        Ok(())
    }

    /// The effective pre-read count (XXL-JOB 2.x: `(fast + slow) × 20`).
    pub fn pre_read_count(&self) -> u64 {
        if self.scheduler.pre_read_count > 0 {
            self.scheduler.pre_read_count
        } else {
            ((self.trigger_pool.fast_max + self.trigger_pool.slow_max) * 20) as u64
        }
    }

    /// The center's time zone (validated by [`Config::validate`]; UTC if unparsable).
    pub fn time_zone(&self) -> chrono_tz::Tz {
        self.scheduler.time_zone.parse().unwrap_or(chrono_tz::UTC)
    }
}

/// A new random access token (32 bytes from the OS-seeded generator, as hex), for
/// `security.access_token` when none is configured.
pub fn random_token() -> String {
    crate::token::random_hex(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unset pool size is 4 on SQLite and 8 on a server; a set one is kept.
    #[test]
    fn the_pool_size_follows_the_database_unless_set() {
        let mut d = DatabaseConfig::default();
        assert_eq!(d.pool_size(), 4);
        d.url = "postgres://u@h/db".into();
        assert_eq!(d.pool_size(), 8);
        d.max_connections = 3;
        assert_eq!(d.pool_size(), 3);
        d.url = "sqlite://x.db".into();
        assert_eq!(d.pool_size(), 3);
    }

    /// The default configuration carries XXL-JOB's numbers and passes validation.
    #[test]
    fn defaults_are_xxl_job_defaults_and_valid() {
        let c = Config::default();
        c.validate().expect("defaults valid");
        assert_eq!(c.http.bind, "127.0.0.1:8080");
        assert_eq!(c.scheduler.pre_read_ms, 5000);
        assert_eq!(c.trigger_pool.fast_max, 200);
        assert_eq!(c.trigger_pool.slow_max, 100);
        assert_eq!(c.pre_read_count(), 6000);
        assert!(c.database.url.starts_with("sqlite://data/"));
    }

    /// `executor.admin_addresses` accepts a TOML/JSON list or XXL-JOB's comma-separated string.
    #[test]
    fn admin_addresses_take_a_list_or_xxl_jobs_comma_separated_string() {
        use figment::Figment;
        use figment::providers::{Format, Serialized, Toml};
        let load = |toml: &str| {
            Figment::from(Serialized::defaults(Config::default()))
                .merge(Toml::string(toml))
                .extract::<Config>()
                .map_err(|e| e.to_string())
        };
        let want = vec![
            "http://a/xxl-job-admin".to_string(),
            "http://b/xxl-job-admin".to_string(),
        ];
        for toml in [
            "[executor]\nadmin_addresses = \"http://a/xxl-job-admin, http://b/xxl-job-admin,\"",
            "[executor]\nadmin_addresses = [\"http://a/xxl-job-admin\", \"http://b/xxl-job-admin\"]",
        ] {
            assert_eq!(load(toml).unwrap().executor.admin_addresses, want, "{toml}");
        }
        let e = load("[executor]\nadmin_addresses = 7")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("admin_addresses") && e.contains("comma-separated"),
            "one line naming the key and what it takes: {e}"
        );
    }

    /// An invalid setting fails validation with a message naming its key.
    #[test]
    fn invalid_values_name_the_key() {
        let mut c = Config::default();
        c.scheduler.time_zone = "Mars/Olympus".into();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("scheduler.time_zone"), "{e}");
    }
}
