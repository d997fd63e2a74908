//! CompleteActor: applies run results to their log rows (spec §4.3).
//!
//! Receives [`Callback`] batches from the in-process executor and the `/api/callback` endpoint.
//! The first result for a log wins; later ones are ignored. Messages are capped at 15,000
//! characters by the store.

use actix::prelude::*;
use sea_orm::DatabaseConnection;

use crate::activity::Activity;
use crate::clock::Clock;
use crate::model::wire::HandleCallbackParam;
use crate::store::logs;

/// A batch of run results.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct Callback(pub Vec<HandleCallbackParam>);

/// Applies results.
pub struct CompleteActor {
    db: DatabaseConnection,
    clock: Clock,
    activity: Activity,
}

impl CompleteActor {
    /// An actor writing to `db`.
    pub fn new(db: DatabaseConnection, clock: Clock, activity: Activity) -> Self {
        CompleteActor {
            db,
            clock,
            activity,
        }
    }
}

impl Actor for CompleteActor {
    type Context = Context<Self>;
}

impl Handler<Callback> for CompleteActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Callback, _ctx: &mut Self::Context) -> Self::Result {
        let db = self.db.clone();
        let clock = self.clock.clone();
        let guard = self.activity.enter();
        Box::pin(async move {
            let _guard = guard;
            for item in msg.0 {
                match logs::record_handle(
                    &db,
                    item.log_id,
                    item.handle_code,
                    item.handle_msg.as_deref(),
                    clock.now_ms(),
                )
                .await
                {
                    Ok(true) => {
                        tracing::debug!(
                            log_id = item.log_id,
                            code = item.handle_code,
                            "run finished"
                        )
                    }
                    Ok(false) => tracing::debug!(
                        log_id = item.log_id,
                        "repeated or unknown callback ignored"
                    ),
                    Err(e) => {
                        tracing::error!(log_id = item.log_id, error = %e, "cannot record run result")
                    }
                }
            }
        })
    }
}
