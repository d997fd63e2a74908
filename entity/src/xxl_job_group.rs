//! `xxl_job_group`: an executor group (one appname), with its address list.
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One executor group.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xxl_job_group")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub app_name: String,
    pub title: String,
    /// 0 = automatic (registry), 1 = manual.
    pub address_type: i16,
    #[sea_orm(column_type = "Text", nullable)]
    pub address_list: Option<String>,
    pub update_time: Option<DateTime>,
    /// The group's own access token (XXL-JOB 3.5); NULL = the global token.
    pub access_token: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
