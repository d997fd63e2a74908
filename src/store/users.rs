//! `xxl_job_user` and `xjob_session`: console users and their login sessions.

use entity::xjob_session::{
    ActiveModel as SessionActive, Column as S, Entity as Session, Model as SessionModel,
};
use entity::xxl_job_user::{ActiveModel, Column, Entity, Model};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};

use crate::error::{Error, Result};

/// How many users exist.
pub(crate) async fn count(c: &impl ConnectionTrait) -> Result<u64> {
    Ok(Entity::find().count(c).await?)
}

/// One user by id.
pub(crate) async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Option<Model>> {
    Ok(Entity::find_by_id(id).one(c).await?)
}

/// One user by name.
pub async fn by_name(c: &impl ConnectionTrait, username: &str) -> Result<Option<Model>> {
    Ok(Entity::find()
        .filter(Column::Username.eq(username))
        .one(c)
        .await?)
}

/// A page of users (optionally whose name contains `name`, or with `role`), by id, and the total.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    name: Option<&str>,
    role: Option<i16>,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    let mut q = Entity::find();
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        q = q.filter(Column::Username.contains(n));
    }
    if let Some(r) = role {
        q = q.filter(Column::Role.eq(r));
    }
    let total = q.clone().count(c).await?;
    let items = q
        .order_by_asc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, items))
}

/// Inserts a user (the password already hashed) and returns its id.
pub(crate) async fn insert(
    c: &impl ConnectionTrait,
    username: &str,
    password_hash: &str,
    role: i16,
    permission: Option<String>,
) -> Result<i32> {
    let am = ActiveModel {
        username: Set(username.into()),
        password: Set(password_hash.into()),
        token: Set(None),
        role: Set(role),
        permission: Set(permission),
        ..Default::default()
    };
    Ok(am.insert(c).await?.id)
}

/// Sets a user's role and permission, and the password hash when one is given.
pub(crate) async fn update(
    c: &impl ConnectionTrait,
    id: i32,
    role: i16,
    permission: Option<String>,
    password_hash: Option<&str>,
) -> Result<()> {
    let mut am = ActiveModel {
        id: Set(id),
        role: Set(role),
        permission: Set(permission),
        ..Default::default()
    };
    if let Some(h) = password_hash {
        am.password = Set(h.into());
    }
    am.update(c).await?;
    Ok(())
}

/// Sets a user's password hash.
pub(crate) async fn set_password(
    c: &impl ConnectionTrait,
    id: i32,
    password_hash: &str,
) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        password: Set(password_hash.into()),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Deletes a user and their sessions.
pub(crate) async fn delete(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    Session::delete_many()
        .filter(S::UserId.eq(id))
        .exec(c)
        .await?;
    super::api_keys::delete_for_user(c, id).await?;
    let r = Entity::delete_by_id(id).exec(c).await?;
    if r.rows_affected == 0 {
        return Err(Error::NotFound {
            what: "user",
            id: id.into(),
        });
    }
    Ok(())
}

/// Records a session.
pub(crate) async fn insert_session(
    c: &impl ConnectionTrait,
    token_hash: &str,
    user_id: i32,
    expires_at: i64,
) -> Result<()> {
    SessionActive {
        token_hash: Set(token_hash.into()),
        user_id: Set(user_id),
        expires_at: Set(expires_at),
    }
    .insert(c)
    .await?;
    Ok(())
}

/// The user of a live session and when the session expires (epoch ms).
pub(crate) async fn session(
    c: &impl ConnectionTrait,
    token_hash: &str,
    now: i64,
) -> Result<Option<(Model, i64)>> {
    let Some(s): Option<SessionModel> = Session::find_by_id(token_hash.to_string()).one(c).await?
    else {
        return Ok(None);
    };
    if s.expires_at <= now {
        return Ok(None);
    }
    Ok(get(c, s.user_id).await?.map(|u| (u, s.expires_at)))
}

/// Ends one session.
pub(crate) async fn delete_session(c: &impl ConnectionTrait, token_hash: &str) -> Result<()> {
    Session::delete_by_id(token_hash.to_string())
        .exec(c)
        .await?;
    Ok(())
}

/// Ends every session of a user except `keep` (after a password change).
pub(crate) async fn delete_other_sessions(
    c: &impl ConnectionTrait,
    user_id: i32,
    keep: &str,
) -> Result<u64> {
    Ok(Session::delete_many()
        .filter(S::UserId.eq(user_id))
        .filter(S::TokenHash.ne(keep))
        .exec(c)
        .await?
        .rows_affected)
}

/// Deletes expired sessions.
pub(crate) async fn delete_expired_sessions(c: &impl ConnectionTrait, now: i64) -> Result<u64> {
    Ok(Session::delete_many()
        .filter(S::ExpiresAt.lte(now))
        .exec(c)
        .await?
        .rows_affected)
}
