//! Webhook alarms: the event as JSON, POSTed to the job's `alarm_webhook` and to the global URL;
//! any 2xx answer counts as delivered.

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Alarm, AlarmEvent};
use crate::executor::HttpExecutorClient;

/// POSTs alarm events.
#[derive(Clone)]
pub struct WebhookAlarm {
    client: HttpExecutorClient,
    global_url: Option<String>,
}

impl WebhookAlarm {
    /// Sends with `client`; `global_url` receives every job's events.
    pub fn new(client: HttpExecutorClient, global_url: Option<String>) -> Self {
        WebhookAlarm {
            client,
            global_url: global_url.filter(|u| !u.trim().is_empty()),
        }
    }
}

impl Alarm for WebhookAlarm {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn send(&self, event: AlarmEvent) -> BoxFuture<'static, Result<(), String>> {
        let me = self.clone();
        async move {
            let urls: Vec<String> = event
                .alarm_webhook
                .iter()
                .chain(me.global_url.iter())
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .collect();
            let body = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
            let mut errors = Vec::new();
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
