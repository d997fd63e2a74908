//! `xjob_workflow_node_log`: a run row (`xxl_job_log`) a node run dispatched, one per shard, and
//! whether its result has been applied to the workflow (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One node run's run row.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_workflow_node_log")]
pub struct Model {
    /// `xxl_job_log.id`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub log_id: i64,
    pub node_run_id: i64,
    pub run_id: i64,
    /// The shard index (0 unless a sharding broadcast).
    pub shard: i32,
    /// 1 once its result was applied to the workflow.
    pub done: i16,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
