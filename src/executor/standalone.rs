//! A standalone remote executor (`xjob executor`): the executor protocol over HTTP, results
//! reported to the admin(s) through the [`CallbackActor`] (spooled when no admin answers), and
//! the registry heartbeat. Embeddable: [`StandaloneExecutor::start`] runs inside any actix system.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

use super::actor::RuntimeConfig;
use super::callback::{CallbackActor, FlushCallbacks};
use super::registrar::{Deregister, Registrar, RunLogs};
use super::server::{self, ExecutorApi};
use super::{ExecutorClient, HandlerRegistry, HttpExecutorClient, InProcessExecutor};
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::wire::ReturnT;

/// A running standalone executor.
pub struct StandaloneExecutor {
    /// The address it registered (what the admin calls).
    pub address: String,
    server: actix_web::dev::ServerHandle,
    executor: InProcessExecutor,
    callbacks: Addr<CallbackActor>,
    registrar: Addr<Registrar>,
}

async fn unknown(req: HttpRequest) -> HttpResponse {
    HttpResponse::Ok().json(ReturnT::<String>::fail(format!(
        "invalid request, uri-mapping({}) not found.",
        req.path()
    )))
}

impl StandaloneExecutor {
    /// Starts serving on `listener` (or `executor.bind`) with `handlers`.
    pub async fn start(
        cfg: &Config,
        handlers: HandlerRegistry,
        listener: Option<TcpListener>,
    ) -> Result<Self> {
        Self::start_with_clock(cfg, handlers, listener, Clock::system()).await
    }

    /// [`StandaloneExecutor::start`] on `clock` (every "now" of the executor: run logs, their
    /// cleanup, spool file names).
    pub async fn start_with_clock(
        cfg: &Config,
        handlers: HandlerRegistry,
        listener: Option<TcpListener>,
        clock: Clock,
    ) -> Result<Self> {
        let app = cfg.executor.app_name.trim().to_string();
        if app.is_empty() {
            return Err(Error::Config(
                "executor.app_name is required for a standalone executor".into(),
            ));
        }
        let token = match cfg.executor.access_token.trim() {
            "" => cfg.security.access_token.trim().to_string(),
            t => t.to_string(),
        };
        if token.is_empty() {
            return Err(Error::Config(
                "executor.access_token is required for a standalone executor (the admin's token)"
                    .into(),
            ));
        }
        let admins: Vec<String> = cfg
            .executor
            .admin_addresses
            .iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if admins.is_empty() {
            return Err(Error::Config(
                "executor.admin_addresses needs at least one admin URL".into(),
            ));
        }
        let ip = match cfg.executor.ip.trim() {
            "" => "127.0.0.1",
            ip => ip,
        };
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind((ip, cfg.executor.port))?,
        };
        let local = listener.local_addr()?;
        let address = match cfg.executor.address.trim() {
            "" => format!("http://{local}/"),
            a => a.to_string(),
        };
        let log_dir = PathBuf::from(&cfg.executor.log_path);
        let client = HttpExecutorClient::with_ca_file(
            Some(token.clone()),
            Duration::from_secs(cfg.http.client_timeout_secs),
            &cfg.http.client_ca_file,
        )?
        .with_app_name(&app);
        // each result goes first to the admin node that sent its run (see `AdminRoutes`)
        let routes = super::AdminRoutes::default();
        let callbacks = CallbackActor::new(
            admins.clone(),
            client.clone(),
            log_dir.join("callbacklog"),
            Duration::from_secs(cfg.executor.callback_retry_secs.max(1)),
            clock.clone(),
        )
        .with_routes(routes.clone())
        .start();
        let mut handlers = handlers;
        super::builtin::register(&mut handlers, &cfg.executor, client.clone())?;
        let executor = InProcessExecutor::start(
            handlers,
            callbacks.clone().recipient(),
            clock.clone(),
            RuntimeConfig {
                queue_capacity: cfg.executor.queue_capacity.max(1),
                scripts_enabled: cfg.executor.scripts_enabled,
                log_dir: Some(log_dir.clone()),
                run_logs: cfg.executor.run_logs,
                ..RuntimeConfig::default()
            },
            None,
        );
        let api = ExecutorApi {
            backend: Arc::new(executor.clone()) as Arc<dyn ExecutorClient>,
            access_token: Some(token),
            group: None,
            app_name: Some(app.clone()),
            routes: Some(routes.clone()),
        };
        let server = HttpServer::new(move || {
            let api = api.clone();
            App::new()
                .configure(move |c| server::config(c, api.clone()))
                .default_service(web::to(unknown))
        })
        .workers(2)
        .listen(listener)?
        .run();
        let handle = server.handle();
        actix::spawn(async move {
            if let Err(e) = server.await {
                tracing::error!(error = %e, "executor HTTP server failed");
            }
        });
        let registrar = Registrar::new(
            admins,
            client,
            (&app, &address),
            Duration::from_secs(cfg.registry.beat_secs),
            RunLogs {
                dir: log_dir,
                retention_days: cfg.executor.log_retention_days,
            },
            clock,
        )
        .with_routes(routes)
        .start();
        tracing::info!(%address, app = %app, "executor started");
        Ok(StandaloneExecutor {
            address,
            server: handle,
            executor,
            callbacks,
            registrar,
        })
    }

    /// Graceful stop: no new triggers, every job thread killed (their runs report), results
    /// flushed (sent or spooled), and `registryRemove` sent to the admins.
    pub async fn stop(self) {
        self.server.stop(true).await;
        self.executor.shutdown().await;
        let _ = self.callbacks.send(FlushCallbacks).await;
        let _ = self.registrar.send(Deregister).await;
        tracing::info!(address = %self.address, "executor stopped");
    }

    /// The callback sender (tests retry its spool on demand).
    pub fn callbacks(&self) -> &Addr<CallbackActor> {
        &self.callbacks
    }
}
