//! sea-orm entities for the XXL-JOB 2.4 schema (protocol.md §8), one module per table, with the exact
//! table and column names so an existing XXL-JOB database can be taken over.
//!
//! xjob's additions are extra columns, never renamed ones:
//! - `xxl_job_info.time_zone`: the job's own time zone for CRON (IANA name; NULL = the center's).
//! - `xxl_job_info.retry_interval`: seconds to wait before a fail retry (0 = at once, as XXL-JOB).
//! - `xxl_job_info.alarm_webhook`: a URL that receives a JSON POST when a run fails.
//! - `xxl_job_log.fire_time`: the nominal fire time (epoch ms) of a scheduled fire; unique per job.
//! - `xxl_job_log.fire_state`: 1 while a scheduled fire is recorded but not yet dispatched, a
//!   random claim token (≥ 2) while one node dispatches it, 0 once dispatched.
//! - `xxl_job_log.alarm_status` keeps XXL-JOB's values, but a success is written with 1 ("no
//!   alarm needed") together with its result (XXL-JOB leaves it 0), so the fail monitor's index
//!   `i_alarm_fire (alarm_status, fire_state)` holds only runs in flight and unhandled failures.
//! - `xxl_job_log.trigger_type`: MANUAL, CRON, RETRY, PARENT, API or MISFIRE.
//! - `xxl_job_log.chain_depth`: parents above a child run (guards against child-job loops).
//! - `xxl_job_group.access_token`: the group's own access token (XXL-JOB 3.5's column).
//! - table `xjob_session`: console login sessions (SHA-256 of the token, user, expiry).
//! - table `xjob_api_key`: named API keys (SHA-256 of the key, user, role, groups, expiry).
//! - table `xjob_audit`: the console's audit log (time, user, client, action, target, detail).
//! - tables `xjob_workflow` and `xjob_workflow_version`: workflows and every saved version's DAG.
//! - tables `xjob_workflow_run`, `xjob_workflow_node_run` and `xjob_workflow_node_log`: workflow
//!   runs, their node runs (unique per run, node and attempt) and each node run's run rows.
//! - `xxl_job_log.trigger_type` also WORKFLOW (a workflow's node run).

pub mod xjob_api_key;
pub mod xjob_audit;
pub mod xjob_session;
pub mod xjob_workflow;
pub mod xjob_workflow_node_log;
pub mod xjob_workflow_node_run;
pub mod xjob_workflow_run;
pub mod xjob_workflow_version;
pub mod xxl_job_group;
pub mod xxl_job_info;
pub mod xxl_job_lock;
pub mod xxl_job_log;
pub mod xxl_job_log_report;
pub mod xxl_job_logglue;
pub mod xxl_job_registry;
pub mod xxl_job_user;
