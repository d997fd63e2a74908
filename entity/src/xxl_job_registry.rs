//! `xxl_job_registry`: executor heartbeats (group, appname, address).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One live executor address.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xxl_job_registry")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub registry_group: String,
    pub registry_key: String,
    pub registry_value: String,
    pub update_time: Option<DateTime>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
