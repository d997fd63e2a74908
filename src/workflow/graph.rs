//! A definition checked and indexed: [`Graph::build`] refuses what cannot run (duplicate or bad
//! keys, edges to unknown nodes, cycles, branch edges from nodes that are not decisions,
//! expressions that do not parse), naming the node concerned; the graph then answers each
//! node's upstream and downstream edges by index.

use std::collections::HashMap;

use super::expr;
use super::model::{Definition, EdgeCondition, MAX_EDGES, MAX_KEY, MAX_NODES, NodeKind};

/// One thing wrong with a definition.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// The node concerned, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.node {
            Some(n) => write!(f, "node `{n}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A checked definition, indexed.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Node keys by index (the definition's order).
    pub keys: Vec<String>,
    /// Each node's incoming edges: (upstream index, condition).
    pub up: Vec<Vec<(usize, EdgeCondition)>>,
    /// Each node's outgoing edges: (downstream index, condition).
    pub down: Vec<Vec<(usize, EdgeCondition)>>,
    /// The nodes in an order where every edge goes forward.
    pub order: Vec<usize>,
}

fn key_ok(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= MAX_KEY
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl Graph {
    /// Checks `def` and indexes it; every problem found, each naming its node.
    pub fn build(def: &Definition) -> Result<Graph, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut bad = |node: Option<&str>, message: String| {
            problems.push(Problem {
                node: node.map(str::to_string),
                message,
            })
        };
        if def.nodes.is_empty() {
            bad(None, "a workflow needs at least one node".into());
        }
        if def.nodes.len() > MAX_NODES {
            bad(None, format!("at most {MAX_NODES} nodes"));
        }
        if def.edges.len() > MAX_EDGES {
            bad(None, format!("at most {MAX_EDGES} edges"));
        }
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, n) in def.nodes.iter().enumerate() {
            if !key_ok(&n.key) {
                bad(
                    Some(&n.key),
                    format!("a key is 1 to {MAX_KEY} letters, digits, `_`, `-` or `.`"),
                );
            }
            if index.insert(n.key.as_str(), i).is_some() {
                bad(Some(&n.key), "the key is used twice".into());
            }
            if n.name.as_deref().is_some_and(|s| s.chars().count() > 255) {
                bad(Some(&n.key), "a name is at most 255 characters".into());
            }
            if n.param
                .as_deref()
                .is_some_and(|s| s.chars().count() > 2_000)
            {
                bad(Some(&n.key), "a param is at most 2,000 characters".into());
            }
            if let NodeKind::Decision { expression } = &n.kind
                && let Err(e) = expr::parse(expression)
            {
                bad(Some(&n.key), format!("the expression does not parse: {e}"));
            }
        }
        let n = def.nodes.len();
        let mut up = vec![Vec::new(); n];
        let mut down = vec![Vec::new(); n];
        let mut seen = std::collections::HashSet::new();
        for e in &def.edges {
            let (Some(&a), Some(&b)) = (index.get(e.from.as_str()), index.get(e.to.as_str()))
            else {
                for k in [&e.from, &e.to] {
                    if !index.contains_key(k.as_str()) {
                        bad(
                            Some(k),
                            "an edge names this node, which does not exist".into(),
                        );
                    }
                }
                continue;
            };
            if a == b {
                bad(Some(&e.from), "an edge from a node to itself".into());
                continue;
            }
            if !seen.insert((a, b)) {
                bad(
                    Some(&e.from),
                    format!("two edges from `{}` to `{}`", e.from, e.to),
                );
                continue;
            }
            let decision = matches!(def.nodes[a].kind, NodeKind::Decision { .. });
            match e.condition {
                EdgeCondition::True | EdgeCondition::False if !decision => bad(
                    Some(&e.from),
                    "TRUE and FALSE edges leave decision nodes only".into(),
                ),
                EdgeCondition::OnFailure if decision => bad(
                    Some(&e.from),
                    "a decision does not fail: use TRUE or FALSE edges".into(),
                ),
                _ => {}
            }
            up[b].push((a, e.condition));
            down[a].push((b, e.condition));
        }
        // Kahn's order; what it cannot reach is on or behind a cycle
        let mut missing: Vec<usize> = up.iter().map(Vec::len).collect();
        let mut order: Vec<usize> = (0..n).filter(|&i| missing[i] == 0).collect();
        let mut at = 0;
        while at < order.len() {
            let i = order[at];
            at += 1;
            for &(d, _) in &down[i] {
                missing[d] -= 1;
                if missing[d] == 0 {
                    order.push(d);
                }
            }
        }
        if order.len() < n && n > 0 {
            let stuck: Vec<&str> = (0..n)
                .filter(|i| missing[*i] > 0)
                .map(|i| def.nodes[i].key.as_str())
                .collect();
            bad(
                stuck.first().copied(),
                format!(
                    "the edges make a cycle through or before {}",
                    stuck
                        .iter()
                        .take(10)
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Graph {
            keys: def.nodes.iter().map(|n| n.key.clone()).collect(),
            up,
            down,
            order,
        })
    }
}

impl Graph {
    /// The nodes of `def` (this graph's definition) that can never run, each named: a node whose
    /// trigger rule cannot hold with what its incoming edges can deliver (`ALL_SUCCESS` over an
    /// edge that never carries a success, `ONE_FAILED` with no edge that can carry a failure,
    /// `ONE_SUCCESS` with no edge that can carry a success), or whose every upstream can never
    /// run. Each node has at most one edge from a given upstream, so inputs are judged one by one.
    pub fn unreachable(&self, def: &Definition) -> Vec<Problem> {
        use super::model::TriggerRule;
        let n = def.nodes.len();
        let mut runs = vec![false; n];
        for &i in &self.order {
            // what each input can carry: (a success, a failure)
            let inputs: Vec<(bool, bool)> = self.up[i]
                .iter()
                .map(|&(u, c)| {
                    if !runs[u] {
                        return (false, false);
                    }
                    let node = &def.nodes[u];
                    let decision = matches!(node.kind, NodeKind::Decision { .. }) && !node.disabled;
                    // a disabled node succeeds; a failure that is allowed counts as success
                    let can_fail = !node.disabled && !node.allow_failure;
                    match c {
                        EdgeCondition::Always => (true, can_fail),
                        EdgeCondition::OnSuccess => (true, false),
                        EdgeCondition::OnFailure => (can_fail, false),
                        EdgeCondition::True | EdgeCondition::False => (decision, false),
                    }
                })
                .collect();
            let node = &def.nodes[i];
            runs[i] = inputs.is_empty()
                || match node.trigger_rule {
                    TriggerRule::AllSuccess => inputs.iter().all(|x| x.0),
                    TriggerRule::AllDone | TriggerRule::NoneFailed => true,
                    TriggerRule::OneFailed => inputs.iter().any(|x| x.1),
                    TriggerRule::OneSuccess => inputs.iter().any(|x| x.0),
                };
        }
        (0..n)
            .filter(|&i| !runs[i])
            .map(|i| Problem {
                node: Some(def.nodes[i].key.clone()),
                message: format!(
                    "this node can never run: its trigger rule {} cannot hold with what its \
                     incoming edges can carry",
                    serde_json::to_value(def.nodes[i].trigger_rule)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::model::{Edge, Node, TriggerRule};

    pub(crate) fn job(key: &str) -> Node {
        Node {
            key: key.into(),
            name: None,
            kind: NodeKind::Job { job_id: 1 },
            trigger_rule: TriggerRule::AllSuccess,
            disabled: false,
            allow_failure: false,
            param: None,
        }
    }

    fn edge(from: &str, to: &str, condition: EdgeCondition) -> Edge {
        Edge {
            from: from.into(),
            to: to.into(),
            condition,
        }
    }

    /// A good DAG is ordered with every edge forward.
    #[test]
    fn a_dag_is_ordered() {
        let def = Definition {
            nodes: vec![job("c"), job("a"), job("b")],
            edges: vec![
                edge("a", "b", EdgeCondition::Always),
                edge("b", "c", EdgeCondition::OnSuccess),
                edge("a", "c", EdgeCondition::OnFailure),
            ],
        };
        let g = Graph::build(&def).unwrap();
        let pos = |k: &str| g.order.iter().position(|&i| g.keys[i] == k).unwrap();
        assert!(pos("a") < pos("b") && pos("b") < pos("c"));
        assert_eq!(g.up[0].len(), 2);
    }

    /// Each kind of mistake is found, naming its node.
    #[test]
    fn mistakes_name_their_node() {
        let mut decide = job("d");
        decide.kind = NodeKind::Decision {
            expression: "rows >".into(),
        };
        let def = Definition {
            nodes: vec![
                job("a"),
                job("a"),
                job("bad key!"),
                job("x"),
                job("y"),
                decide,
            ],
            edges: vec![
                edge("a", "ghost", EdgeCondition::Always),
                edge("x", "y", EdgeCondition::True),
                edge("x", "x", EdgeCondition::Always),
            ],
        };
        let problems = Graph::build(&def).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        for want in [
            "node `a`: the key is used twice",
            "node `bad key!`: a key is",
            "node `ghost`: an edge names this node",
            "node `x`: TRUE and FALSE edges leave decision nodes only",
            "node `x`: an edge from a node to itself",
            "node `d`: the expression does not parse",
        ] {
            assert!(
                text.iter().any(|t| t.starts_with(want)),
                "{want} in {text:?}"
            );
        }
        let cycle = Definition {
            nodes: vec![job("s"), job("p"), job("q"), job("r")],
            edges: vec![
                edge("s", "p", EdgeCondition::Always),
                edge("p", "q", EdgeCondition::Always),
                edge("q", "r", EdgeCondition::Always),
                edge("r", "p", EdgeCondition::Always),
            ],
        };
        let p = Graph::build(&cycle).unwrap_err();
        assert_eq!(p.len(), 1);
        assert!(
            p[0].message.contains("cycle") && p[0].message.contains("`p`"),
            "{p:?}"
        );
        assert!(Graph::build(&Definition::default()).is_err());
    }

    /// A node whose rule cannot hold with what its edges carry is named; the same shapes with a
    /// rule that can hold pass; skipping spreads to what only such a node feeds.
    #[test]
    fn nodes_that_can_never_run_are_named() {
        let decide = Node {
            kind: NodeKind::Decision {
                expression: "x > 1".into(),
            },
            ..job("d")
        };
        let rule = |key: &str, r: TriggerRule| Node {
            trigger_rule: r,
            ..job(key)
        };
        let check = |nodes: Vec<Node>, edges: Vec<Edge>| {
            let def = Definition { nodes, edges };
            let g = Graph::build(&def).unwrap();
            let mut keys: Vec<String> = g
                .unreachable(&def)
                .into_iter()
                .map(|p| p.node.unwrap())
                .collect();
            keys.sort();
            keys
        };
        // both branches of one decision into ALL_SUCCESS: one of them is always skipped
        assert_eq!(
            check(
                vec![
                    decide.clone(),
                    job("t"),
                    job("f"),
                    job("both"),
                    job("after")
                ],
                vec![
                    edge("d", "t", EdgeCondition::True),
                    edge("d", "f", EdgeCondition::False),
                    edge("t", "both", EdgeCondition::OnFailure),
                    edge("f", "both", EdgeCondition::OnSuccess),
                    edge("both", "after", EdgeCondition::Always),
                ],
            ),
            Vec::<String>::new(),
            "t and f can each run and fail or succeed"
        );
        // ONE_FAILED behind edges that never carry a failure; what only it feeds is skipped too
        assert_eq!(
            check(
                vec![job("a"), rule("alert", TriggerRule::OneFailed), job("next")],
                vec![
                    edge("a", "alert", EdgeCondition::OnSuccess),
                    edge("alert", "next", EdgeCondition::Always),
                ],
            ),
            vec!["alert".to_string(), "next".to_string()]
        );
        // the same with an ALWAYS edge can run; an upstream that may fail changes nothing else
        assert!(
            check(
                vec![job("a"), rule("alert", TriggerRule::OneFailed)],
                vec![edge("a", "alert", EdgeCondition::Always)],
            )
            .is_empty()
        );
        // a failure that is allowed never reaches ON_FAILURE; a disabled decision takes no branch
        let lenient = Node {
            allow_failure: true,
            ..job("a")
        };
        let off = Node {
            disabled: true,
            ..decide
        };
        assert_eq!(
            check(
                vec![
                    lenient,
                    job("handler"),
                    off,
                    job("yes"),
                    rule("any", TriggerRule::OneSuccess)
                ],
                vec![
                    edge("a", "handler", EdgeCondition::OnFailure),
                    edge("d", "yes", EdgeCondition::True),
                    edge("a", "any", EdgeCondition::OnFailure),
                    edge("d", "any", EdgeCondition::False),
                ],
            ),
            vec!["any".to_string(), "handler".to_string(), "yes".to_string()]
        );
    }
}
