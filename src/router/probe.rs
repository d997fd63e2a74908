//! FAILOVER and BUSYOVER: probe addresses in order (`/beat` or `/idleBeat`) and take the first
//! that answers 200; every probe's answer is written into the transcript XXL-JOB puts into
//! `trigger_msg`.

use crate::executor::ExecutorClient;

/// The outcome of probing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probed {
    /// The first address that answered 200, if any.
    pub address: Option<String>,
    /// `<br>address：…<br>code：…<br>msg：…` per probe.
    pub transcript: String,
}

/// Probes with `/beat` (FAILOVER) or `/idleBeat` (BUSYOVER, when `idle_job` is set).
pub(crate) async fn probe(
    client: &dyn ExecutorClient,
    addresses: &[String],
    idle_job: Option<i32>,
) -> Probed {
    let title = if idle_job.is_some() {
        "Idle check"
    } else {
        "Heartbeat check"
    };
    let mut transcript = String::new();
    for a in addresses {
        let r = match idle_job {
            Some(job) => client.idle_beat(a, job).await,
            None => client.beat(a).await,
        };
        if !transcript.is_empty() {
            transcript.push_str("<br><br>");
        }
        transcript.push_str(&format!(
            "{title}：<br>address：{a}<br>code：{}<br>msg：{}",
            r.code,
            r.msg.as_deref().unwrap_or("null")
        ));
        if r.is_success() {
            return Probed {
                address: Some(a.clone()),
                transcript,
            };
        }
    }
    Probed {
        address: None,
        transcript,
    }
}
