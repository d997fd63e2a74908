//! `xjob_workflow_version`: every saved version of a workflow's DAG (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One saved version.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_workflow_version")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub workflow_id: i32,
    pub version: i32,
    /// The DAG (JSON).
    #[sea_orm(column_type = "Text")]
    pub definition: String,
    pub author: String,
    /// Epoch ms.
    pub created_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
