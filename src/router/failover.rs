//! FAILOVER: the first address whose `/beat` answers 200, with every probe's answer in the
//! transcript that goes into `trigger_msg`.

use super::probe::{Probed, probe};
use crate::executor::ExecutorClient;

/// Probes `addresses` in order.
pub(crate) async fn pick(client: &dyn ExecutorClient, addresses: &[String]) -> Probed {
    probe(client, addresses, None).await
}
