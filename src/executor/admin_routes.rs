//! Which admin a standalone executor sends each result to. In a cluster every node dispatches
//! and every node takes results, but a run's outcome is held by the node that dispatched it
//! (its run-row writer waits a moment for the result, to write both with one row update): a
//! result sent to another node costs a second update of the row. So xjob's executor learns
//! each admin address's node id from its registration answers, notes the node that sent each
//! run ([`TriggerParam::xjob_node`](crate::model::wire::TriggerParam)), and sends the run's
//! result to that node's address first, then to the others in their order. Without a node (a
//! single node, an XXL-JOB admin) the order is the configured one.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Most runs whose node is remembered at once: runs past it go in the configured order.
const MAX_RUNS: usize = 200_000;

#[derive(Default)]
struct Inner {
    /// Node id → the admin address it answered a registration on.
    nodes: HashMap<Arc<str>, String>,
    /// Log id → the node that dispatched the run.
    runs: HashMap<i64, Arc<str>>,
}

/// Shared by the executor's HTTP server (runs), its registrar (nodes) and its callback sender.
#[derive(Clone, Default)]
pub(crate) struct AdminRoutes(Arc<Mutex<Inner>>);

impl AdminRoutes {
    /// Admin address `admin` answered a registration as node `node`.
    pub(crate) fn learned(&self, node: &str, admin: &str) {
        let mut s = self.0.lock();
        if s.nodes.get(node).is_none_or(|a| a != admin) {
            s.nodes.insert(Arc::from(node), admin.to_string());
        }
    }

    /// Run `log_id` was sent by node `node`.
    pub(crate) fn dispatched(&self, log_id: i64, node: &Arc<str>) {
        let mut s = self.0.lock();
        if s.runs.len() < MAX_RUNS {
            s.runs.insert(log_id, node.clone());
        }
    }

    /// The admin address to send run `log_id`'s result to first, if its node is known; forgets
    /// the run.
    pub(crate) fn take(&self, log_id: i64) -> Option<String> {
        let mut s = self.0.lock();
        let node = s.runs.remove(&log_id)?;
        s.nodes.get(&node).cloned()
    }

    /// `admins` with `first` moved to the front (when it is one of them).
    pub(crate) fn ordered(admins: &[String], first: Option<&str>) -> Vec<String> {
        let mut out = admins.to_vec();
        if let Some(f) = first
            && let Some(i) = out.iter().position(|a| a == f)
        {
            let a = out.remove(i);
            out.insert(0, a);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_goes_first_to_the_node_that_sent_its_run() {
        let r = AdminRoutes::default();
        let admins = vec!["http://a/".to_string(), "http://b/".to_string()];
        r.learned("node-b", "http://b/");
        r.dispatched(7, &Arc::from("node-b"));
        r.dispatched(8, &Arc::from("node-unknown"));
        let first = r.take(7);
        assert_eq!(first.as_deref(), Some("http://b/"));
        assert_eq!(
            AdminRoutes::ordered(&admins, first.as_deref()),
            vec!["http://b/", "http://a/"]
        );
        assert_eq!(r.take(7), None, "a run is routed once");
        assert_eq!(r.take(8), None, "a node no registration named");
        assert_eq!(AdminRoutes::ordered(&admins, Some("http://c/")), admins);
    }
}
