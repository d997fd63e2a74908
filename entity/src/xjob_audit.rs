//! `xjob_audit`: who changed what through the console, when and from where (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One audited action.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_audit")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    /// When (UTC).
    pub time: DateTime,
    /// Who (the name tried, for a failed login).
    pub username: String,
    /// The client's address as the node saw it.
    pub client_ip: String,
    /// `job.create`, `job.trigger`, `user.delete`, `auth.login`, …
    pub action: String,
    /// `job`, `group`, `user`, `log`.
    pub target_type: String,
    /// The target's id (empty when none).
    pub target_id: String,
    /// What changed, shortened; never a password or token.
    pub detail: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
