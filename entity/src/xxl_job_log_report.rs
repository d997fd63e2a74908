//! `xxl_job_log_report`: daily run counts for the dashboard.
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One day's counts.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xxl_job_log_report")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub trigger_day: Option<DateTime>,
    pub running_count: i32,
    pub suc_count: i32,
    pub fail_count: i32,
    pub update_time: Option<DateTime>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
