//! Workflows: create, edit (each save a new version, refused when someone saved in
//! between), validate, list, read one version, delete (not while another workflow runs it) —
//! confined to the user's groups. A DAG is
//! checked as a whole and every problem names its node: the structure ([`Graph::build`]), nodes
//! that can never run ([`Graph::unreachable`]), each
//! job node's job (it exists and is in a group the user may use), each nested workflow (it
//! exists, the user may see it, and no chain of nested workflows leads back to this one).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::audit::shown;
use super::reach::{MAX_RUN_NODES, Reach, Refs, Root};
use super::{Console, Page, Principal};
use crate::error::{Error, Result};
use crate::store::{jobs, workflows};
use crate::workflow::{Definition, Graph, NodeKind, Problem};

/// Longest workflow name.
pub const MAX_NAME: usize = 255;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 1024;

/// A workflow as a user writes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowInput {
    /// The executor group it belongs to.
    pub job_group: i32,
    /// Its name (1 to 255 characters).
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: Option<String>,
    /// The DAG.
    pub definition: Definition,
    /// On an edit: the version the edit was made from (the save is refused if another was
    /// saved since).
    #[serde(default)]
    pub version: Option<i32>,
    /// NONE (the default), CRON or FIX_RATE; absent on an edit: unchanged.
    #[serde(default)]
    pub schedule_type: Option<String>,
    /// The cron expression, or FIX_RATE's period in seconds.
    #[serde(default)]
    pub schedule_conf: Option<String>,
    /// DO_NOTHING (the default) or FIRE_ONCE_NOW, for a fire later than the misfire threshold.
    #[serde(default)]
    pub misfire_strategy: Option<String>,
    /// Whether its schedule runs (false by default; needs a schedule).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// While a run is running, a new start: PARALLEL (the default) runs too, SKIP is refused
    /// (a scheduled fire skipped), QUEUE waits for the running one to end.
    #[serde(default)]
    pub concurrency: Option<String>,
    /// Most runs QUEUE keeps waiting (1 to 1000, 10 by default).
    #[serde(default)]
    pub max_queued: Option<i32>,
}

/// Concurrency policies.
pub const CONCURRENCY: &[&str] = &["PARALLEL", "SKIP", "QUEUE"];
/// Most runs a QUEUE policy may keep waiting.
pub const MAX_QUEUED: i32 = 1000;

/// A workflow's schedule and concurrency, checked.
struct Scheduling {
    schedule_type: String,
    schedule_conf: Option<String>,
    misfire_strategy: String,
    trigger_status: i16,
    trigger_next_time: i64,
    concurrency: String,
    max_queued: i32,
}

/// A workflow as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowView {
    /// Id.
    pub id: i32,
    /// Its group.
    pub job_group: i32,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Who saved this version.
    pub author: String,
    /// This version.
    pub version: i32,
    /// This version's DAG.
    pub definition: Definition,
    /// Created (RFC 3339).
    pub created_at: Option<String>,
    /// This version saved (RFC 3339).
    pub updated_at: Option<String>,
    /// NONE, CRON or FIX_RATE.
    pub schedule_type: String,
    /// The cron expression or period.
    pub schedule_conf: Option<String>,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    pub misfire_strategy: String,
    /// Whether its schedule runs.
    pub enabled: bool,
    /// Its next fire (RFC 3339), while enabled.
    pub trigger_next_time: Option<String>,
    /// PARALLEL, SKIP or QUEUE.
    pub concurrency: String,
    /// Most runs QUEUE keeps waiting.
    pub max_queued: i32,
}

/// What a validation found.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    /// No problem found.
    pub valid: bool,
    /// Every problem, each naming its node when it concerns one.
    pub problems: Vec<Problem>,
}

/// Filters of the workflow list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkflowQuery {
    /// Only this group (0 or absent: every group the user may see).
    pub job_group: Option<i32>,
    /// Name contains.
    pub name: Option<String>,
    /// First item.
    pub offset: Option<u64>,
    /// Page size.
    pub limit: Option<u64>,
}

fn view(w: entity::xjob_workflow::Model) -> WorkflowView {
    WorkflowView {
        id: w.id,
        job_group: w.job_group,
        name: w.name,
        description: w.description,
        author: w.author,
        version: w.version,
        // stored only after validation; an unreadable one shows empty rather than failing
        definition: serde_json::from_str(&w.definition).unwrap_or_default(),
        created_at: super::rfc3339_ms(Some(w.created_at)),
        updated_at: super::rfc3339_ms(Some(w.updated_at)),
        enabled: w.trigger_status == 1,
        trigger_next_time: (w.trigger_status == 1 && w.trigger_next_time > 0)
            .then(|| super::rfc3339_ms(Some(w.trigger_next_time)))
            .flatten(),
        schedule_type: w.schedule_type,
        schedule_conf: w.schedule_conf,
        misfire_strategy: w.misfire_strategy,
        concurrency: w.concurrency,
        max_queued: w.max_queued,
    }
}

fn problem(node: &str, message: String) -> Problem {
    Problem {
        node: Some(node.to_string()),
        message,
    }
}

impl Console {
    async fn visible_workflow(
        &self,
        who: &Principal,
        id: i32,
    ) -> Result<entity::xjob_workflow::Model> {
        let w = workflows::get(self.db(), id).await?;
        who.require_group(w.job_group, "id")?;
        Ok(w)
    }

    /// Every problem of `input` (for workflow `this` on an edit).
    async fn problems(
        &self,
        who: &Principal,
        this: Option<i32>,
        input: &WorkflowInput,
    ) -> Result<Vec<Problem>> {
        let mut found = Vec::new();
        let name = input.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME {
            found.push(Problem {
                node: None,
                message: format!("name: must be 1 to {MAX_NAME} characters"),
            });
        }
        if input
            .description
            .as_deref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
        {
            found.push(Problem {
                node: None,
                message: format!("description: at most {MAX_DESCRIPTION} characters"),
            });
        }
        match Graph::build(&input.definition) {
            Err(p) => found.extend(p),
            Ok(g) => found.extend(g.unreachable(&input.definition)),
        }
        self.node_problems(who, this, input, &mut found).await?;
        Ok(found)
    }

    /// The problems of `input`'s nodes: each job node's job exists, is in a group `who` may
    /// use, and takes no node param that would be a command line while scripts are disabled;
    /// each nested workflow exists, and neither it nor anything it reaches is out of `who`'s
    /// groups or runs workflow `this` in turn; one trigger expands to at most
    /// [`MAX_RUN_NODES`] node runs. Each distinct job and workflow is read once.
    async fn node_problems(
        &self,
        who: &Principal,
        this: Option<i32>,
        input: &WorkflowInput,
        found: &mut Vec<Problem>,
    ) -> Result<()> {
        let refs = Refs::of(&input.definition);
        let jobs: HashMap<i32, jobs::JobKind> = jobs::kinds_of(self.db(), &refs.jobs)
            .await?
            .into_iter()
            .map(|k| (k.id, k))
            .collect();
        let mut nested: Vec<i32> = refs.nested.clone();
        nested.sort_unstable();
        nested.dedup();
        let mut reaches: HashMap<i32, Result<Reach>> = HashMap::new();
        for id in nested.iter().filter(|id| Some(**id) != this) {
            let r = match self.reach(Root::Current(*id)).await {
                Err(e @ (Error::NotFound { .. } | Error::Invalid { .. })) => Err(e),
                other => Ok(other?),
            };
            reaches.insert(*id, r);
        }
        let scripts = self.engine.config().security.scripts_enabled;
        let mut runs = refs.plain;
        for n in &input.definition.nodes {
            match n.kind {
                NodeKind::Job { job_id } => match jobs.get(&job_id) {
                    None => found.push(problem(&n.key, format!("job {job_id} does not exist"))),
                    Some(k) if who.require_group(k.group, "jobId").is_err() => found.push(problem(
                        &n.key,
                        format!("no permission for job {job_id}'s group {}", k.group),
                    )),
                    Some(k) if k.runs_command() && n.param.is_some() && !scripts => {
                        found.push(problem(
                            &n.key,
                            format!(
                                "job {job_id} runs its param as a command line (commandJobHandler): a node param would choose the command, and script jobs are disabled (security.scripts_enabled)"
                            ),
                        ))
                    }
                    _ => {}
                },
                NodeKind::Workflow { workflow_id } => {
                    if Some(workflow_id) == this {
                        found.push(problem(&n.key, "a workflow cannot run itself".into()));
                        runs = u64::MAX;
                        continue;
                    }
                    match reaches.get(&workflow_id) {
                        Some(Ok(r)) => {
                            runs = runs.saturating_add(1).saturating_add(r.runs);
                            if let Some(this) = this
                                && (r.workflows.contains(&this) || r.runs == u64::MAX)
                            {
                                found.push(problem(
                                    &n.key,
                                    format!("workflow {workflow_id} runs this one in turn"),
                                ));
                            } else if let Some(g) =
                                r.groups.iter().find(|g| who.require_group(**g, "workflowId").is_err())
                            {
                                found.push(problem(
                                    &n.key,
                                    format!(
                                        "no permission for workflow {workflow_id}: it reaches executor group {g}"
                                    ),
                                ));
                            }
                        }
                        Some(Err(Error::NotFound { .. })) | None => found.push(problem(
                            &n.key,
                            format!("workflow {workflow_id} does not exist"),
                        )),
                        Some(Err(e)) => found.push(problem(&n.key, e.to_string())),
                    }
                }
                NodeKind::Decision { .. } => {}
            }
        }
        if runs > MAX_RUN_NODES {
            let shown = if runs == u64::MAX {
                "unboundedly many".to_string()
            } else {
                runs.to_string()
            };
            found.push(Problem {
                node: None,
                message: format!(
                    "one trigger would start {shown} node runs (nested workflows counted as often as they are nested); at most {MAX_RUN_NODES}"
                ),
            });
        }
        Ok(())
    }

    /// Checks `input` (for workflow `id` when given) without saving anything.
    pub async fn validate_workflow(
        &self,
        who: &Principal,
        id: Option<i32>,
        input: &WorkflowInput,
    ) -> Result<Validation> {
        who.require_group(input.job_group, "jobGroup")?;
        let problems = self.problems(who, id, input).await?;
        Ok(Validation {
            valid: problems.is_empty(),
            problems,
        })
    }

    /// The schedule and concurrency `input` asks for (absent fields keep `current`'s), checked;
    /// an enabled schedule's next fire is kept when its schedule did not change.
    fn scheduling(
        &self,
        input: &WorkflowInput,
        current: Option<&entity::xjob_workflow::Model>,
    ) -> Result<Scheduling> {
        use crate::model::{MisfireStrategy, ScheduleType};
        use crate::schedule::Schedule;
        let pick = |given: &Option<String>, old: Option<String>, default: &str| {
            given
                .as_deref()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .or(old)
                .unwrap_or_else(|| default.to_string())
        };
        let schedule_type = pick(
            &input.schedule_type,
            current.map(|c| c.schedule_type.clone()),
            "NONE",
        );
        let kind: ScheduleType = schedule_type.parse()?;
        let schedule_conf = match &input.schedule_conf {
            Some(c) => Some(c.trim().to_string()).filter(|c| !c.is_empty()),
            None if input.schedule_type.is_some() => None,
            None => current.and_then(|c| c.schedule_conf.clone()),
        };
        if schedule_conf.as_deref().is_some_and(|c| c.len() > 128) {
            return Err(Error::Invalid {
                field: "scheduleConf",
                reason: "at most 128 characters".into(),
            });
        }
        let schedule = Schedule::parse(
            kind,
            schedule_conf.as_deref(),
            self.engine.config().time_zone(),
        )?;
        let misfire_strategy = pick(
            &input.misfire_strategy,
            current.map(|c| c.misfire_strategy.clone()),
            "DO_NOTHING",
        );
        misfire_strategy.parse::<MisfireStrategy>()?;
        let concurrency = pick(
            &input.concurrency,
            current.map(|c| c.concurrency.clone()),
            "PARALLEL",
        );
        if !CONCURRENCY.contains(&concurrency.as_str()) {
            return Err(Error::Invalid {
                field: "concurrency",
                reason: format!("one of {}", CONCURRENCY.join(", ")),
            });
        }
        let max_queued = input
            .max_queued
            .or(current.map(|c| c.max_queued))
            .unwrap_or(10);
        if !(1..=MAX_QUEUED).contains(&max_queued) {
            return Err(Error::Invalid {
                field: "maxQueued",
                reason: format!("1 to {MAX_QUEUED}"),
            });
        }
        let enabled = input
            .enabled
            .unwrap_or(current.is_some_and(|c| c.trigger_status == 1));
        let unchanged = current.filter(|c| {
            c.trigger_status == 1
                && c.trigger_next_time > 0
                && c.schedule_type == schedule_type
                && c.schedule_conf == schedule_conf
        });
        let trigger_next_time = match (enabled, unchanged) {
            (false, _) => 0,
            (true, Some(c)) => c.trigger_next_time,
            (true, None) => {
                if kind == ScheduleType::None {
                    return Err(Error::Invalid {
                        field: "enabled",
                        reason: "a workflow without a schedule (NONE) runs only when triggered"
                            .into(),
                    });
                }
                schedule
                    .first_after(self.engine.clock().now_ms())
                    .ok_or_else(|| Error::Invalid {
                        field: "scheduleConf",
                        reason: "the schedule never fires".into(),
                    })?
            }
        };
        Ok(Scheduling {
            schedule_type,
            schedule_conf,
            misfire_strategy,
            trigger_status: i16::from(enabled),
            trigger_next_time,
            concurrency,
            max_queued,
        })
    }

    async fn checked(
        &self,
        who: &Principal,
        id: Option<i32>,
        input: &WorkflowInput,
    ) -> Result<String> {
        self.check_group(who, input.job_group).await?;
        let problems = self.problems(who, id, input).await?;
        if !problems.is_empty() {
            // every problem, as validation lists them
            let all: Vec<String> = problems.iter().map(ToString::to_string).collect();
            return Err(Error::Invalid {
                field: "definition",
                reason: all.join("; "),
            });
        }
        serde_json::to_string(&input.definition).map_err(|e| Error::Invalid {
            field: "definition",
            reason: e.to_string(),
        })
    }

    /// Creates a workflow (version 1).
    pub async fn create_workflow(
        &self,
        who: &Principal,
        input: WorkflowInput,
    ) -> Result<WorkflowView> {
        let definition = self.checked(who, None, &input).await?;
        let sc = self.scheduling(&input, None)?;
        let now = self.engine.clock().now_ms();
        let w = workflows::insert(
            self.db(),
            entity::xjob_workflow::Model {
                id: 0,
                job_group: input.job_group,
                name: input.name.trim().to_string(),
                description: input.description.filter(|d| !d.trim().is_empty()),
                author: who.username.clone(),
                version: 1,
                definition,
                created_at: now,
                updated_at: now,
                schedule_type: sc.schedule_type,
                schedule_conf: sc.schedule_conf,
                misfire_strategy: sc.misfire_strategy,
                trigger_status: sc.trigger_status,
                trigger_next_time: sc.trigger_next_time,
                concurrency: sc.concurrency,
                max_queued: sc.max_queued,
            },
        )
        .await?;
        self.engine.workflow_schedules_changed();
        self.audit(
            who,
            "workflow.create",
            "workflow",
            w.id,
            format!(
                "`{}`, {} node(s)",
                shown(&w.name),
                input.definition.nodes.len()
            ),
        )
        .await;
        Ok(view(w))
    }

    /// Saves a new version of a workflow; `input.version` must be its current version.
    pub async fn update_workflow(
        &self,
        who: &Principal,
        id: i32,
        input: WorkflowInput,
    ) -> Result<WorkflowView> {
        let current = self.visible_workflow(who, id).await?;
        // an edit changes what the workflow runs: its caller may act on all it reaches now
        self.require_reach(who, Root::Current(id), &format!("workflow {id}"), "id")
            .await?;
        let Some(expected) = input.version else {
            return Err(Error::Invalid {
                field: "version",
                reason: "the version the edit was made from is required".into(),
            });
        };
        let definition = self.checked(who, Some(id), &input).await?;
        let sc = self.scheduling(&input, Some(&current))?;
        let w = workflows::update(
            self.db(),
            entity::xjob_workflow::Model {
                id,
                job_group: current.job_group,
                name: input.name.trim().to_string(),
                description: input.description.filter(|d| !d.trim().is_empty()),
                author: who.username.clone(),
                version: expected,
                definition,
                created_at: current.created_at,
                updated_at: self.engine.clock().now_ms(),
                schedule_type: sc.schedule_type,
                schedule_conf: sc.schedule_conf,
                misfire_strategy: sc.misfire_strategy,
                trigger_status: sc.trigger_status,
                trigger_next_time: sc.trigger_next_time,
                concurrency: sc.concurrency,
                max_queued: sc.max_queued,
            },
            expected,
        )
        .await?;
        self.engine.workflow_schedules_changed();
        self.audit(
            who,
            "workflow.update",
            "workflow",
            id,
            format!("version {}", w.version),
        )
        .await;
        Ok(view(w))
    }

    /// A workflow: its current version, or `version` when given.
    pub async fn get_workflow(
        &self,
        who: &Principal,
        id: i32,
        version: Option<i32>,
    ) -> Result<WorkflowView> {
        let w = self.visible_workflow(who, id).await?;
        let Some(v) = version.filter(|v| *v != w.version) else {
            return Ok(view(w));
        };
        let old = workflows::version(self.db(), id, v).await?;
        Ok(view(entity::xjob_workflow::Model {
            version: old.version,
            definition: old.definition,
            author: old.author,
            updated_at: old.created_at,
            ..w
        }))
    }

    /// Workflows the user may see, newest first.
    pub async fn list_workflows(
        &self,
        who: &Principal,
        q: &WorkflowQuery,
    ) -> Result<Page<WorkflowView>> {
        let (offset, limit) = super::page_bounds(q.offset, q.limit)?;
        let groups = match q.job_group.filter(|g| *g > 0) {
            Some(g) => {
                who.require_group(g, "jobGroup")?;
                Some(vec![g])
            }
            None => who.visible_groups(),
        };
        let (total, rows) = workflows::page(
            self.db(),
            groups.as_deref(),
            q.name.as_deref(),
            offset,
            limit,
        )
        .await?;
        Ok(Page {
            total,
            items: rows.into_iter().map(view).collect(),
        })
    }

    /// Starts (`on`) or stops a workflow's schedule without a new version.
    pub async fn schedule_workflow(
        &self,
        who: &Principal,
        id: i32,
        on: bool,
    ) -> Result<WorkflowView> {
        let w = self.visible_workflow(who, id).await?;
        self.require_reach(who, Root::Current(id), &format!("workflow {id}"), "id")
            .await?;
        let input = WorkflowInput {
            enabled: Some(on),
            ..WorkflowInput::default()
        };
        let sc = self.scheduling(&input, Some(&w))?;
        workflows::set_schedule(self.db(), id, sc.trigger_status, sc.trigger_next_time).await?;
        self.engine.workflow_schedules_changed();
        self.audit(
            who,
            if on {
                "workflow.start"
            } else {
                "workflow.stop"
            },
            "workflow",
            id,
            shown(&w.name),
        )
        .await;
        Ok(view(workflows::get(self.db(), id).await?))
    }

    /// Deletes a workflow and its versions.
    pub async fn delete_workflow(&self, who: &Principal, id: i32) -> Result<()> {
        let w = self.visible_workflow(who, id).await?;
        let nesting = workflows::nesting(self.db(), id).await?;
        if !nesting.is_empty() {
            let ids: Vec<String> = nesting.iter().map(i32::to_string).collect();
            return Err(Error::Conflict {
                reason: format!("workflow {id} runs in workflow(s) {}", ids.join(", ")),
            });
        }
        if crate::store::workflow_runs::any_running(self.db(), id).await? {
            return Err(Error::Conflict {
                reason: format!("a run of workflow {id} is running; stop it first"),
            });
        }
        workflows::delete(self.db(), id).await?;
        self.audit(who, "workflow.delete", "workflow", id, shown(&w.name))
            .await;
        Ok(())
    }
}
