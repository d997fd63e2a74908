//! What a workflow reaches: every job and nested workflow a run of it can start, followed
//! through nested workflows (each at its current version, as a run starts them), and the
//! executor groups they belong to.
//!
//! The console asks this before anything that makes a workflow run or changes what it runs —
//! trigger, re-run, mark, schedule start and stop, edit — and allows the operation only if the
//! caller may act on every group reached, not only on the workflow's own group: a workflow is
//! as powerful as the jobs it reaches, and a trigger's params can choose their params.
//!
//! Each version's references (job ids, nested workflow ids, node counts) are read from its DAG
//! once and kept by (workflow, version): versions never change. A check reads each distinct
//! workflow's current version at most once, whatever the number of nodes naming it, and
//! refuses to read more than [`MAX_CHECKED_BYTES`] of DAG text that is not kept yet.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use super::Console;
use crate::error::{Error, Result};
use crate::store::{jobs, workflows};
use crate::workflow::{Definition, NodeKind};

pub use crate::workflow::MAX_RUN_NODES;
/// Deepest chain of nested workflows followed.
const MAX_LEVELS: usize = 16;
/// Most bytes of DAG text one check reads (versions already kept cost nothing).
pub(crate) const MAX_CHECKED_BYTES: usize = 32 << 20;
/// Most versions whose references are kept (each is a few ids per node).
const KEPT_VERSIONS: usize = 4096;

/// One version's references.
#[derive(Debug, Default)]
pub(crate) struct Refs {
    /// Jobs its job nodes run (distinct).
    pub jobs: Vec<i32>,
    /// Workflows its workflow nodes run, one entry per node.
    pub nested: Vec<i32>,
    /// Nodes that are not workflow nodes (each one node run per trigger).
    pub plain: u64,
}

impl Refs {
    /// The references of `def`.
    pub(crate) fn of(def: &Definition) -> Refs {
        let mut r = Refs::default();
        let mut jobs = BTreeSet::new();
        for n in &def.nodes {
            match n.kind {
                NodeKind::Job { job_id } => {
                    jobs.insert(job_id);
                    r.plain += 1;
                }
                NodeKind::Decision { .. } => r.plain += 1,
                NodeKind::Workflow { workflow_id } => r.nested.push(workflow_id),
            }
        }
        r.jobs = jobs.into_iter().collect();
        r
    }
}

/// Versions' references kept by (workflow, version); shared by every clone of a console.
#[derive(Default)]
pub(crate) struct RefsCache(Mutex<HashMap<(i32, i32), Arc<Refs>>>);

impl RefsCache {
    fn get(&self, key: (i32, i32)) -> Option<Arc<Refs>> {
        self.0.lock().get(&key).cloned()
    }

    fn put(&self, key: (i32, i32), refs: Arc<Refs>) {
        let mut m = self.0.lock();
        if m.len() >= KEPT_VERSIONS {
            m.clear();
        }
        m.insert(key, refs);
    }
}

/// A workflow as the reach follows it.
struct Known {
    group: i32,
    refs: Arc<Refs>,
}

/// What one workflow reaches.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reach {
    /// Every executor group reached: the workflow's own, each reached workflow's, each reached
    /// job's.
    pub groups: BTreeSet<i32>,
    /// Every job reached.
    pub jobs: BTreeSet<i32>,
    /// Every nested workflow reached.
    pub workflows: BTreeSet<i32>,
    /// Most node runs one trigger can start (saturating; `u64::MAX` when nesting loops or is
    /// deeper than followed).
    pub runs: u64,
}

/// Where a reach starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Root {
    /// A saved workflow at its current version.
    Current(i32),
    /// A saved workflow at one of its versions (a run follows the version it started with).
    Version(i32, i32),
}

impl Console {
    /// What `root` reaches, through nested workflows at their current versions.
    pub(crate) async fn reach(&self, root: Root) -> Result<Reach> {
        let (own_id, own_group, own) = match root {
            Root::Current(id) => {
                let w = workflows::get(self.db(), id).await?;
                let refs = self.refs_of(&w)?;
                (Some(id), w.job_group, refs)
            }
            Root::Version(id, version) => {
                let w = workflows::get(self.db(), id).await?;
                let refs = match self.reach_cache.get((id, version)) {
                    Some(r) => r,
                    None if version == w.version => self.refs_of(&w)?,
                    None => {
                        let v = workflows::version(self.db(), id, version).await?;
                        let refs = Arc::new(Refs::of(&parse(&v.definition)?));
                        self.reach_cache.put((id, version), refs.clone());
                        refs
                    }
                };
                (Some(id), w.job_group, refs)
            }
        };
        let known = self.follow(own_id, &own).await?;
        let mut reach = Reach {
            runs: runs_of(&own, &known, own_id),
            ..Reach::default()
        };
        reach.groups.insert(own_group);
        let mut stack: Vec<&Arc<Refs>> = vec![&own];
        let mut seen: HashSet<i32> = own_id.into_iter().collect();
        while let Some(refs) = stack.pop() {
            reach.jobs.extend(refs.jobs.iter().copied());
            for id in &refs.nested {
                reach.workflows.insert(*id);
                if seen.insert(*id)
                    && let Some(k) = known.get(id)
                {
                    reach.groups.insert(k.group);
                    stack.push(&k.refs);
                }
            }
        }
        let job_ids: Vec<i32> = reach.jobs.iter().copied().collect();
        for chunk in job_ids.chunks(1000) {
            reach.groups.extend(
                jobs::groups_of(self.db(), chunk)
                    .await?
                    .into_iter()
                    .map(|(_, g)| g),
            );
        }
        Ok(reach)
    }

    /// Refuses `who` unless they may act on every group `root` reaches; `what` names the
    /// operation's object for the message (`workflow 3`).
    pub(crate) async fn require_reach(
        &self,
        who: &super::Principal,
        root: Root,
        what: &str,
        field: &'static str,
    ) -> Result<()> {
        if who.is_admin() {
            return Ok(());
        }
        let reach = self.reach(root).await?;
        if let Some(g) = reach.groups.iter().find(|g| !who.permission.contains(g)) {
            return Err(Error::Forbidden {
                field: Some(field),
                reason: format!(
                    "{what} reaches executor group {g} (through its jobs or nested workflows), which you have no permission for"
                ),
            });
        }
        Ok(())
    }

    /// `w`'s current version's references, kept.
    fn refs_of(&self, w: &entity::xjob_workflow::Model) -> Result<Arc<Refs>> {
        if let Some(r) = self.reach_cache.get((w.id, w.version)) {
            return Ok(r);
        }
        let refs = Arc::new(Refs::of(&parse(&w.definition)?));
        self.reach_cache.put((w.id, w.version), refs.clone());
        Ok(refs)
    }

    /// Every workflow reachable from `own` (not `own_id` itself), at its current version: one
    /// look-up of ids, groups and versions per level, and a read of the DAGs not kept yet.
    async fn follow(&self, own_id: Option<i32>, own: &Refs) -> Result<HashMap<i32, Known>> {
        let mut known: HashMap<i32, Known> = HashMap::new();
        let mut asked: HashSet<i32> = own_id.into_iter().collect();
        let mut frontier: Vec<i32> = own
            .nested
            .iter()
            .copied()
            .filter(|id| asked.insert(*id))
            .collect();
        let mut read = 0usize;
        for _ in 0..MAX_LEVELS {
            if frontier.is_empty() {
                break;
            }
            let heads = workflows::heads(self.db(), &frontier).await?;
            let mut missing = Vec::new();
            for (id, group, version) in &heads {
                match self.reach_cache.get((*id, *version)) {
                    Some(refs) => {
                        known.insert(
                            *id,
                            Known {
                                group: *group,
                                refs,
                            },
                        );
                    }
                    None => missing.push(*id),
                }
            }
            for w in workflows::many(self.db(), &missing).await? {
                read += w.definition.len();
                if read > MAX_CHECKED_BYTES {
                    return Err(Error::Invalid {
                        field: "definition",
                        reason: format!(
                            "the workflows it nests hold more than {} MiB of definitions; too large to check",
                            MAX_CHECKED_BYTES >> 20
                        ),
                    });
                }
                let refs = self.refs_of(&w)?;
                known.insert(
                    w.id,
                    Known {
                        group: w.job_group,
                        refs,
                    },
                );
            }
            frontier = frontier
                .iter()
                .filter_map(|id| known.get(id))
                .flat_map(|k| k.refs.nested.iter().copied())
                .filter(|id| asked.insert(*id))
                .collect();
        }
        Ok(known)
    }
}

fn parse(text: &str) -> Result<Definition> {
    serde_json::from_str(text).map_err(|e| Error::Invalid {
        field: "definition",
        reason: format!("a stored workflow's definition is unreadable: {e}"),
    })
}

/// Node runs one trigger of `own` can start: its plain nodes, and per workflow node one node
/// run plus what that workflow expands to. A loop (or a chain deeper than followed) is
/// `u64::MAX`.
fn runs_of(own: &Refs, known: &HashMap<i32, Known>, own_id: Option<i32>) -> u64 {
    fn expand(
        refs: &Refs,
        known: &HashMap<i32, Known>,
        memo: &mut HashMap<i32, u64>,
        path: &mut Vec<i32>,
    ) -> u64 {
        let mut n = refs.plain;
        for id in &refs.nested {
            let below = if path.contains(id) || path.len() > MAX_LEVELS {
                u64::MAX
            } else if let Some(m) = memo.get(id) {
                *m
            } else if let Some(k) = known.get(id) {
                path.push(*id);
                let m = expand(&k.refs, known, memo, path);
                path.pop();
                memo.insert(*id, m);
                m
            } else {
                // not followed (missing, or deeper than followed): only its node runs
                0
            };
            n = n.saturating_add(1).saturating_add(below);
        }
        n
    }
    let mut path: Vec<i32> = own_id.into_iter().collect();
    expand(own, known, &mut HashMap::new(), &mut path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(plain: u64, nested: &[i32]) -> Arc<Refs> {
        Arc::new(Refs {
            jobs: Vec::new(),
            nested: nested.to_vec(),
            plain,
        })
    }

    /// A trigger expands to the plain nodes plus, per nested node, one node run and what the
    /// nested workflow expands to; loops saturate.
    #[test]
    fn runs_count_nested_expansion_and_saturate_on_loops() {
        // 3 levels of 25 nodes each nesting the next: 25 + 25·(1+25) + 25·(1+25·(1+25))...
        let mut known = HashMap::new();
        known.insert(
            3,
            Known {
                group: 1,
                refs: refs(25, &[]),
            },
        );
        known.insert(
            2,
            Known {
                group: 1,
                refs: refs(0, &[3; 25]),
            },
        );
        let top = refs(0, &[2; 25]);
        assert_eq!(runs_of(&top, &known, Some(1)), 25 * (1 + 25 * (1 + 25)));
        // a loop back to the root
        known.insert(
            3,
            Known {
                group: 1,
                refs: refs(1, &[1]),
            },
        );
        assert_eq!(runs_of(&top, &known, Some(1)), u64::MAX);
    }
}
