//! The dispatch-time view of jobs and groups, kept in memory so the ring's tick only routes and
//! dispatches (no database read between a fire's second and its executor call).
//!
//! - **Groups** (a small table): a shared, versioned snapshot, replaced whole by every scan pass
//!   and by the registry right after it rewrites address lists (so a dead executor leaves
//!   routing before its runs are marked lost).
//! - **Jobs**: each fire carries the job as the scan read it (an `Arc`, seconds ahead). A
//!   console edit on this node marks the job edited; a fire read before the edit reads the job
//!   again at dispatch. Edits on other nodes are picked up by the next scan pass's read.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use sea_orm::ConnectionTrait;

use crate::error::Result;

/// A group as dispatch uses it.
pub(crate) type Group = Arc<entity::xxl_job_group::Model>;

/// How long a job edit is remembered: longer than any fire waits in the ring.
const EDIT_MEMORY_MS: i64 = 120_000;

/// The groups' own access tokens (XXL-JOB 3.5), derived from the group snapshot.
#[derive(Debug, Default)]
pub(crate) struct GroupTokens {
    /// appName → token, for the groups that have one.
    pub by_app: HashMap<String, String>,
    /// group id → token.
    pub by_group: HashMap<i32, String>,
    /// Executor address (normalised with a trailing `/`) → its group's token.
    pub by_address: HashMap<String, String>,
}

impl GroupTokens {
    fn of(groups: &HashMap<i32, Group>) -> Self {
        let mut t = GroupTokens::default();
        for g in groups.values() {
            let Some(token) = g.access_token.as_deref().filter(|t| !t.is_empty()) else {
                continue;
            };
            t.by_app.insert(g.app_name.clone(), token.to_string());
            t.by_group.insert(g.id, token.to_string());
            for a in g.address_list.as_deref().unwrap_or_default().split(',') {
                if !a.trim().is_empty() {
                    t.by_address
                        .insert(crate::executor::client::normalise(a), token.to_string());
                }
            }
        }
        t
    }

    /// Whether no group has its own token (then only the global token counts).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }
}

#[derive(Default)]
struct Inner {
    groups: RwLock<Arc<HashMap<i32, Group>>>,
    tokens: RwLock<Arc<GroupTokens>>,
    version: AtomicU64,
    /// Job id → when this node last edited it (epoch ms).
    edits: Mutex<HashMap<i32, i64>>,
}

/// Shared jobs-and-groups view (cheap to clone).
#[derive(Clone, Default)]
pub struct Directory(Arc<Inner>);

impl Directory {
    /// Replaces the group snapshot with `groups`.
    pub fn set_groups(&self, groups: Vec<entity::xxl_job_group::Model>) {
        let map: HashMap<i32, Group> = groups.into_iter().map(|g| (g.id, Arc::new(g))).collect();
        *self.0.tokens.write() = Arc::new(GroupTokens::of(&map));
        *self.0.groups.write() = Arc::new(map);
        self.0.version.fetch_add(1, Ordering::Release);
    }

    /// Reads every group from `db` into the snapshot.
    pub async fn load_groups(&self, db: &impl ConnectionTrait) -> Result<()> {
        self.set_groups(crate::store::groups::all(db).await?);
        Ok(())
    }

    /// The current group snapshot.
    pub fn groups(&self) -> Arc<HashMap<i32, Group>> {
        self.0.groups.read().clone()
    }

    /// The groups' own access tokens.
    pub(crate) fn tokens(&self) -> Arc<GroupTokens> {
        self.0.tokens.read().clone()
    }

    /// How many times the group snapshot was replaced.
    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Acquire)
    }

    /// Notes that job `job_id` was edited at `now_ms` (fires read before then read it again).
    pub fn job_edited(&self, job_id: i32, now_ms: i64) {
        let mut e = self.0.edits.lock();
        e.retain(|_, &mut at| at > now_ms - EDIT_MEMORY_MS);
        e.insert(job_id, now_ms);
    }

    /// Whether job `job_id` was edited at or after `read_ms`.
    pub fn edited_since(&self, job_id: i32, read_ms: i64) -> bool {
        let e = self.0.edits.lock();
        !e.is_empty() && e.get(&job_id).is_some_and(|&at| at >= read_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job edit invalidates the fires read before it, not those read after.
    #[test]
    fn edits_invalidate_fires_read_before_them_only() {
        let d = Directory::default();
        assert!(!d.edited_since(1, 0));
        d.job_edited(1, 10_000);
        assert!(d.edited_since(1, 9_000), "read before the edit");
        assert!(d.edited_since(1, 10_000), "read in the same millisecond");
        assert!(!d.edited_since(1, 10_001), "read after the edit");
        assert!(!d.edited_since(2, 0), "other jobs");
        // old edits are forgotten once no fire can be that old
        d.job_edited(2, 10_000 + EDIT_MEMORY_MS + 1);
        assert!(!d.edited_since(1, 0));
    }

    /// Loading groups replaces the directory's snapshot whole (a deleted group disappears).
    #[test]
    fn group_snapshot_is_replaced_whole() {
        let d = Directory::default();
        let g = |id: i32, list: &str| entity::xxl_job_group::Model {
            access_token: None,
            id,
            app_name: format!("app{id}"),
            title: "t".into(),
            address_type: 0,
            address_list: Some(list.into()),
            update_time: None,
        };
        d.set_groups(vec![g(1, "a"), g(2, "b")]);
        let before = d.groups();
        d.set_groups(vec![g(1, "c")]);
        assert_eq!(before.len(), 2, "a reader keeps its snapshot");
        assert_eq!(d.groups().len(), 1);
        assert_eq!(d.groups()[&1].address_list.as_deref(), Some("c"));
        assert_eq!(d.version(), 2);
    }
}
