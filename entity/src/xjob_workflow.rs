//! `xjob_workflow`: a workflow and its current version's DAG (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One workflow.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_workflow")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// The executor group it belongs to (its jobs are that group's).
    pub job_group: i32,
    pub name: String,
    pub description: Option<String>,
    /// Who saved the current version.
    pub author: String,
    /// The current version (1 for a new workflow).
    pub version: i32,
    /// The current version's DAG (JSON).
    #[sea_orm(column_type = "Text")]
    pub definition: String,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms.
    pub updated_at: i64,
    /// NONE, CRON or FIX_RATE.
    pub schedule_type: String,
    /// The cron expression or the period in seconds.
    pub schedule_conf: Option<String>,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    pub misfire_strategy: String,
    /// 1 while its schedule runs.
    pub trigger_status: i16,
    /// Its next fire (epoch ms; 0: none).
    pub trigger_next_time: i64,
    /// PARALLEL, SKIP or QUEUE: what a start does while a run is running.
    pub concurrency: String,
    /// Most runs QUEUE keeps waiting.
    pub max_queued: i32,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
