//! RegistryActor: executor heartbeats and the address lists of automatic groups (protocol.md §7.8).
//!
//! Receives [`Heartbeat`] and [`RemoveRegistration`]; three times per beat period it
//! re-registers this node's own in-process executor, deletes registrations silent for the dead
//! timeout (marking the runs still open on them as lost), and rewrites every automatic group's
//! `address_list` (sorted, comma-joined, NULL when empty).
//! A new registration and a removal refresh the lists at once rather than a period later.

use std::time::Duration;

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::clock::Clock;
use crate::config::RegistryConfig;
use crate::directory::Directory;
use crate::error::Result;
use crate::model::AddressType;
use crate::store::{groups, registry};

/// The registry group every executor registers under.
pub(crate) const EXECUTOR_GROUP: &str = "EXECUTOR";

/// An executor's heartbeat.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct Heartbeat {
    /// Appname.
    pub app_name: String,
    /// Address.
    pub address: String,
}

/// An executor leaving gracefully.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<()>")]
pub struct RemoveRegistration {
    /// Appname.
    pub app_name: String,
    /// Address.
    pub address: String,
}

/// Runs eviction and list refresh now.
#[derive(Message, Debug)]
#[rtype(result = "Result<()>")]
pub struct RefreshRegistry;

/// Heartbeats and group address lists.
pub struct RegistryActor {
    directory: Directory,
    db: DatabaseConnection,
    clock: Clock,
    cfg: RegistryConfig,
    local: Option<Heartbeat>,
    activity: Activity,
}

impl RegistryActor {
    /// A registry over `db`; `local` is this node's in-process executor, if any.
    pub fn new(
        db: DatabaseConnection,
        clock: Clock,
        cfg: RegistryConfig,
        local: Option<Heartbeat>,
        activity: Activity,
        directory: Directory,
    ) -> Self {
        RegistryActor {
            directory,
            activity,
            db,
            clock,
            cfg,
            local,
        }
    }

    /// Rewrites the address list of `app_name`'s automatic group (if it has one) from the live
    /// registrations, and the dispatch directory with it.
    async fn join(
        db: &DatabaseConnection,
        clock: &Clock,
        directory: &Directory,
        dead_secs: u64,
        app_name: &str,
    ) -> Result<()> {
        let Some(g) = groups::by_app_name(db, app_name).await? else {
            return Ok(());
        };
        if g.address_type != AddressType::Automatic.code() {
            return Ok(());
        }
        let now = clock.now_ms();
        let alive_after = crate::clock::ms_to_naive(now - dead_secs as i64 * 1000);
        let live = registry::live_by_app(db, alive_after).await?;
        let list = live
            .get(app_name)
            .filter(|v| !v.is_empty())
            .map(|v| v.join(","));
        if list != g.address_list {
            groups::set_address_list(db, g.id, list, crate::clock::ms_to_naive(now)).await?;
            directory.load_groups(db).await?;
        }
        Ok(())
    }

    /// Re-registers the local executor, evicts the dead, rewrites automatic groups' lists.
    pub async fn refresh(
        db: &DatabaseConnection,
        clock: &Clock,
        directory: &Directory,
        dead_secs: u64,
        local: Option<&Heartbeat>,
    ) -> Result<()> {
        let now = clock.now_ms();
        if let Some(h) = local {
            registry::upsert(
                db,
                EXECUTOR_GROUP,
                &h.app_name,
                &h.address,
                crate::clock::ms_to_naive(now),
            )
            .await?;
        }
        let dead_before = crate::clock::ms_to_naive(now - dead_secs as i64 * 1000);
        let dead = registry::dead_values(db, dead_before).await?;
        let evicted = registry::delete_dead(db, dead_before).await?;
        // the groups first: once a run is marked lost, its executor is no longer routed to
        let live = registry::live_by_app(db, dead_before).await?;
        let mut changed = false;
        for g in groups::all(db).await? {
            if g.address_type != AddressType::Automatic.code() {
                continue;
            }
            let list = live
                .get(&g.app_name)
                .filter(|v| !v.is_empty())
                .map(|v| v.join(","));
            if list != g.address_list {
                groups::set_address_list(db, g.id, list, crate::clock::ms_to_naive(now)).await?;
                changed = true;
            }
        }
        if changed {
            // dispatch routes by the in-memory snapshot: it must see the new lists before any
            // run of an evicted executor is marked lost
            directory.load_groups(db).await?;
        }
        if evicted > 0 {
            tracing::warn!(evicted, ?dead, "executors evicted after missing heartbeats");
            // runs on an executor that died will never report
            crate::lost_runs::on_evicted(db, &dead, now).await?;
        }
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.activity.halted() {
            return;
        }
        let (db, clock, dead, local) = (
            self.db.clone(),
            self.clock.clone(),
            self.cfg.dead_secs,
            self.local.clone(),
        );
        let dir = self.directory.clone();
        let guard = self.activity.enter();
        ctx.spawn(
            async move {
                let _guard = guard;
                if let Err(e) = Self::refresh(&db, &clock, &dir, dead, local.as_ref()).await {
                    tracing::error!(error = %e, "registry refresh failed");
                }
            }
            .into_actor(self),
        );
    }
}

impl actix::Supervised for RegistryActor {
    fn restarting(&mut self, _ctx: &mut Self::Context) {
        tracing::warn!(actor = "registry", "actor stopped; restarting it");
    }
}

impl Actor for RegistryActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        self.tick(ctx);
        // check a few times per beat so a dead executor is evicted soon after the dead timeout
        let period = Duration::from_secs(self.cfg.beat_secs.div_ceil(3).max(1));
        ctx.run_interval(period, |a, ctx| a.tick(ctx));
    }
}

impl Handler<Heartbeat> for RegistryActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Heartbeat, _ctx: &mut Self::Context) -> Self::Result {
        let (db, clock, dead) = (self.db.clone(), self.clock.clone(), self.cfg.dead_secs);
        let dir = self.directory.clone();
        Box::pin(async move {
            let now = clock.now_naive();
            let new =
                registry::upsert(&db, EXECUTOR_GROUP, &msg.app_name, &msg.address, now).await?;
            if new {
                // a new executor joins its group's list now, not a beat period later; the rest
                // of a refresh (evictions, every other group) is the periodic tick's, so the
                // executor's `/api/registry` does not wait for it
                Self::join(&db, &clock, &dir, dead, &msg.app_name).await?;
            }
            Ok(())
        })
    }
}

impl Handler<RemoveRegistration> for RegistryActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: RemoveRegistration, _ctx: &mut Self::Context) -> Self::Result {
        let (db, clock, dead) = (self.db.clone(), self.clock.clone(), self.cfg.dead_secs);
        let dir = self.directory.clone();
        Box::pin(async move {
            registry::remove(&db, EXECUTOR_GROUP, &msg.app_name, &msg.address).await?;
            Self::refresh(&db, &clock, &dir, dead, None).await
        })
    }
}

impl Handler<RefreshRegistry> for RegistryActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, _: RefreshRegistry, _ctx: &mut Self::Context) -> Self::Result {
        let (db, clock, dead, local) = (
            self.db.clone(),
            self.clock.clone(),
            self.cfg.dead_secs,
            self.local.clone(),
        );
        let dir = self.directory.clone();
        Box::pin(async move { Self::refresh(&db, &clock, &dir, dead, local.as_ref()).await })
    }
}
