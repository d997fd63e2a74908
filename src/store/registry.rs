//! `xxl_job_registry`: executor heartbeats.

use std::collections::BTreeMap;

use entity::xxl_job_registry::{ActiveModel, Column, Entity};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect, Set,
};

use crate::error::Result;

/// Records a heartbeat: refreshes the row, inserting it when absent. Returns whether it was new.
pub(crate) async fn upsert(
    c: &impl ConnectionTrait,
    group: &str,
    key: &str,
    value: &str,
    now: chrono::NaiveDateTime,
) -> Result<bool> {
    let updated = Entity::update_many()
        .col_expr(Column::UpdateTime, Expr::val(now))
        .filter(Column::RegistryGroup.eq(group))
        .filter(Column::RegistryKey.eq(key))
        .filter(Column::RegistryValue.eq(value))
        .exec(c)
        .await?;
    if updated.rows_affected == 0 {
        let am = ActiveModel {
            registry_group: Set(group.into()),
            registry_key: Set(key.into()),
            registry_value: Set(value.into()),
            update_time: Set(Some(now)),
            ..Default::default()
        };
        am.insert(c).await?;
        return Ok(true);
    }
    Ok(false)
}

/// The app names registered at `address` (with or without its trailing `/`).
pub(crate) async fn apps_at(c: &impl ConnectionTrait, address: &str) -> Result<Vec<String>> {
    let a = address.trim();
    let bare = a.trim_end_matches('/');
    Ok(Entity::find()
        .select_only()
        .column(Column::RegistryKey)
        .filter(Column::RegistryValue.is_in([bare.to_string(), format!("{bare}/")]))
        .distinct()
        .into_tuple()
        .all(c)
        .await?)
}

/// Removes one registration.
pub(crate) async fn remove(
    c: &impl ConnectionTrait,
    group: &str,
    key: &str,
    value: &str,
) -> Result<u64> {
    Ok(Entity::delete_many()
        .filter(Column::RegistryGroup.eq(group))
        .filter(Column::RegistryKey.eq(key))
        .filter(Column::RegistryValue.eq(value))
        .exec(c)
        .await?
        .rows_affected)
}

/// Deletes registrations not refreshed since `dead_before`.
pub(crate) async fn delete_dead(
    c: &impl ConnectionTrait,
    dead_before: chrono::NaiveDateTime,
) -> Result<u64> {
    Ok(Entity::delete_many()
        .filter(Column::UpdateTime.lt(dead_before))
        .exec(c)
        .await?
        .rows_affected)
}

/// Every registered address (live or not yet evicted).
pub(crate) async fn all_values(
    c: &impl ConnectionTrait,
) -> Result<std::collections::HashSet<String>> {
    let rows: Vec<String> = Entity::find()
        .select_only()
        .column(Column::RegistryValue)
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Addresses of registrations not refreshed since `dead_before`.
pub(crate) async fn dead_values(
    c: &impl ConnectionTrait,
    dead_before: chrono::NaiveDateTime,
) -> Result<Vec<String>> {
    let rows: Vec<String> = Entity::find()
        .select_only()
        .column(Column::RegistryValue)
        .filter(Column::UpdateTime.lt(dead_before))
        .into_tuple()
        .all(c)
        .await?;
    Ok(rows)
}

/// Live `EXECUTOR` addresses by appname, each list sorted and de-duplicated.
pub(crate) async fn live_by_app(
    c: &impl ConnectionTrait,
    alive_after: chrono::NaiveDateTime,
) -> Result<BTreeMap<String, Vec<String>>> {
    let rows: Vec<(String, String)> = Entity::find()
        .select_only()
        .columns([Column::RegistryKey, Column::RegistryValue])
        .filter(Column::RegistryGroup.eq("EXECUTOR"))
        .filter(Column::UpdateTime.gt(alive_after))
        .into_tuple()
        .all(c)
        .await?;
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in rows {
        map.entry(k).or_default().push(v);
    }
    for v in map.values_mut() {
        v.sort();
        v.dedup();
    }
    Ok(map)
}
