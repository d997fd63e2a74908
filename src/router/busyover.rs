//! BUSYOVER: the first address whose `/idleBeat` for this job answers 200 (not running it and
//! nothing queued), with every probe's answer in the transcript.

use super::probe::{Probed, probe};
use crate::executor::ExecutorClient;

/// Probes `addresses` in order for `job_id`.
pub(crate) async fn pick(client: &dyn ExecutorClient, addresses: &[String], job_id: i32) -> Probed {
    probe(client, addresses, Some(job_id)).await
}
