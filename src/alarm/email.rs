//! E-mail alarms over SMTP: one message to each address in the job's `alarm_email`.

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use super::{Alarm, AlarmEvent};
use crate::config::SmtpConfig;
use crate::error::{Error, Result};

/// Sends alarm e-mail through one SMTP server.
#[derive(Clone)]
pub struct EmailAlarm {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl EmailAlarm {
    /// A sender for `cfg` (TLS `none`, `starttls` or `tls`).
    pub fn new(cfg: &SmtpConfig) -> Result<Self> {
        let bad = |why: String| Error::Config(format!("alarm.smtp: {why}"));
        let mut b = match cfg.tls.as_str() {
            "none" => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&cfg.host),
            "starttls" => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&cfg.host)
                .map_err(|e| bad(e.to_string()))?,
            "tls" => AsyncSmtpTransport::<Tokio1Executor>::relay(&cfg.host)
                .map_err(|e| bad(e.to_string()))?,
            other => {
                return Err(bad(format!(
                    "tls must be none, starttls or tls, not `{other}`"
                )));
            }
        };
        b = b
            .port(cfg.port)
            .timeout(Some(Duration::from_secs(cfg.timeout_secs)));
        if !cfg.user.is_empty() {
            b = b.credentials(Credentials::new(cfg.user.clone(), cfg.password.clone()));
        }
        let from: Mailbox = cfg
            .from
            .parse()
            .map_err(|e| bad(format!("from `{}`: {e}", cfg.from)))?;
        Ok(EmailAlarm {
            transport: b.build(),
            from,
        })
    }

    fn body(e: &AlarmEvent) -> String {
        let mut content = match &e.workflow {
            Some(w) => format!(
                "Workflow {} ({}) run {} failed; failed nodes: {}<br>First failed node's run: LogId={}",
                w.workflow_id,
                super::html_escape(&w.name),
                w.run_id,
                super::html_escape(&w.failed_nodes.join(", ")),
                e.log_id
            ),
            None => format!("Alarm Job LogId={}", e.log_id),
        };
        if let Some(t) = &e.trigger_msg {
            content.push_str(&format!("<br>TriggerMsg=<br>{t}"));
        }
        if let Some(h) = &e.handle_msg {
            content.push_str(&format!(
                "<br>HandleCode={}<br>HandleMsg=<br>{}",
                e.handle_code,
                super::html_escape(h)
            ));
        }
        format!(
            "<h5>Monitor alarm details:</h5><table border=\"1\" cellpadding=\"3\" style=\"border-collapse:collapse; width:80%;\">\
             <thead style=\"font-weight: bold;color: #ffffff;background-color: #ff8c00;\"><tr>\
             <td width=\"20%\">Executor</td><td width=\"10%\">Job ID</td><td width=\"20%\">Job description</td>\
             <td width=\"10%\">Alarm type</td><td width=\"40%\">Alarm content</td></tr></thead><tbody><tr>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></tbody></table>",
            super::html_escape(&e.group_title),
            e.job_id,
            super::html_escape(&e.job_desc),
            if e.workflow.is_some() {
                "Workflow Fail"
            } else {
                "Trigger Fail"
            },
            content
        )
    }
}

impl Alarm for EmailAlarm {
    fn name(&self) -> &'static str {
        "email"
    }

    fn send(&self, event: AlarmEvent) -> BoxFuture<'static, std::result::Result<(), String>> {
        let me = self.clone();
        async move {
            let to: Vec<&str> = event
                .alarm_email
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .collect();
            let body = Self::body(&event);
            let mut errors = Vec::new();
            for addr in to {
                let msg = addr
                    .parse::<Mailbox>()
                    .map_err(|e| format!("{addr}: {e}"))
                    .and_then(|rcpt| {
                        Message::builder()
                            .from(me.from.clone())
                            .to(rcpt)
                            .subject(match &event.workflow {
                                Some(w) => format!(
                                    "xjob alarm: workflow {} ({}) run {} failed",
                                    w.workflow_id, w.name, w.run_id
                                ),
                                None => format!(
                                    "xjob alarm: job {} ({}) failed",
                                    event.job_id, event.job_desc
                                ),
                            })
                            .header(ContentType::TEXT_HTML)
                            .body(body.clone())
                            .map_err(|e| format!("{addr}: {e}"))
                    });
                match msg {
                    Ok(m) => {
                        if let Err(e) = me.transport.send(m).await {
                            errors.push(format!("{addr}: {e}"));
                        }
                    }
                    Err(e) => errors.push(e),
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
