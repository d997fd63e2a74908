//! `xjob_session`: console login sessions (xjob's own table; XXL-JOB 2.4 kept them in a cookie).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One console session.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_session")]
pub struct Model {
    /// Lower-case hex SHA-256 of the bearer token.
    #[sea_orm(primary_key, auto_increment = false)]
    pub token_hash: String,
    pub user_id: i32,
    /// Epoch ms after which the token is refused.
    pub expires_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
