//! HTTPS to executors and admins: a TLS stand-in (actix-web with rustls) holding a throw-away
//! certificate signed by a test CA (`tests/fixtures/tls`). The client verifies it once the CA is
//! trusted through `http.client_ca_file`, refuses it otherwise, and a bad bundle is a clear
//! error; the standalone executor registers with an `https://` admin under the same key.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use common::{eventually, init_tracing};
use parking_lot::Mutex;
use xjob::executor::{ExecutorClient, HttpExecutorClient, StandaloneExecutor};
use xjob::model::wire::TriggerParam;
use xjob::prelude::*;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The stand-in's TLS: the `localhost` / `127.0.0.1` certificate signed by the test CA.
fn server_tls() -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(fixture("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("server.key")).unwrap();
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap()
}

/// A TLS server answering every POST with XXL-JOB's success and noting each path; answers its
/// `https://127.0.0.1:<port>/` address.
fn tls_stand_in(seen: Arc<Mutex<Vec<String>>>) -> (String, actix_web::dev::ServerHandle) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!(
        "https://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    let server = HttpServer::new(move || {
        let seen = seen.clone();
        App::new().default_service(web::to(move |req: actix_web::HttpRequest| {
            let seen = seen.clone();
            async move {
                seen.lock().push(req.path().to_string());
                HttpResponse::Ok().json(serde_json::json!({ "code": 200 }))
            }
        }))
    })
    .workers(1)
    .listen_rustls_0_23(listener, server_tls())
    .unwrap()
    .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (address, handle)
}

/// With the test CA in `http.client_ca_file` a `/run` to an `https://` executor succeeds;
/// without it the certificate is refused (a failed trigger naming the remoting error); a
/// missing or certificate-less bundle is an error naming the key.
#[test]
fn https_executors_are_verified_against_the_configured_ca() {
    init_tracing();
    actix_rt::System::new().block_on(async {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (address, server) = tls_stand_in(seen.clone());
        let param = TriggerParam {
            job_id: 1,
            log_id: 7,
            ..Default::default()
        };

        let trusted =
            HttpExecutorClient::with_ca_file(None, Duration::from_secs(3), &fixture("ca.pem"))
                .unwrap();
        let r = trusted.run(&address, param.clone()).await;
        assert_eq!(r.code, 200, "{r:?}");
        assert_eq!(trusted.beat(&address).await.code, 200);
        assert_eq!(*seen.lock(), vec!["/run".to_string(), "/beat".to_string()]);

        let default_roots = HttpExecutorClient::new(None, Duration::from_secs(3));
        let r = default_roots.run(&address, param).await;
        assert_eq!(r.code, 500);
        assert!(
            r.msg
                .as_deref()
                .unwrap_or("")
                .contains("xxl-job remoting error"),
            "{r:?}"
        );
        assert_eq!(seen.lock().len(), 2, "the refused call reached no handler");

        for bad in [fixture("missing.pem"), fixture("README.md")] {
            let e = HttpExecutorClient::with_ca_file(None, Duration::from_secs(3), &bad)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("http.client_ca_file"), "{e}");
        }
        server.stop(false).await;
    });
}

/// The standalone executor takes the same key: it registers with an `https://` admin whose
/// certificate only the configured CA vouches for.
#[test]
fn the_standalone_executor_registers_with_an_https_admin() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let (admin, server) = tls_stand_in(seen.clone());
        let mut cfg = Config::default();
        cfg.executor.app_name = "tls-exec".into();
        cfg.executor.admin_addresses = vec![format!("{admin}xxl-job-admin")];
        cfg.executor.access_token = "tls-token".into();
        cfg.executor.log_path = dir.path().join("logs").display().to_string();
        cfg.http.client_ca_file = fixture("ca.pem");
        let exec = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .unwrap();
        eventually("registered over HTTPS", 15, || async {
            seen.lock()
                .iter()
                .any(|p| p == "/xxl-job-admin/api/registry")
        })
        .await;
        exec.stop().await;
        server.stop(false).await;

        cfg.http.client_ca_file = fixture("missing.pem");
        let e = StandaloneExecutor::start(
            &cfg,
            xjob::demo::handlers().unwrap(),
            Some(TcpListener::bind("127.0.0.1:0").unwrap()),
        )
        .await
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("http.client_ca_file"), "{e}");
    });
}
