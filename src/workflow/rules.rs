//! How a workflow run moves: given every node's state, which pending nodes run now and which are
//! skipped (Airflow's trigger rules, the useful subset), and when the run is over and how it
//! ended. Pure functions over a [`Graph`]: the same answers on every node of a cluster and after
//! any restart, so the run's tables hold all the state there is.
//!
//! Each incoming edge delivers an *input* once its upstream is done:
//! - from a skipped upstream, or along an edge whose condition does not hold: **skip**;
//! - `ALWAYS`: the upstream's outcome (success or failure);
//! - `ON_SUCCESS` / `ON_FAILURE` / `TRUE` / `FALSE` whose condition holds: **success** (the branch
//!   is taken).
//!
//! A node that allows failure counts as succeeded downstream. Then a pending node's rule decides:
//!
//! | rule | runs when | is skipped when |
//! |---|---|---|
//! | `ALL_SUCCESS` | every input is a success | any input is not |
//! | `ALL_DONE` | every input has come | never |
//! | `ONE_FAILED` | any input is a failure | every input came and none is |
//! | `NONE_FAILED` | every input came and none is a failure | any input is a failure |
//! | `ONE_SUCCESS` | any input is a success | every input came and none is |
//!
//! A node without inputs runs at the start. A skipped node's downstream edges deliver skips, so
//! skipping spreads by the same rules — and only downstream: a failed branch never touches nodes
//! that do not depend on it. A disabled node whose rule says run succeeds without running.

use super::graph::Graph;
use super::model::{EdgeCondition, TriggerRule};

/// Where a node of a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Not decided yet.
    Pending,
    /// Dispatched, no result yet.
    Running,
    /// Finished: whether it succeeded, and a decision node's value.
    Done {
        /// Whether it succeeded (its own outcome; `allow_failure` applies downstream).
        succeeded: bool,
        /// A decision's value.
        decision: Option<bool>,
    },
    /// Will not run.
    Skipped,
}

impl State {
    /// Whether the node is done or skipped.
    pub fn is_final(self) -> bool {
        matches!(self, State::Done { .. } | State::Skipped)
    }
}

/// What a node's settings contribute to the rules.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeRules {
    /// Its trigger rule.
    pub rule: TriggerRule,
    /// Treated as succeeded without running.
    pub disabled: bool,
    /// Its failure counts as success downstream.
    pub allow_failure: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    Success,
    Failure,
    Skip,
}

fn input(from: State, allow_failure: bool, condition: EdgeCondition) -> Option<Input> {
    let (ok, decision) = match from {
        State::Pending | State::Running => return None,
        State::Skipped => return Some(Input::Skip),
        State::Done {
            succeeded,
            decision,
        } => (succeeded || allow_failure, decision),
    };
    Some(match condition {
        EdgeCondition::Always if ok => Input::Success,
        EdgeCondition::Always => Input::Failure,
        EdgeCondition::OnSuccess if ok => Input::Success,
        EdgeCondition::OnFailure if !ok => Input::Success,
        EdgeCondition::True if decision == Some(true) => Input::Success,
        EdgeCondition::False if decision == Some(false) => Input::Success,
        _ => Input::Skip,
    })
}

/// A pending node's verdict: `Some(true)` run, `Some(false)` skip, `None` wait.
fn verdict(rule: TriggerRule, inputs: &[Option<Input>]) -> Option<bool> {
    if inputs.is_empty() {
        return Some(true);
    }
    let all_in = inputs.iter().all(Option::is_some);
    let any = |i: Input| inputs.contains(&Some(i));
    match rule {
        TriggerRule::AllSuccess => {
            if inputs
                .iter()
                .any(|x| matches!(x, Some(Input::Failure | Input::Skip)))
            {
                Some(false)
            } else {
                all_in.then_some(true)
            }
        }
        TriggerRule::AllDone => all_in.then_some(true),
        TriggerRule::OneFailed => {
            if any(Input::Failure) {
                Some(true)
            } else {
                all_in.then_some(false)
            }
        }
        TriggerRule::NoneFailed => {
            if any(Input::Failure) {
                Some(false)
            } else {
                all_in.then_some(true)
            }
        }
        TriggerRule::OneSuccess => {
            if any(Input::Success) {
                Some(true)
            } else {
                all_in.then_some(false)
            }
        }
    }
}

/// Moves a run on: skips the pending nodes whose rule can no longer hold (and what that
/// skipping decides downstream), marks disabled nodes whose rule holds succeeded, and answers
/// the nodes to dispatch now, marked [`State::Running`] in `states`. Call it after every
/// change of a node's state; it answers nothing when nothing can move.
pub fn advance(g: &Graph, rules: &[NodeRules], states: &mut [State]) -> Vec<usize> {
    let mut run = Vec::new();
    // in topological order: a decision here is final when the node's upstream already are
    for &i in &g.order {
        if states[i] != State::Pending {
            continue;
        }
        let inputs: Vec<Option<Input>> = g.up[i]
            .iter()
            .map(|&(u, c)| input(states[u], rules[u].allow_failure, c))
            .collect();
        match verdict(rules[i].rule, &inputs) {
            Some(true) if rules[i].disabled => {
                states[i] = State::Done {
                    succeeded: true,
                    decision: None,
                }
            }
            Some(true) => {
                states[i] = State::Running;
                run.push(i);
            }
            Some(false) => states[i] = State::Skipped,
            None => {}
        }
    }
    run
}

/// How a run ended, once every node is final: `Some(true)` succeeded, `Some(false)` failed
/// (some node failed that neither allows failure nor has a failure handler edge — `ON_FAILURE`
/// — that was taken), `None` while a node is pending or running.
pub fn outcome(g: &Graph, rules: &[NodeRules], states: &[State]) -> Option<bool> {
    if !states.iter().all(|s| s.is_final()) {
        return None;
    }
    let unhandled = (0..states.len()).any(|i| {
        matches!(
            states[i],
            State::Done {
                succeeded: false,
                ..
            }
        ) && !rules[i].allow_failure
            && !g.down[i]
                .iter()
                .any(|&(_, c)| c == EdgeCondition::OnFailure)
    });
    Some(!unhandled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::model::{Definition, Edge, Node, NodeKind};
    use proptest::prelude::*;

    fn def(n: usize, edges: &[(usize, usize, EdgeCondition)]) -> Definition {
        Definition {
            nodes: (0..n)
                .map(|i| Node {
                    key: format!("n{i}"),
                    name: None,
                    kind: NodeKind::Job { job_id: 1 },
                    trigger_rule: TriggerRule::AllSuccess,
                    disabled: false,
                    allow_failure: false,
                    param: None,
                })
                .collect(),
            edges: edges
                .iter()
                .map(|&(a, b, c)| Edge {
                    from: format!("n{a}"),
                    to: format!("n{b}"),
                    condition: c,
                })
                .collect(),
        }
    }

    /// Runs a workflow to its end where node `i` succeeds iff `ok[i]`; answers the states and
    /// how often each node was dispatched.
    fn simulate(g: &Graph, rules: &[NodeRules], ok: &[bool]) -> (Vec<State>, Vec<u32>) {
        let mut states = vec![State::Pending; g.keys.len()];
        let mut dispatched = vec![0; g.keys.len()];
        loop {
            let run = advance(g, rules, &mut states);
            if run.is_empty() {
                break;
            }
            for i in run {
                dispatched[i] += 1;
                states[i] = State::Done {
                    succeeded: ok[i],
                    decision: None,
                };
            }
        }
        (states, dispatched)
    }

    /// A failed branch skips only what depends on it; a failure handler runs; the run's
    /// outcome follows.
    #[test]
    fn a_failed_branch_leaves_its_sibling_alone() {
        // 0 → 1 → 3, 0 → 2 → 3 (ONE_SUCCESS at 3), 1 → 4 on failure
        let d = def(
            5,
            &[
                (0, 1, EdgeCondition::Always),
                (0, 2, EdgeCondition::Always),
                (1, 3, EdgeCondition::Always),
                (2, 3, EdgeCondition::Always),
                (1, 4, EdgeCondition::OnFailure),
            ],
        );
        let g = Graph::build(&d).unwrap();
        let mut rules = vec![NodeRules::default(); 5];
        let (states, runs) = simulate(&g, &rules, &[true, false, true, true, true]);
        assert_eq!(runs, [1, 1, 1, 0, 1], "3 needs both; 4 handles 1's failure");
        assert_eq!(states[3], State::Skipped);
        assert_eq!(
            outcome(&g, &rules, &states),
            Some(true),
            "the failure was handled"
        );
        rules[3].rule = TriggerRule::OneSuccess;
        let (states, runs) = simulate(&g, &rules, &[true, false, true, true, true]);
        assert_eq!(runs[3], 1, "one success is enough: {states:?}");
        // without the handler the run fails; allowing the failure makes it succeed
        let g2 = Graph::build(&def(2, &[(0, 1, EdgeCondition::Always)])).unwrap();
        let mut r2 = vec![NodeRules::default(); 2];
        let (s, runs) = simulate(&g2, &r2, &[false, true]);
        assert_eq!((runs, outcome(&g2, &r2, &s)), (vec![1, 0], Some(false)));
        r2[0].allow_failure = true;
        let (s, runs) = simulate(&g2, &r2, &[false, true]);
        assert_eq!((runs, outcome(&g2, &r2, &s)), (vec![1, 1], Some(true)));
        // a disabled node succeeds without running
        r2[0] = NodeRules {
            disabled: true,
            ..NodeRules::default()
        };
        let (s, runs) = simulate(&g2, &r2, &[false, true]);
        assert_eq!((runs, outcome(&g2, &r2, &s)), (vec![0, 1], Some(true)));
    }

    /// Decisions pick their branch; the other branch is skipped, and a join with NONE_FAILED
    /// still runs after it.
    #[test]
    fn a_decision_picks_a_branch() {
        let mut d = def(
            4,
            &[
                (0, 1, EdgeCondition::True),
                (0, 2, EdgeCondition::False),
                (1, 3, EdgeCondition::Always),
                (2, 3, EdgeCondition::Always),
            ],
        );
        d.nodes[0].kind = NodeKind::Decision {
            expression: "x".into(),
        };
        let g = Graph::build(&d).unwrap();
        let mut rules = vec![NodeRules::default(); 4];
        rules[3].rule = TriggerRule::NoneFailed;
        let mut states = vec![State::Pending; 4];
        assert_eq!(advance(&g, &rules, &mut states), vec![0]);
        states[0] = State::Done {
            succeeded: true,
            decision: Some(false),
        };
        assert_eq!(advance(&g, &rules, &mut states), vec![2]);
        assert_eq!(states[1], State::Skipped);
        states[2] = State::Done {
            succeeded: true,
            decision: None,
        };
        assert_eq!(advance(&g, &rules, &mut states), vec![3]);
    }

    /// Node count, raw edges (from, to, condition code), rule codes, outcomes.
    type Case = (usize, Vec<(usize, usize, u8)>, Vec<u8>, Vec<bool>);

    fn arb_case() -> impl Strategy<Value = Case> {
        (2usize..12).prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec((0..n, 0..n, 0u8..3), 0..30),
                prop::collection::vec(0u8..5, n),
                prop::collection::vec(any::<bool>(), n),
            )
        })
    }

    fn build(n: usize, raw: &[(usize, usize, u8)], rule_codes: &[u8]) -> (Graph, Vec<NodeRules>) {
        let mut edges: Vec<(usize, usize, EdgeCondition)> = raw
            .iter()
            .filter(|(a, b, _)| a < b)
            .map(|&(a, b, c)| {
                let c = [
                    EdgeCondition::Always,
                    EdgeCondition::OnSuccess,
                    EdgeCondition::OnFailure,
                ][c as usize];
                (a, b, c)
            })
            .collect();
        edges.sort_by_key(|e| (e.0, e.1));
        edges.dedup_by_key(|e| (e.0, e.1));
        let g = Graph::build(&def(n, &edges)).unwrap();
        let rules = rule_codes
            .iter()
            .map(|&r| NodeRules {
                rule: [
                    TriggerRule::AllSuccess,
                    TriggerRule::AllDone,
                    TriggerRule::OneFailed,
                    TriggerRule::NoneFailed,
                    TriggerRule::OneSuccess,
                ][r as usize],
                ..NodeRules::default()
            })
            .collect();
        (g, rules)
    }

    proptest! {
        /// Every run ends with every node final, each node dispatched at most once, and an
        /// outcome; advancing a finished run dispatches nothing.
        #[test]
        fn every_run_ends_with_each_node_run_at_most_once((n, raw, rule_codes, ok) in arb_case()) {
            let (g, rules) = build(n, &raw, &rule_codes);
            let (mut states, runs) = simulate(&g, &rules, &ok);
            prop_assert!(states.iter().all(|s| s.is_final()), "{states:?}");
            prop_assert!(runs.iter().all(|&r| r <= 1));
            prop_assert!(outcome(&g, &rules, &states).is_some());
            prop_assert!(advance(&g, &rules, &mut states).is_empty());
            // a node that ran had every upstream final first (roots aside) unless its rule
            // decides early, and a skipped node never ran
            for i in 0..n {
                if states[i] == State::Skipped {
                    prop_assert_eq!(runs[i], 0);
                }
            }
        }

        /// With ALWAYS edges and ALL_SUCCESS everywhere, a node runs exactly when none of its
        /// ancestors failed: a failure ends only the branches that depend on it.
        #[test]
        fn a_failure_ends_only_what_depends_on_it((n, raw, _rules, ok) in arb_case()) {
            let raw: Vec<(usize, usize, u8)> = raw.into_iter().map(|(a, b, _)| (a, b, 0)).collect();
            let (g, rules) = build(n, &raw, &vec![0; n]);
            let (_, runs) = simulate(&g, &rules, &ok);
            // ancestors by index order (edges go from lower to higher)
            let mut blocked = vec![false; n];
            for i in 0..n {
                blocked[i] = g.up[i].iter().any(|&(u, _)| blocked[u] || !ok[u]);
                prop_assert_eq!(runs[i] == 1, !blocked[i], "node {}", i);
            }
        }
    }
}
