//! `xjob_api_key`: named API keys for automation.

use entity::xjob_api_key::{ActiveModel, Column, Entity, Model};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
};

use crate::error::{Error, Result};

/// Stores a key (its `id` is given by the database); answers it as stored.
pub(crate) async fn insert(c: &impl ConnectionTrait, key: Model) -> Result<Model> {
    let mut am: ActiveModel = key.into();
    am.id = sea_orm::ActiveValue::NotSet;
    Ok(am.insert(c).await?)
}

/// Keys, newest first: every one, or `user`'s.
pub(crate) async fn list(c: &impl ConnectionTrait, user: Option<i32>) -> Result<Vec<Model>> {
    let mut q = Entity::find().order_by_desc(Column::Id);
    if let Some(u) = user {
        q = q.filter(Column::UserId.eq(u));
    }
    Ok(q.all(c).await?)
}

/// One key by id.
pub(crate) async fn get(c: &impl ConnectionTrait, id: i32) -> Result<Model> {
    Entity::find_by_id(id).one(c).await?.ok_or(Error::NotFound {
        what: "API key",
        id: id.into(),
    })
}

/// The unexpired key with this hash.
pub(crate) async fn by_hash(
    c: &impl ConnectionTrait,
    key_hash: &str,
    now: i64,
) -> Result<Option<Model>> {
    Ok(Entity::find()
        .filter(Column::KeyHash.eq(key_hash))
        .filter(Column::ExpiresAt.gt(now))
        .one(c)
        .await?)
}

/// Revokes a key.
pub(crate) async fn delete(c: &impl ConnectionTrait, id: i32) -> Result<()> {
    let r = Entity::delete_by_id(id).exec(c).await?;
    if r.rows_affected == 0 {
        return Err(Error::NotFound {
            what: "API key",
            id: id.into(),
        });
    }
    Ok(())
}

/// Revokes every key of a user (the user is deleted, or their password reset); answers how
/// many there were.
pub(crate) async fn delete_for_user(c: &impl ConnectionTrait, user_id: i32) -> Result<u64> {
    Ok(Entity::delete_many()
        .filter(Column::UserId.eq(user_id))
        .exec(c)
        .await?
        .rows_affected)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key is found by its hash until it expires, and not after it is revoked.
    #[tokio::test]
    async fn a_key_is_found_until_it_expires_or_is_revoked() {
        for db in crate::store::tests::every_backend().await {
            let k = insert(
                &db,
                Model {
                    id: 0,
                    name: "ci".into(),
                    key_hash: "a".repeat(64),
                    prefix: "xjk_aaaaaaaa".into(),
                    user_id: 7,
                    role: 0,
                    permission: Some("1,2".into()),
                    created_at: 1_000,
                    expires_at: 2_000,
                },
            )
            .await
            .unwrap();
            let hash = "a".repeat(64);
            assert_eq!(
                by_hash(&db, &hash, 1_999).await.unwrap().map(|k| k.id),
                Some(k.id)
            );
            assert!(
                by_hash(&db, &hash, 2_000).await.unwrap().is_none(),
                "expired"
            );
            assert!(
                by_hash(&db, &"b".repeat(64), 1_500)
                    .await
                    .unwrap()
                    .is_none()
            );
            assert_eq!(list(&db, Some(7)).await.unwrap().len(), 1);
            assert!(list(&db, Some(8)).await.unwrap().is_empty());
            delete_for_user(&db, 7).await.unwrap();
            assert!(
                by_hash(&db, &hash, 1_500).await.unwrap().is_none(),
                "revoked"
            );
            assert!(matches!(
                delete(&db, k.id).await,
                Err(Error::NotFound { .. })
            ));
        }
    }
}
