//! `xxl_job_group`: executor groups and their address lists.

use entity::xxl_job_group::{ActiveModel, Column, Entity, Model};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};

use crate::error::{Error, Result};

/// One group by id.
pub async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Model> {
    Entity::find_by_id(id)
        .one(c)
        .await?
        .ok_or(Error::GroupNotFound { group_id: id })
}

/// Groups by id (missing ids are simply absent).
pub async fn get_many(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .filter(Column::Id.is_in(ids.iter().copied()))
        .all(c)
        .await?)
}

/// The group with this appname, if any.
pub async fn by_app_name(c: &impl ConnectionTrait, app_name: &str) -> Result<Option<Model>> {
    Ok(Entity::find()
        .filter(Column::AppName.eq(app_name))
        .one(c)
        .await?)
}

/// Every group.
pub async fn all(c: &impl ConnectionTrait) -> Result<Vec<Model>> {
    Ok(Entity::find().all(c).await?)
}

/// Inserts a group and returns its id.
pub async fn insert(
    c: &impl ConnectionTrait,
    app_name: &str,
    title: &str,
    address_type: i16,
    address_list: Option<String>,
    now: chrono::NaiveDateTime,
) -> Result<i32> {
    let am = ActiveModel {
        app_name: Set(app_name.into()),
        title: Set(title.into()),
        address_type: Set(address_type),
        address_list: Set(address_list),
        update_time: Set(Some(now)),
        ..Default::default()
    };
    Ok(am.insert(c).await?.id)
}

/// Sets an automatic group's address list.
pub async fn set_address_list(
    c: &impl ConnectionTrait,
    id: i32,
    list: Option<String>,
    now: chrono::NaiveDateTime,
) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        address_list: Set(list),
        update_time: Set(Some(now)),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}
