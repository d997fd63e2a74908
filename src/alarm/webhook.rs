//! Webhook alarms: the event as JSON, POSTed to the job's `alarm_webhook` and to the global URL;
//! any 2xx answer counts as delivered. A job's own webhook is a request the node sends wherever
//! a group's user points it, so it must be under `alarm.webhook_allowlist` (or be the global
//! URL): checked when the job is saved ([`WebhookPolicy`]) and again before each send.

use futures::FutureExt;
use futures::future::BoxFuture;
use url::Url;

use super::{Alarm, AlarmEvent};
use crate::allowlist::Allowlist;
use crate::config::AlarmConfig;
use crate::executor::HttpExecutorClient;

/// Which URLs a job's `alarmWebhook` may name: under a prefix of `alarm.webhook_allowlist`, or
/// exactly the global `alarm.webhook_url`.
#[derive(Clone, Debug, Default)]
pub(crate) struct WebhookPolicy {
    list: Allowlist,
    global: Option<String>,
}

impl WebhookPolicy {
    /// The policy of `cfg` (an invalid list is a configuration error naming its key).
    pub(crate) fn of(cfg: &AlarmConfig) -> crate::Result<Self> {
        Ok(WebhookPolicy {
            list: Allowlist::parse("alarm.webhook_allowlist", &cfg.webhook_allowlist)?,
            global: Some(cfg.webhook_url.trim().to_string()).filter(|u| !u.is_empty()),
        })
    }

    /// Whether a job may name `url`; the error says why not and what to change.
    pub(crate) fn check(&self, url: &str) -> std::result::Result<(), String> {
        let url = url.trim();
        if self.global.as_deref() == Some(url) {
            return Ok(());
        }
        let parsed = Url::parse(url).map_err(|e| format!("`{url}` is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("must be an http:// or https:// URL".into());
        }
        if self.list.allows(&parsed) {
            return Ok(());
        }
        if self.list.is_empty() {
            return Err(format!(
                "`{url}` is refused: alarm.webhook_allowlist is empty, so a job may name no \
                 webhook of its own (an administrator adds prefixes to it, \
                 XJOB_ALARM__WEBHOOK_ALLOWLIST, comma-separated)"
            ));
        }
        Err(format!(
            "`{url}` is not under a prefix of alarm.webhook_allowlist"
        ))
    }
}

/// POSTs alarm events.
#[derive(Clone)]
pub struct WebhookAlarm {
    client: HttpExecutorClient,
    global_url: Option<String>,
    /// Where jobs' own webhooks may go (none: anywhere, as before a policy was set).
    policy: Option<WebhookPolicy>,
}

impl WebhookAlarm {
    /// Sends with `client`; `global_url` receives every job's events.
    pub fn new(client: HttpExecutorClient, global_url: Option<String>) -> Self {
        WebhookAlarm {
            client,
            global_url: global_url.filter(|u| !u.trim().is_empty()),
            policy: None,
        }
    }

    /// Sends a job's own webhook only where `policy` allows (one saved before the allow-list
    /// was set is skipped with an error).
    pub(crate) fn with_policy(mut self, policy: WebhookPolicy) -> Self {
        self.policy = Some(policy);
        self
    }
}

impl Alarm for WebhookAlarm {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn send(&self, event: AlarmEvent) -> BoxFuture<'static, Result<(), String>> {
        let me = self.clone();
        async move {
            let mut errors = Vec::new();
            let own = event
                .alarm_webhook
                .iter()
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .filter(|u| match me.policy.as_ref().map(|p| p.check(u)) {
                    Some(Err(why)) => {
                        errors.push(format!("job webhook not sent: {why}"));
                        false
                    }
                    _ => true,
                });
            let urls: Vec<String> = own
                .chain(me.global_url.iter().map(|u| u.trim().to_string()))
                .collect();
            let body = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
            for url in urls {
                match me.client.post_json(&url, body.clone()).await {
                    Ok(status) if (200..300).contains(&status) => {}
                    Ok(status) => errors.push(format!("{url}: HTTP {status}")),
                    Err(e) => errors.push(format!("{url}: {e}")),
                }
            }
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            }
        }
        .boxed()
    }
}
