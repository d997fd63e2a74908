//! The dispatch-time view of jobs and groups, kept in memory so the ring's tick only routes and
//! dispatches (no database read between a fire's second and its executor call).
//!
//! - **Groups** (a small table): a shared, versioned snapshot, replaced whole by every scan pass
//!   and by the registry right after it rewrites address lists (so a dead executor leaves
//!   routing before its runs are marked lost). A read takes a ticket before it starts
//!   ([`Directory::read_ticket`]) and its snapshot replaces only a read that started before
//!   it: a scan pass that read the groups before the registry's rewrite cannot put the old
//!   lists back after the registry's own read.
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

/// Which access token a group's calls send to the addresses it lists (see [`GroupCall`]; any
/// other address gets none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AddressToken {
    /// The group has its own token: that token.
    Own(String),
    /// The group has none: the node's global token.
    Global,
}

/// The groups' own access tokens (XXL-JOB 3.5) and which addresses belong to a group, derived
/// from the group snapshot.
#[derive(Debug, Default)]
pub(crate) struct GroupTokens {
    /// appName → token, for the groups that have one (exact names).
    pub by_app: HashMap<String, String>,
    /// Lower-cased appName → the tokens of the groups with one whose name folds to it: a case
    /// variant of a tokened group's name never passes with the global token.
    folded: HashMap<String, Vec<String>>,
    /// Every group's appName (exact).
    apps: std::collections::HashSet<String>,
    /// group id → token.
    pub by_group: HashMap<i32, String>,
    /// group id → what a call to one of its executors sends.
    calls: HashMap<i32, GroupCall>,
    /// Every executor address listed for a group (normalised with a trailing `/`) → the groups
    /// that list it (id, appName, whether the group has its own token).
    listed: HashMap<String, Vec<(i32, String, bool)>>,
}

/// What the center sends with a call to an executor of one group: the group's token (its own,
/// or the global one) to the addresses the group lists, none to any other address (an
/// administrator's manual address), and the group's appName (XXL-JOB 3.5's `XXL-JOB-APPNAME`).
/// Chosen by the group being dispatched, never by the address: two groups may list one address.
#[derive(Debug)]
pub(crate) struct GroupCall {
    /// The token the group's own addresses get.
    pub token: AddressToken,
    /// The group's appName.
    pub app: String,
    /// The group's addresses, normalised with a trailing `/`.
    addresses: std::collections::HashSet<String>,
}

impl GroupCall {
    /// Whether the group lists `address`.
    pub(crate) fn lists(&self, address: &str) -> bool {
        let a = address.trim();
        if a.ends_with('/') {
            self.addresses.contains(a)
        } else {
            self.addresses
                .contains(&crate::executor::client::normalise(a))
        }
    }
}

impl GroupTokens {
    fn of(groups: &HashMap<i32, Group>) -> Self {
        let mut t = GroupTokens::default();
        let mut sorted: Vec<&Group> = groups.values().collect();
        sorted.sort_by_key(|g| g.id);
        for g in sorted {
            t.apps.insert(g.app_name.clone());
            let own = g.access_token.as_deref().filter(|t| !t.is_empty());
            if let Some(token) = own {
                t.by_app.insert(g.app_name.clone(), token.to_string());
                t.folded
                    .entry(g.app_name.to_lowercase())
                    .or_default()
                    .push(token.to_string());
                t.by_group.insert(g.id, token.to_string());
            }
            let token = match own {
                Some(token) => AddressToken::Own(token.to_string()),
                None => AddressToken::Global,
            };
            let addresses: std::collections::HashSet<String> = g
                .address_list
                .as_deref()
                .unwrap_or_default()
                .split(',')
                .filter(|a| !a.trim().is_empty())
                .map(crate::executor::client::normalise)
                .collect();
            for a in &addresses {
                t.listed.entry(a.clone()).or_default().push((
                    g.id,
                    g.app_name.clone(),
                    own.is_some(),
                ));
            }
            t.calls.insert(
                g.id,
                GroupCall {
                    token,
                    app: g.app_name.clone(),
                    addresses,
                },
            );
        }
        t
    }

    /// What a call to an executor of group `group` sends (`None`: no such group).
    pub(crate) fn group_call(&self, group: i32) -> Option<&GroupCall> {
        self.calls.get(&group)
    }

    /// A group other than `app_name`'s that has its own token and lists `address` (id and
    /// appName): such an address cannot be registered under `app_name`.
    pub(crate) fn claimed_elsewhere(&self, app_name: &str, address: &str) -> Option<(i32, &str)> {
        self.listed
            .get(&crate::executor::client::normalise(address))?
            .iter()
            .find(|(_, app, tokened)| *tokened && app != app_name)
            .map(|(id, app, _)| (*id, app.as_str()))
    }

    /// Whether no group has its own token (then only the global token counts).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_group.is_empty()
    }

    /// The tokens an executor of `app_name` may present: its group's own token (exact name);
    /// `None` (the global token) for a group without one; for a name no group has exactly,
    /// the own tokens of groups whose name differs only in case, else `None`.
    pub(crate) fn for_app(&self, app_name: &str) -> Option<Vec<&str>> {
        if let Some(t) = self.by_app.get(app_name) {
            return Some(vec![t.as_str()]);
        }
        if self.apps.contains(app_name) {
            return None;
        }
        self.folded
            .get(&app_name.to_lowercase())
            .map(|ts| ts.iter().map(String::as_str).collect())
    }

    /// Whether `token` is some group's own token (compared in constant time with each).
    pub(crate) fn is_some_groups(&self, token: &[u8]) -> bool {
        let mut any = false;
        for t in self.by_group.values() {
            any |= crate::token::constant_time_eq(t.as_bytes(), token);
        }
        any
    }
}

#[derive(Default)]
struct Inner {
    groups: RwLock<Arc<HashMap<i32, Group>>>,
    tokens: RwLock<Arc<GroupTokens>>,
    version: AtomicU64,
    /// The last read ticket handed out.
    tickets: AtomicU64,
    /// The ticket of the read the snapshot holds (0: none yet).
    applied: Mutex<u64>,
    /// Job id → when this node last edited it (epoch ms).
    edits: Mutex<HashMap<i32, i64>>,
}

/// Shared jobs-and-groups view (cheap to clone).
#[derive(Clone, Default)]
pub struct Directory(Arc<Inner>);

impl Directory {
    /// Replaces the group snapshot with `groups` (read now).
    pub fn set_groups(&self, groups: Vec<entity::xxl_job_group::Model>) {
        self.set_groups_read(self.read_ticket(), groups);
    }

    /// A ticket for a read of the groups about to start: the read sees every write committed
    /// before the ticket was taken.
    pub fn read_ticket(&self) -> u64 {
        self.0.tickets.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Replaces the group snapshot with `groups`, read under `ticket`, unless the snapshot
    /// holds a read that started later (and saw at least what this one saw); answers whether
    /// it replaced it.
    pub fn set_groups_read(&self, ticket: u64, groups: Vec<entity::xxl_job_group::Model>) -> bool {
        let mut applied = self.0.applied.lock();
        if ticket <= *applied {
            return false;
        }
        *applied = ticket;
        let map: HashMap<i32, Group> = groups.into_iter().map(|g| (g.id, Arc::new(g))).collect();
        *self.0.tokens.write() = Arc::new(GroupTokens::of(&map));
        *self.0.groups.write() = Arc::new(map);
        self.0.version.fetch_add(1, Ordering::Release);
        true
    }

    /// Reads every group from `db` into the snapshot.
    pub async fn load_groups(&self, db: &impl ConnectionTrait) -> Result<()> {
        let ticket = self.read_ticket();
        self.set_groups_read(ticket, crate::store::groups::all(db).await?);
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

    /// A read that started before another never replaces the other's snapshot, whichever is
    /// set first: the scan's read of the old lists cannot undo the registry's rewrite.
    #[test]
    fn an_older_read_never_replaces_a_newer_one() {
        let d = Directory::default();
        let g = |list: &str| entity::xxl_job_group::Model {
            access_token: None,
            id: 1,
            app_name: "app".into(),
            title: "t".into(),
            address_type: 0,
            address_list: Some(list.into()),
            update_time: None,
        };
        let list = |d: &Directory| d.groups()[&1].address_list.clone().unwrap();
        // the scan reads, the registry rewrites and reads, the scan sets last
        let scan = d.read_ticket();
        let registry = d.read_ticket();
        assert!(d.set_groups_read(registry, vec![g("new")]));
        assert!(!d.set_groups_read(scan, vec![g("old")]));
        assert_eq!(list(&d), "new");
        assert_eq!(
            d.version(),
            1,
            "a refused read does not count as a replacement"
        );
        // in order: both apply
        let (first, second) = (d.read_ticket(), d.read_ticket());
        assert!(d.set_groups_read(first, vec![g("a")]));
        assert!(d.set_groups_read(second, vec![g("b")]));
        assert_eq!(list(&d), "b");
        // an unconditional set is a read that starts now
        d.set_groups(vec![g("c")]);
        assert!(!d.set_groups_read(second, vec![g("b")]));
        assert_eq!(list(&d), "c");
    }
}
