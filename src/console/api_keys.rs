//! API keys for automation on `/v1`: named keys a user creates for a role, groups and an
//! expiry, never with more rights than their own. A key is shown once, stored as its SHA-256,
//! sent as `Authorization: Bearer xjk_…`, and revoked by deleting it; changes made with one are
//! audited under its user with the key's name. CI pipelines and infrastructure tools use these
//! instead of a person's password.

use serde::{Deserialize, Serialize};

use super::auth::{Principal, token_hash};
use super::{Console, rfc3339};
use crate::clock::ms_to_naive;
use crate::error::{Error, Result};
use crate::store::{api_keys, groups, users};

/// What every key starts with (tells a key from a login token).
pub(crate) const KEY_PREFIX: &str = "xjk_";
/// Longest key name.
pub const MAX_NAME: usize = 64;
/// Longest life of a key, days.
pub const MAX_DAYS: i64 = 366;
/// Random bytes in a key (hex-encoded after the prefix).
const KEY_BYTES: usize = 24;
/// Characters of a key kept to tell keys apart (the prefix and 8 hex digits).
const SHOWN: usize = 12;

/// A key to create.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyInput {
    /// What the key is for (1 to 64 characters).
    pub name: String,
    /// 0 (default): the groups in `permission`; 1: administrator (administrators only).
    #[serde(default)]
    pub role: i16,
    /// Groups a role-0 key may act on (within its user's).
    #[serde(default)]
    pub permission: Vec<i32>,
    /// Days until the key is refused (1 to 366).
    pub expires_in_days: i64,
}

/// A key as listed (never the key itself).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyView {
    /// Key id.
    pub id: i32,
    /// Its name.
    pub name: String,
    /// Its first characters.
    pub prefix: String,
    /// The user it acts for.
    pub user_id: i32,
    /// 0 normal, 1 administrator.
    pub role: i16,
    /// Groups of a role-0 key.
    pub permission: Vec<i32>,
    /// Created (RFC 3339).
    pub created_at: Option<String>,
    /// Refused after (RFC 3339).
    pub expires_at: Option<String>,
}

impl From<entity::xjob_api_key::Model> for ApiKeyView {
    fn from(k: entity::xjob_api_key::Model) -> Self {
        ApiKeyView {
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            user_id: k.user_id,
            role: k.role,
            permission: super::split_ids(k.permission.as_deref()),
            created_at: rfc3339(Some(ms_to_naive(k.created_at))),
            expires_at: rfc3339(Some(ms_to_naive(k.expires_at))),
        }
    }
}

/// A key just created: the only answer that holds the key.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatedApiKey {
    /// The key (`xjk_…`), shown this once.
    pub key: String,
    /// The key as listed.
    #[serde(flatten)]
    pub view: ApiKeyView,
}

impl Console {
    /// Creates a key for `who` (a signed-in user, not another key), limited to `who`'s rights.
    pub async fn create_api_key(
        &self,
        who: &Principal,
        input: ApiKeyInput,
    ) -> Result<CreatedApiKey> {
        if who.key.is_some() {
            return Err(Error::Forbidden {
                field: None,
                reason: "API keys are created by a signed-in user, not with another key".into(),
            });
        }
        let name = input.name.trim();
        let n = name.chars().count();
        if n == 0 || n > MAX_NAME {
            return Err(Error::Invalid {
                field: "name",
                reason: format!("must be 1 to {MAX_NAME} characters"),
            });
        }
        if !(1..=MAX_DAYS).contains(&input.expires_in_days) {
            return Err(Error::Invalid {
                field: "expiresInDays",
                reason: format!("must be 1 to {MAX_DAYS}"),
            });
        }
        let permission = match input.role {
            1 => {
                who.require_admin()?;
                Vec::new()
            }
            0 => {
                let mut ids = input.permission;
                ids.sort_unstable();
                ids.dedup();
                let known = groups::all(self.db()).await?;
                for g in &ids {
                    if !known.iter().any(|k| k.id == *g) {
                        return Err(Error::Invalid {
                            field: "permission",
                            reason: format!("group {g} does not exist"),
                        });
                    }
                    who.require_group(*g, "permission")?;
                }
                ids
            }
            _ => {
                return Err(Error::Invalid {
                    field: "role",
                    reason: "must be 0 or 1".into(),
                });
            }
        };
        let key = format!("{KEY_PREFIX}{}", crate::token::random_hex(KEY_BYTES));
        let now = self.engine.clock().now_ms();
        let stored = api_keys::insert(
            self.db(),
            entity::xjob_api_key::Model {
                id: 0,
                name: name.to_string(),
                key_hash: token_hash(&key),
                prefix: key.chars().take(SHOWN).collect(),
                user_id: who.id,
                role: input.role,
                permission: (!permission.is_empty()).then(|| {
                    permission
                        .iter()
                        .map(i32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                }),
                created_at: now,
                expires_at: now + input.expires_in_days * 86_400_000,
            },
        )
        .await?;
        self.audit(who, "apikey.create", "apikey", stored.id, name.to_string())
            .await;
        Ok(CreatedApiKey {
            key,
            view: stored.into(),
        })
    }

    /// Keys: every one for an administrator, a user's own otherwise.
    pub async fn list_api_keys(&self, who: &Principal) -> Result<Vec<ApiKeyView>> {
        let user = (!who.is_admin()).then_some(who.id);
        Ok(api_keys::list(self.db(), user)
            .await?
            .into_iter()
            .map(ApiKeyView::from)
            .collect())
    }

    /// Revokes a key (an administrator any, a user their own); it is refused at once.
    pub async fn delete_api_key(&self, who: &Principal, id: i32) -> Result<()> {
        super::auth::require_session(who, "API keys are revoked")?;
        let k = api_keys::get(self.db(), id).await?;
        if k.user_id != who.id && !who.is_admin() {
            // another user's key is not found for this user
            return Err(Error::NotFound {
                what: "API key",
                id: id.into(),
            });
        }
        let r = api_keys::delete(self.db(), id).await;
        self.sessions.clear();
        r?;
        self.audit(who, "apikey.delete", "apikey", id, k.name).await;
        Ok(())
    }

    /// The principal of an unexpired key with hash `hash`: its user, limited to the key's role
    /// and groups; answers it with the key's expiry.
    pub(crate) async fn key_principal(&self, hash: &str, now: i64) -> Result<(Principal, i64)> {
        let k = api_keys::by_hash(self.db(), hash, now)
            .await?
            .ok_or(Error::Unauthenticated)?;
        let user = users::get(self.db(), k.user_id)
            .await?
            .ok_or(Error::Unauthenticated)?;
        let mut who = Principal::of(&user);
        let key_groups = super::split_ids(k.permission.as_deref());
        if k.role == 1 && who.is_admin() {
            who.permission = Vec::new();
        } else {
            // a role-0 key, or a key of a user no longer an administrator: the key's groups
            // within the user's
            let admin = who.is_admin();
            who.permission = key_groups
                .into_iter()
                .filter(|g| admin || who.permission.contains(g))
                .collect();
            who.role = 0;
        }
        who.key = Some(k.name);
        Ok((who, k.expires_at))
    }
}
