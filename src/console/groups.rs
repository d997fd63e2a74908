//! Executor groups (protocol.md §9 `/jobgroup`): everyone reads the groups they may see; only
//! administrators create, edit and delete. The answer carries the live `registryList`.

use serde::{Deserialize, Serialize};

use super::audit::{changes, shown};
use super::{Console, Page, Principal, rfc3339};
use crate::actors::registry::RefreshRegistry;
use crate::error::{Error, Result};
use crate::model::AddressType;
use crate::store::{groups, jobs};

/// A group as the console shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupView {
    /// Group id.
    pub id: i32,
    /// The executors' appname.
    pub app_name: String,
    /// Display name.
    pub title: String,
    /// 0 automatic (from heartbeats), 1 manual.
    pub address_type: i16,
    /// The stored comma-separated address list.
    pub address_list: Option<String>,
    /// The addresses triggers go to now: live heartbeats for an automatic group, the
    /// manual list otherwise.
    pub registry_list: Vec<String>,
    /// Last change (RFC 3339).
    pub update_time: Option<String>,
    /// Whether the group has its own access token.
    pub has_access_token: bool,
    /// The group's own access token: shown to administrators only (null otherwise, and when
    /// the group uses the global token).
    pub access_token: Option<String>,
}

/// Shortest and longest group access token.
pub const ACCESS_TOKEN_LEN: std::ops::RangeInclusive<usize> = 16..=255;

/// A group as a user writes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupInput {
    /// The executors' appname (4–64 characters, no `<` or `>`).
    pub app_name: String,
    /// Display name (required).
    pub title: String,
    /// 0 automatic, 1 manual.
    pub address_type: i16,
    /// Manual addresses, comma-separated (required for a manual group).
    pub address_list: Option<String>,
    /// The group's own access token (16–255 visible ASCII characters, no spaces); on an edit,
    /// absent or null keeps the current one and `""` returns the group to the global token.
    pub access_token: Option<String>,
}

impl GroupInput {
    /// Checks the fields (protocol.md §9 rules); answers the normalised manual list.
    fn validate(&self) -> Result<Option<String>> {
        let invalid = |field, reason: &str| Error::Invalid {
            field,
            reason: reason.into(),
        };
        let n = self.app_name.chars().count();
        if !(4..=64).contains(&n) {
            return Err(invalid("appName", "must be 4 to 64 characters"));
        }
        if self.app_name.contains(['<', '>']) || self.app_name.trim() != self.app_name {
            return Err(invalid(
                "appName",
                "must not contain `<`, `>` or surrounding spaces",
            ));
        }
        if self.title.trim().is_empty() {
            return Err(invalid("title", "is required"));
        }
        if self.title.chars().count() > 64 {
            return Err(invalid("title", "must be at most 64 characters"));
        }
        if let Some(t) = self.access_token.as_deref().filter(|t| !t.is_empty())
            && (!ACCESS_TOKEN_LEN.contains(&t.len()) || !t.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(invalid(
                "accessToken",
                "must be 16 to 255 visible ASCII characters without spaces (or empty for the global token)",
            ));
        }
        // bounded whatever the type (an automatic group ignores it)
        crate::jobs::check_len(
            "addressList",
            self.address_list.as_deref().unwrap_or_default(),
            super::MAX_ADDRESS_LIST_CHARS,
        )?;
        match self.address_type {
            0 => Ok(None),
            1 => {
                let list = self.address_list.as_deref().unwrap_or_default();
                let items = super::check_addresses("addressList", list)?;
                if list.trim().is_empty() || items.iter().any(|a| a.is_empty()) {
                    return Err(invalid(
                        "addressList",
                        "a manual group needs a comma-separated list without empty items",
                    ));
                }
                Ok(Some(items.join(",")))
            }
            _ => Err(invalid(
                "addressType",
                "must be 0 (automatic) or 1 (manual)",
            )),
        }
    }
}

fn view(
    g: entity::xxl_job_group::Model,
    live: &std::collections::BTreeMap<String, Vec<String>>,
    who: &Principal,
) -> GroupView {
    let registry_list = if g.address_type == AddressType::Automatic.code() {
        live.get(&g.app_name).cloned().unwrap_or_default()
    } else {
        g.address_list
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect()
    };
    GroupView {
        id: g.id,
        app_name: g.app_name,
        title: g.title,
        address_type: g.address_type,
        address_list: g.address_list,
        registry_list,
        update_time: rfc3339(g.update_time),
        has_access_token: g.access_token.is_some(),
        access_token: g.access_token.filter(|_| who.is_admin()),
    }
}

impl Console {
    /// Refuses an appname another group has.
    async fn check_app_name_free(&self, app_name: &str, except: Option<i32>) -> Result<()> {
        match groups::by_app_name(self.db(), app_name).await? {
            Some(other) if Some(other.id) != except => Err(Error::Conflict {
                reason: format!("a group with appName `{app_name}` exists"),
            }),
            _ => Ok(()),
        }
    }

    /// Groups the user may see whose appname / title contain the filters.
    pub async fn list_groups(
        &self,
        who: &Principal,
        app_name: Option<&str>,
        title: Option<&str>,
        offset: u64,
        limit: u64,
    ) -> Result<Page<GroupView>> {
        let ids = who.visible_groups();
        let (total, rows) =
            groups::page(self.db(), ids.as_deref(), app_name, title, offset, limit).await?;
        let live = self.engine.live_executors().await?;
        Ok(Page {
            total,
            items: rows.into_iter().map(|g| view(g, &live, who)).collect(),
        })
    }

    /// One group.
    pub async fn get_group(&self, who: &Principal, id: i32) -> Result<GroupView> {
        let g = groups::get(self.db(), id).await?;
        who.require_group(id, "id")?;
        Ok(view(g, &self.engine.live_executors().await?, who))
    }

    /// Creates a group (administrators).
    pub async fn create_group(&self, who: &Principal, input: GroupInput) -> Result<GroupView> {
        who.require_admin()?;
        let list = input.validate()?;
        self.check_app_name_free(&input.app_name, None).await?;
        let id = groups::insert(
            self.db(),
            &input.app_name,
            input.title.trim(),
            input.address_type,
            list,
            self.now(),
        )
        .await?;
        let token = input.access_token.filter(|t| !t.is_empty());
        if token.is_some() {
            groups::set_access_token(self.db(), id, token).await?;
        }
        self.after_group_change().await?;
        let g = self.get_group(who, id).await?;
        let mut detail = format!("{} {}", g.app_name, shown(&g.title));
        if g.has_access_token {
            detail.push_str("; own access token");
        }
        self.audit(who, "group.create", "group", id, detail).await;
        Ok(g)
    }

    /// Edits a group (administrators); an automatic group's list is recomputed at once.
    pub async fn update_group(
        &self,
        who: &Principal,
        id: i32,
        input: GroupInput,
    ) -> Result<GroupView> {
        who.require_admin()?;
        let before = self.get_group(who, id).await?;
        let list = input.validate()?;
        self.check_app_name_free(&input.app_name, Some(id)).await?;
        groups::update(
            self.db(),
            id,
            &input.app_name,
            input.title.trim(),
            input.address_type,
            list,
            self.now(),
        )
        .await?;
        let token_changed = match input.access_token {
            Some(t) if t.is_empty() => {
                groups::set_access_token(self.db(), id, None).await?;
                before.has_access_token
            }
            Some(t) => {
                let changed = before.access_token.as_deref() != Some(t.as_str());
                groups::set_access_token(self.db(), id, Some(t)).await?;
                changed
            }
            None => false,
        };
        self.after_group_change().await?;
        let after = self.get_group(who, id).await?;
        // that the token changed, never its value
        let mut detail = changes(
            &before,
            &after,
            &["updateTime", "registryList", "accessToken"],
        );
        if token_changed {
            detail = match detail.as_str() {
                "no change" => "access token changed".into(),
                d => format!("{d}; access token changed"),
            };
        }
        self.audit(who, "group.update", "group", id, detail).await;
        Ok(after)
    }

    /// Deletes a group (administrators); refused while it has jobs or if it is the last one.
    pub async fn delete_group(&self, who: &Principal, id: i32) -> Result<()> {
        who.require_admin()?;
        let group = groups::get(self.db(), id).await?;
        let jobs = jobs::count(self.db(), Some(&[id])).await?;
        if jobs > 0 {
            return Err(Error::Conflict {
                reason: format!("the group still has {jobs} job(s)"),
            });
        }
        if groups::count(self.db()).await? <= 1 {
            return Err(Error::Conflict {
                reason: "the last group cannot be deleted".into(),
            });
        }
        groups::delete(self.db(), id).await?;
        // dispatch and the console's group checks read the directory
        self.engine.groups_edited().await?;
        let detail = format!("{} {}", group.app_name, shown(&group.title));
        self.audit(who, "group.delete", "group", id, detail).await;
        Ok(())
    }

    async fn after_group_change(&self) -> Result<()> {
        self.engine.registry().send(RefreshRegistry).await??;
        self.engine.groups_edited().await
    }
}
