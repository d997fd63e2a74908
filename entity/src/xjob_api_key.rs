//! `xjob_api_key`: named API keys for automation (xjob's own table).
#![allow(missing_docs)]
use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// One API key.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "xjob_api_key")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub name: String,
    /// Lower-case hex SHA-256 of the key.
    #[sea_orm(unique)]
    pub key_hash: String,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    /// The user the key acts for.
    pub user_id: i32,
    /// 0 normal user, 1 administrator (never more than its user's).
    pub role: i16,
    /// Group ids a role-0 key may act on, comma-separated.
    pub permission: Option<String>,
    /// Epoch ms.
    pub created_at: i64,
    /// Epoch ms after which the key is refused.
    pub expires_at: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
