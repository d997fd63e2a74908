//! `xjob_workflow_run`: one run of one version of a workflow (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One workflow run.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_workflow_run")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub workflow_id: i32,
    /// The version of the DAG it follows.
    pub version: i32,
    pub job_group: i32,
    /// RUNNING, SUCCEEDED, FAILED or STOPPED.
    pub status: String,
    /// MANUAL, CRON, API or WORKFLOW (a nested run).
    pub trigger_type: String,
    /// The trigger's params as given.
    #[sea_orm(column_type = "Text", nullable)]
    pub params: Option<String>,
    /// The run's context (a JSON object).
    #[sea_orm(column_type = "Text")]
    pub context: String,
    /// The node run of the parent workflow this run is (a nested workflow node).
    pub parent_node_run: Option<i64>,
    /// Nesting depth (0 for a top-level run).
    pub depth: i16,
    /// Bumped by every change of the run: the row lock that serializes them.
    pub seq: i64,
    /// Epoch ms.
    pub start_time: i64,
    pub end_time: Option<i64>,
    #[sea_orm(column_type = "Text", nullable)]
    pub message: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
