//! `xjob_audit`: the console's audit log.

use chrono::NaiveDateTime;
use entity::xjob_audit::{ActiveModel, Column, Entity, Model};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, NotSet, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::error::Result;

/// What one audit row says, before it is stored.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub time: NaiveDateTime,
    pub username: String,
    pub client_ip: String,
    pub action: &'static str,
    pub target_type: &'static str,
    pub target_id: String,
    pub detail: String,
}

/// Which rows a page answers (every filter optional; `username`, `action`, `target_type` and
/// `target_id` match exactly).
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    pub username: Option<String>,
    pub action: Option<String>,
    pub target_type: Option<String>,
    pub target_id: Option<String>,
    pub from: Option<NaiveDateTime>,
    pub to: Option<NaiveDateTime>,
}

/// `s` cut to at most `max` characters (marked) without NUL characters.
fn cut(s: &str, max: usize) -> String {
    crate::bounded::column(s.to_string(), max)
}

impl Entry {
    /// The entry with its texts cut to their columns.
    pub(crate) fn fitted(self) -> Entry {
        Entry {
            username: cut(&self.username, 50),
            client_ip: cut(&self.client_ip, 64),
            target_id: cut(&self.target_id, 64),
            detail: cut(&self.detail, 1000),
            ..self
        }
    }

    fn row(self) -> ActiveModel {
        let e = self.fitted();
        ActiveModel {
            id: NotSet,
            time: Set(e.time),
            username: Set(e.username),
            client_ip: Set(e.client_ip),
            action: Set(e.action.to_string()),
            target_type: Set(e.target_type.to_string()),
            target_id: Set(e.target_id),
            detail: Set(e.detail),
        }
    }
}

/// Stores one entry (texts cut to their columns).
pub(crate) async fn record(c: &impl ConnectionTrait, e: Entry) -> Result<()> {
    e.row().insert(c).await?;
    Ok(())
}

/// Stores entries in one statement (texts cut to their columns), in the port's transaction.
pub(crate) async fn record_in(p: &crate::store::port::Port<'_>, entries: &[Entry]) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    p.run(&Entity::insert_many(
        entries.iter().cloned().map(Entry::row),
    ))
    .await?;
    Ok(())
}

/// A page of entries matching `f`, newest first, and how many match.
pub(crate) async fn page(
    c: &impl ConnectionTrait,
    f: &Filter,
    offset: u64,
    limit: u64,
) -> Result<(u64, Vec<Model>)> {
    let mut q = Entity::find();
    if let Some(v) = &f.username {
        q = q.filter(Column::Username.eq(v.as_str()));
    }
    if let Some(v) = &f.action {
        q = q.filter(Column::Action.eq(v.as_str()));
    }
    if let Some(v) = &f.target_type {
        q = q.filter(Column::TargetType.eq(v.as_str()));
    }
    if let Some(v) = &f.target_id {
        q = q.filter(Column::TargetId.eq(v.as_str()));
    }
    if let Some(v) = f.from {
        q = q.filter(Column::Time.gte(v));
    }
    if let Some(v) = f.to {
        q = q.filter(Column::Time.lte(v));
    }
    let total = q.clone().count(c).await?;
    let items = q
        .order_by_desc(Column::Time)
        .order_by_desc(Column::Id)
        .offset(offset)
        .limit(limit)
        .all(c)
        .await?;
    Ok((total, items))
}

/// Deletes entries older than `before`; answers how many.
pub(crate) async fn delete_before(c: &impl ConnectionTrait, before: NaiveDateTime) -> Result<u64> {
    Ok(Entity::delete_many()
        .filter(Column::Time.lt(before))
        .exec(c)
        .await?
        .rows_affected)
}
