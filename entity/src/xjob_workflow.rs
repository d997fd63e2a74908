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
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
