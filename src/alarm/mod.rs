//! Alarms for failed runs (protocol.md §7.9): a pluggable [`Alarm`] trait with two implementations,
//! [`EmailAlarm`] (SMTP, to the job's `alarm_email` addresses) and [`WebhookAlarm`] (a JSON POST
//! to the job's `alarm_webhook` and/or a global URL).

mod email;
mod webhook;

use futures::future::BoxFuture;
use serde::Serialize;

pub use email::EmailAlarm;
pub use webhook::WebhookAlarm;
pub(crate) use webhook::WebhookPolicy;

/// `s` with the five HTML special characters escaped (for text placed into HTML).
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The workflow run a `workflow_failed` event reports.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowAlarm {
    /// The workflow.
    pub workflow_id: i32,
    /// Its name.
    pub name: String,
    /// The run that failed.
    pub run_id: i64,
    /// The nodes whose failure failed it.
    pub failed_nodes: Vec<String>,
}

/// What an alarm reports: one failed run of one job (`job_failed`), or a failed workflow run
/// (`workflow_failed`: `workflow` says which; the job fields are its first failed job node's).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlarmEvent {
    /// `job_failed` or `workflow_failed`.
    pub event: &'static str,
    /// Job id.
    pub job_id: i32,
    /// Job description.
    pub job_desc: String,
    /// Executor group id.
    pub job_group: i32,
    /// Executor group title.
    pub group_title: String,
    /// Failed run's log id.
    pub log_id: i64,
    /// Trigger result code.
    pub trigger_code: i32,
    /// Trigger summary (HTML), when the trigger failed.
    pub trigger_msg: Option<String>,
    /// Handle result code.
    pub handle_code: i32,
    /// Handle message, when the run failed.
    pub handle_msg: Option<String>,
    /// The executor the run went to.
    pub executor_address: Option<String>,
    /// Comma-separated e-mail addresses of the job.
    #[serde(skip)]
    pub alarm_email: Option<String>,
    /// The job's own webhook URL.
    #[serde(skip)]
    pub alarm_webhook: Option<String>,
    /// The failed workflow run (a `workflow_failed` event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowAlarm>,
}

/// A way to tell someone a run failed. `Ok` when delivered or when there is nobody to tell for
/// this job (as XXL-JOB counts an empty `alarm_email`).
pub trait Alarm: Send + Sync + 'static {
    /// A short name for logs.
    fn name(&self) -> &'static str;
    /// Delivers the event.
    fn send(&self, event: AlarmEvent) -> BoxFuture<'static, Result<(), String>>;
}
