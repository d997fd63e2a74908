//! `xxl_job_log`: one row per trigger (per shard), from pending fire to handle result.
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One run.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xxl_job_log")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub job_group: i32,
    pub job_id: i32,
    pub executor_address: Option<String>,
    pub executor_handler: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub executor_param: Option<String>,
    pub executor_sharding_param: Option<String>,
    pub executor_fail_retry_count: i32,
    pub trigger_time: Option<DateTime>,
    pub trigger_code: i32,
    #[sea_orm(column_type = "Text", nullable)]
    pub trigger_msg: Option<String>,
    pub handle_time: Option<DateTime>,
    pub handle_code: i32,
    #[sea_orm(column_type = "Text", nullable)]
    pub handle_msg: Option<String>,
    pub alarm_status: i16,
    /// xjob: nominal fire time (epoch ms) of a scheduled fire; unique with `job_id`.
    pub fire_time: Option<i64>,
    /// xjob: 1 = recorded by a scan, not yet dispatched; 0 = dispatched or not scheduled;
    /// any other value = claimed for dispatch by the holder of that random token.
    pub fire_state: i64,
    /// xjob: MANUAL, CRON, RETRY, PARENT, API or MISFIRE.
    pub trigger_type: Option<String>,
    /// xjob: how many parent jobs led to this run (0 for a run not triggered as a child).
    pub chain_depth: i16,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
