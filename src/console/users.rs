//! Console users (protocol.md §9 `/user`, administrators only). Passwords are never answered;
//! nobody can delete or demote themselves.

use sea_orm::TransactionTrait;
use serde::{Deserialize, Serialize};

use super::audit::changes;
use super::auth::{check_password, hash_password_blocking};
use super::{Console, Page, Principal, split_ids};
use crate::error::{Error, Result};
use crate::store::{api_keys, groups, users};

/// A user as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserView {
    /// User id.
    pub id: i32,
    /// User name.
    pub username: String,
    /// 0 normal user, 1 administrator.
    pub role: i16,
    /// Group ids a normal user may see and act on.
    pub permission: Vec<i32>,
    /// After a password reset: what it ended.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub ended: Option<super::auth::Ended>,
}

/// A user as an administrator writes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserInput {
    /// User name (4–20 letters, digits, `_`, `-`, `.`, `@`); fixed after creation.
    pub username: String,
    /// Password (8–128 characters); blank on update keeps the current one.
    pub password: Option<String>,
    /// 0 normal user, 1 administrator.
    pub role: i16,
    /// Group ids a normal user may act on.
    pub permission: Vec<i32>,
}

fn view(u: entity::xxl_job_user::Model) -> UserView {
    UserView {
        id: u.id,
        username: u.username,
        role: u.role,
        permission: split_ids(u.permission.as_deref()),
        ended: None,
    }
}

fn check_username(name: &str) -> Result<()> {
    let n = name.chars().count();
    if !(4..=20).contains(&n)
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'))
    {
        return Err(Error::Invalid {
            field: "username",
            reason: "must be 4 to 20 letters, digits, `_`, `-`, `.` or `@`".into(),
        });
    }
    Ok(())
}

fn check_role(role: i16) -> Result<()> {
    if !matches!(role, 0 | 1) {
        return Err(Error::Invalid {
            field: "role",
            reason: "must be 0 (user) or 1 (administrator)".into(),
        });
    }
    Ok(())
}

impl Console {
    async fn permission_list(&self, ids: &[i32]) -> Result<Option<String>> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let found = groups::get_many(self.db(), &ids).await?;
        if let Some(missing) = ids.iter().find(|i| !found.iter().any(|g| g.id == **i)) {
            return Err(Error::Invalid {
                field: "permission",
                reason: format!("executor group {missing} does not exist"),
            });
        }
        let s: Vec<String> = ids.iter().map(i32::to_string).collect();
        Ok((!s.is_empty()).then(|| s.join(",")))
    }

    /// Users whose name contains `username`, with `role` if given.
    pub async fn list_users(
        &self,
        who: &Principal,
        username: Option<&str>,
        role: Option<i16>,
        offset: u64,
        limit: u64,
    ) -> Result<Page<UserView>> {
        who.require_admin()?;
        let (total, rows) = users::page(self.db(), username, role, offset, limit).await?;
        Ok(Page {
            total,
            items: rows.into_iter().map(view).collect(),
        })
    }

    /// Creates a user.
    pub async fn create_user(&self, who: &Principal, input: UserInput) -> Result<UserView> {
        who.require_admin()?;
        check_username(&input.username)?;
        let password = input.password.unwrap_or_default();
        check_password("password", &password)?;
        check_role(input.role)?;
        let permission = self.permission_list(&input.permission).await?;
        if users::by_name(self.db(), &input.username).await?.is_some() {
            return Err(Error::Conflict {
                reason: format!("user `{}` exists", input.username),
            });
        }
        let hash = hash_password_blocking(password).await?;
        let id = users::insert(self.db(), &input.username, &hash, input.role, permission).await?;
        let user = self.get_user(id).await?;
        let detail = format!(
            "{}; role {}; groups {:?}",
            user.username, user.role, user.permission
        );
        self.audit(who, "user.create", "user", id, detail).await;
        Ok(user)
    }

    async fn get_user(&self, id: i32) -> Result<UserView> {
        users::get(self.db(), id)
            .await?
            .map(view)
            .ok_or(Error::NotFound {
                what: "user",
                id: id.into(),
            })
    }

    /// Edits a user's role, permission and (when given) password.
    pub async fn update_user(
        &self,
        who: &Principal,
        id: i32,
        input: UserInput,
    ) -> Result<UserView> {
        who.require_admin()?;
        let current = self.get_user(id).await?;
        if !input.username.is_empty() && input.username != current.username {
            return Err(Error::Invalid {
                field: "username",
                reason: "cannot be changed".into(),
            });
        }
        check_role(input.role)?;
        if id == who.id && input.role != 1 {
            return Err(Error::Conflict {
                reason: "you cannot demote yourself".into(),
            });
        }
        let password = input.password.filter(|p| !p.is_empty());
        if let Some(p) = &password {
            check_password("password", p)?;
            super::auth::require_session(who, "a password is reset")?;
        }
        let permission = self.permission_list(&input.permission).await?;
        let hash = match password {
            Some(p) => Some(hash_password_blocking(p).await?),
            None => None,
        };
        // a password reset ends every session and API key the user had, in the same
        // transaction: whoever held the old password (or a token or key taken with it) is out
        // at once
        let r = async {
            let txn = self.db().begin().await?;
            users::update(&txn, id, input.role, permission, hash.as_deref()).await?;
            let mut ended = None;
            if hash.is_some() {
                ended = Some(super::auth::Ended {
                    sessions_ended: users::delete_other_sessions(&txn, id, "").await?,
                    api_keys_ended: api_keys::delete_for_user(&txn, id).await?,
                });
            }
            txn.commit().await?;
            Ok::<_, Error>(ended)
        }
        .await;
        self.sessions.clear();
        let ended = r?;
        let mut after = self.get_user(id).await?;
        let mut detail = changes(&current, &after, &[]);
        if let Some(e) = &ended {
            // that it changed, never what to
            let reset = format!(
                "password changed; {} session(s) and {} API key(s) ended",
                e.sessions_ended, e.api_keys_ended
            );
            detail = match detail.as_str() {
                "no change" => reset,
                d => format!("{d}; {reset}"),
            };
        }
        self.audit(who, "user.update", "user", id, detail).await;
        after.ended = ended;
        Ok(after)
    }

    /// Deletes a user and their sessions.
    pub async fn delete_user(&self, who: &Principal, id: i32) -> Result<()> {
        who.require_admin()?;
        if id == who.id {
            return Err(Error::Conflict {
                reason: "you cannot delete yourself".into(),
            });
        }
        let user = self.get_user(id).await;
        let r = users::delete(self.db(), id).await;
        self.sessions.clear();
        r?;
        let name = user.map(|u| u.username).unwrap_or_default();
        self.audit(who, "user.delete", "user", id, name).await;
        Ok(())
    }
}
