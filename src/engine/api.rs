//! What an embedding application asks its engine, without SQL: runs of a job, one run, job and
//! group reads and edits. Each is the console's operation (the same validation, the same
//! answers as `/v1`) done by the engine itself, which may see and change everything.

use super::Engine;
use crate::console::groups::{GroupInput, GroupView};
use crate::console::jobs::{JobQuery, JobView};
use crate::console::logs::{LogQuery, LogView};
use crate::console::workflow_runs::{RunQuery, RunView};
use crate::console::workflows::{WorkflowInput, WorkflowView};
use crate::console::{Console, Page, Paging, Principal};
use crate::error::Result;
use crate::jobs::JobSpec;

impl Engine {
    fn console(&self) -> (Console, Principal) {
        (Console::new(self.clone()), Principal::engine())
    }

    /// Runs of job `job_id`, newest first (a run being dispatched shows `running`).
    ///
    /// ```no_run
    /// # async fn demo(engine: xjob::Engine, job: i32) -> xjob::Result<()> {
    /// use xjob::console::Paging;
    /// for run in engine.runs(job, Paging::first(10)).await?.items {
    ///     println!("{} {} {:?}", run.id, run.status, run.handle_msg);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn runs(&self, job_id: i32, page: Paging) -> Result<Page<LogView>> {
        let (console, me) = self.console();
        console.get_job(&me, job_id).await?;
        let q = LogQuery {
            job_id: Some(job_id),
            offset: Some(page.offset),
            limit: Some(page.limit),
            ..LogQuery::default()
        };
        console.list_logs(&me, &q).await
    }

    /// One run by its log id.
    pub async fn run(&self, log_id: i64) -> Result<LogView> {
        let (console, me) = self.console();
        console.get_log(&me, log_id).await
    }

    /// Jobs matching `query` (its fields as the `/v1/jobs` filters), by id.
    pub async fn jobs(&self, query: &JobQuery) -> Result<Page<JobView>> {
        let (console, me) = self.console();
        console.list_jobs(&me, query).await
    }

    /// One job.
    pub async fn job(&self, job_id: i32) -> Result<JobView> {
        let (console, me) = self.console();
        console.get_job(&me, job_id).await
    }

    /// Replaces a job's definition (validated as on create); a running job keeps running on
    /// its new schedule.
    pub async fn update_job(&self, job_id: i32, spec: JobSpec) -> Result<JobView> {
        let (console, me) = self.console();
        console.update_job(&me, job_id, spec).await
    }

    /// Deletes a job with its runs and GLUE history.
    pub async fn remove_job(&self, job_id: i32) -> Result<()> {
        let (console, me) = self.console();
        console.delete_job(&me, job_id).await
    }

    /// Executor groups, by id.
    pub async fn groups(&self, page: Paging) -> Result<Page<GroupView>> {
        let (offset, limit) = crate::console::page_bounds(Some(page.offset), Some(page.limit))?;
        let (console, me) = self.console();
        console.list_groups(&me, None, None, offset, limit).await
    }

    /// One executor group, with the executors registered under it.
    pub async fn group(&self, group_id: i32) -> Result<GroupView> {
        let (console, me) = self.console();
        console.get_group(&me, group_id).await
    }

    /// Creates an executor group (see [`Engine::ensure_group`] for the find-or-create form).
    pub async fn add_group(&self, input: GroupInput) -> Result<GroupView> {
        let (console, me) = self.console();
        console.create_group(&me, input).await
    }

    /// Changes an executor group.
    pub async fn update_group(&self, group_id: i32, input: GroupInput) -> Result<GroupView> {
        let (console, me) = self.console();
        console.update_group(&me, group_id, input).await
    }

    /// Deletes an executor group that has no jobs.
    pub async fn remove_group(&self, group_id: i32) -> Result<()> {
        let (console, me) = self.console();
        console.delete_group(&me, group_id).await
    }

    /// Creates a workflow (version 1), validated as `/v1/workflows` does (every problem of its
    /// DAG named by node).
    ///
    /// ```no_run
    /// # async fn demo(engine: xjob::Engine, group: i32, extract: i32, load: i32)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// use xjob::console::workflows::WorkflowInput;
    /// use xjob::model::TriggerType;
    /// let definition = serde_json::from_value(serde_json::json!({
    ///     "nodes": [
    ///         { "key": "extract", "type": "JOB", "jobId": extract },
    ///         { "key": "load", "type": "JOB", "jobId": load, "param": "day=${day}" }
    ///     ],
    ///     "edges": [{ "from": "extract", "to": "load" }]
    /// }))?;
    /// let w = engine
    ///     .add_workflow(WorkflowInput {
    ///         job_group: group,
    ///         name: "nightly".into(),
    ///         definition,
    ///         ..WorkflowInput::default()
    ///     })
    ///     .await?;
    /// let run = engine
    ///     .trigger_workflow(w.id, TriggerType::Api, Some(r#"{"day":"2026-11-26"}"#.into()))
    ///     .await?;
    /// println!("{}", engine.workflow_run(run).await?.status);
    /// # Ok(()) }
    /// ```
    pub async fn add_workflow(&self, input: WorkflowInput) -> Result<WorkflowView> {
        let (console, me) = self.console();
        console.create_workflow(&me, input).await
    }

    /// Saves a new version of a workflow (`input.version`: the version it was edited from).
    pub async fn update_workflow(&self, id: i32, input: WorkflowInput) -> Result<WorkflowView> {
        let (console, me) = self.console();
        console.update_workflow(&me, id, input).await
    }

    /// Starts (`on`) or stops a workflow's schedule.
    pub async fn schedule_workflow(&self, id: i32, on: bool) -> Result<WorkflowView> {
        let (console, me) = self.console();
        console.schedule_workflow(&me, id, on).await
    }

    /// One workflow's current version.
    pub async fn workflow(&self, id: i32) -> Result<WorkflowView> {
        let (console, me) = self.console();
        console.get_workflow(&me, id, None).await
    }

    /// Deletes a workflow (not while one of its runs is running or another workflow runs it).
    pub async fn remove_workflow(&self, id: i32) -> Result<()> {
        let (console, me) = self.console();
        console.delete_workflow(&me, id).await
    }

    /// One workflow run with every node run.
    pub async fn workflow_run(&self, run_id: i64) -> Result<RunView> {
        let (console, me) = self.console();
        console.get_workflow_run(&me, run_id).await
    }

    /// Workflow runs matching `query`, newest first.
    pub async fn workflow_runs(&self, query: &RunQuery) -> Result<Page<RunView>> {
        let (console, me) = self.console();
        console.list_workflow_runs(&me, query).await
    }
}
