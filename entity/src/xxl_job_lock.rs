//! `xxl_job_lock`: the cluster schedule lock row (`schedule_lock`).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;

/// One named lock row.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "xxl_job_lock")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub lock_name: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
