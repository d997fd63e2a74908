//! `xxl_job_info`: job definitions and their schedule state.
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One job.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xxl_job_info")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub job_group: i32,
    pub job_desc: String,
    pub add_time: Option<DateTime>,
    pub update_time: Option<DateTime>,
    pub author: Option<String>,
    pub alarm_email: Option<String>,
    pub schedule_type: String,
    pub schedule_conf: Option<String>,
    pub misfire_strategy: String,
    pub executor_route_strategy: Option<String>,
    pub executor_handler: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub executor_param: Option<String>,
    pub executor_block_strategy: Option<String>,
    pub executor_timeout: i32,
    pub executor_fail_retry_count: i32,
    pub glue_type: String,
    #[sea_orm(column_type = "Text", nullable)]
    pub glue_source: Option<String>,
    pub glue_remark: Option<String>,
    pub glue_updatetime: Option<DateTime>,
    pub child_jobid: Option<String>,
    /// 0 = stopped, 1 = running.
    pub trigger_status: i16,
    /// Epoch ms.
    pub trigger_last_time: i64,
    /// Epoch ms.
    pub trigger_next_time: i64,
    /// xjob: IANA time zone for CRON; NULL = the center's zone.
    pub time_zone: Option<String>,
    /// xjob: seconds before a fail retry; 0 = immediately.
    pub retry_interval: i32,
    /// xjob: URL that receives a JSON POST when a run of this job fails.
    pub alarm_webhook: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
