//! `xjob_workflow_node_run`: one attempt of one node of a workflow run (xjob's own table), unique
//! on (run, node, attempt).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One node run.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_workflow_node_run")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub run_id: i64,
    pub node_key: String,
    /// 1 for the first attempt.
    pub attempt: i32,
    /// Attempts the node may make (its job's fail retries + 1).
    pub max_attempts: i32,
    /// RUNNING, SUCCEEDED, FAILED, SKIPPED or STOPPED.
    pub state: String,
    /// A decision's value (1 true, 0 false).
    pub decision: Option<i16>,
    /// Run rows dispatched (one per shard).
    pub shards_total: i32,
    /// Of those, how many have a result.
    pub shards_done: i32,
    /// Of those, how many failed.
    pub shards_failed: i32,
    /// The nested workflow's run.
    pub child_run: Option<i64>,
    /// Epoch ms.
    pub start_time: i64,
    pub end_time: Option<i64>,
    #[sea_orm(column_type = "Text", nullable)]
    pub message: Option<String>,
    /// 1 once a re-run cleared it (history; the node runs again as a later attempt).
    pub cleared: i16,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
