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
pub(crate) async fn get_many(c: &impl ConnectionTrait, ids: &[i32]) -> Result<Vec<Model>> {
    Ok(Entity::find()
        .filter(Column::Id.is_in(ids.iter().copied()))
        .all(c)
        .await?)
}

/// The group with exactly this appname, if any (compared again after reading: a database
/// whose collation folds case must not answer another group).
pub async fn by_app_name(c: &impl ConnectionTrait, app_name: &str) -> Result<Option<Model>> {
    Ok(Entity::find()
        .filter(Column::AppName.eq(app_name))
        .all(c)
        .await?
        .into_iter()
        .find(|g| g.app_name == app_name))
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
pub(crate) async fn set_address_list(
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

/// A page of groups (appname / title contains; only `ids` when given), ordered by appname, and
/// the total matching.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    ids: Option<&[i32]>,
    app_name: Option<&str>,
    title: Option<&str>,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    use sea_orm::{PaginatorTrait, QueryOrder, QuerySelect};
    let mut q = Entity::find();
    if let Some(ids) = ids {
        q = q.filter(Column::Id.is_in(ids.iter().copied()));
    }
    if let Some(a) = app_name.map(str::trim).filter(|a| !a.is_empty()) {
        q = q.filter(Column::AppName.contains(a));
    }
    if let Some(t) = title.map(str::trim).filter(|t| !t.is_empty()) {
        q = q.filter(Column::Title.contains(t));
    }
    let total = q.clone().count(c).await?;
    let items = q
        .order_by_asc(Column::AppName)
        .order_by_asc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, items))
}

/// Writes a group's appname, title, type and list.
pub(crate) async fn update(
    c: &impl ConnectionTrait,
    id: i32,
    app_name: &str,
    title: &str,
    address_type: i16,
    address_list: Option<String>,
    now: chrono::NaiveDateTime,
) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        app_name: Set(app_name.into()),
        title: Set(title.into()),
        address_type: Set(address_type),
        address_list: Set(address_list),
        update_time: Set(Some(now)),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Sets (or with `None` removes) a group's own access token.
pub(crate) async fn set_access_token(
    c: &impl ConnectionTrait,
    id: i32,
    token: Option<String>,
) -> Result<()> {
    let am = ActiveModel {
        id: Set(id),
        access_token: Set(token),
        ..Default::default()
    };
    am.update(c).await?;
    Ok(())
}

/// Deletes a group row.
pub(crate) async fn delete(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let r = Entity::delete_by_id(id).exec(c).await?;
    if r.rows_affected == 0 {
        return Err(Error::GroupNotFound { group_id: id });
    }
    Ok(())
}

/// How many groups exist.
pub(crate) async fn count(c: &impl ConnectionTrait) -> Result<u64> {
    use sea_orm::PaginatorTrait;
    Ok(Entity::find().count(c).await?)
}

impl crate::store::port::FromRow for Model {
    fn from_row(r: &crate::store::port::Row<'_>) -> Result<Self> {
        Ok(Model {
            id: r.get(0)?,
            app_name: r.get(1)?,
            title: r.get(2)?,
            address_type: r.get(3)?,
            address_list: r.get(4)?,
            update_time: r.get(5)?,
            access_token: r.get(6)?,
        })
    }
}

/// Every group (the dispatch directory's snapshot), in `port`'s transaction.
pub(crate) async fn all_in(port: &crate::store::port::Port<'_>) -> Result<Vec<Model>> {
    let sql = "SELECT id, app_name, title, address_type, address_list, update_time, \
               access_token FROM xxl_job_group";
    port.rows(sql, &[]).await
}
