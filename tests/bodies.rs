//! A request body costs a small multiple of its size in memory, whatever it holds: bodies are
//! read into compact values as they are parsed, items are counted while they are read and a
//! batch past its limit is refused there, and a callback's repeated log ids are looked up once.
//! Measured with a counting allocator, in one test so nothing else allocates meanwhile.
#![allow(clippy::unwrap_used)]

mod common;

use actix_web::http::StatusCode;
use actix_web::test::{TestRequest, call_service, init_service, read_body};
use serde_json::Value;
use xjob::console::Console;
use xjob::console::groups::GroupInput;

use common::{T0, TestApp, run_paused};

#[global_allocator]
static ALLOC: xjob_alloc::Counting = xjob_alloc::Counting::new();

const TOKEN: &str = "global-token-0123456789";
const GROUP_TOKEN: &str = "group-token-0123456789";

/// The most a body may cost beyond itself, as a multiple of its size.
const AT_MOST: usize = 6;

#[test]
fn large_bodies_cost_a_small_multiple_of_their_size() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |_| {}).await;
        // a group with its own token: its executors' callbacks are checked run by run
        app.engine
            .add_group(GroupInput {
                app_name: "group-with-token".into(),
                title: "g".into(),
                address_type: 1,
                address_list: Some("http://127.0.0.1:9/".into()),
                access_token: Some(GROUP_TOKEN.into()),
            })
            .await
            .unwrap();
        let console = Console::new(app.engine.clone());
        let svc = init_service(
            actix_web::App::new().configure(xjob::routes::center(console, Some(TOKEN.into()))),
        )
        .await;

        // (with one group's token, as the reported attack sent it)
        let post = |path: &'static str, body: Vec<u8>| {
            let token = if path == "/runBatch" {
                TOKEN
            } else {
                GROUP_TOKEN
            };
            TestRequest::post()
                .uri(path)
                .insert_header(("XXL-JOB-ACCESS-TOKEN", token))
                .insert_header(("Content-Type", "application/json"))
                .insert_header(("Content-Length", body.len().to_string()))
                .set_payload(body)
                .to_request()
        };
        let measured = |body: &[u8]| -> (usize, usize) { (body.len(), ALLOC.held()) };

        // 8 MiB of zeros: four million entries that name no run
        let mut zeros = Vec::with_capacity(8 << 20);
        zeros.push(b'[');
        while zeros.len() < (8 << 20) - 2 {
            zeros.extend_from_slice(b"0,");
        }
        zeros.extend_from_slice(b"0]");
        // 8 MiB of the smallest results that name a run (no run this center knows), half of them
        // the same one
        let mut ones = Vec::with_capacity(8 << 20);
        ones.push(b'[');
        let mut n = 0u32;
        while ones.len() < (8 << 20) - 16 {
            n += 1;
            let id = if n.is_multiple_of(2) { 1 } else { n };
            ones.extend_from_slice(format!(r#"{{"logId":{id}}},"#).as_bytes());
        }
        ones.extend_from_slice(br#"{"logId":1}]"#);
        // 8 MiB of empty triggers to the executor's batch path
        let mut empties = Vec::with_capacity(8 << 20);
        empties.push(b'[');
        while empties.len() < (8 << 20) - 4 {
            empties.extend_from_slice(b"{},");
        }
        empties.extend_from_slice(b"{}]");

        for (path, body, answer) in [
            ("/api/callback", zeros, None),
            ("/api/callback", ones, None),
            ("/runBatch", empties, Some("at most 4096")),
        ] {
            let (size, before) = measured(&body);
            let req = post(path, body);
            ALLOC.reset_peak();
            let res = call_service(&svc, req).await;
            let peak = ALLOC.peak();
            assert_eq!(res.status(), StatusCode::OK);
            let v: Value = serde_json::from_slice(&read_body(res).await).unwrap();
            match answer {
                None => assert_eq!(v["code"], 200, "{path}: {v}"),
                Some(text) => {
                    assert_eq!(v["code"], 500, "{path}: {v}");
                    assert!(v["msg"].as_str().unwrap().contains(text), "{v}");
                }
            }
            let extra = peak.saturating_sub(before);
            eprintln!(
                "{path}: {} KiB beyond a {} KiB body",
                extra >> 10,
                size >> 10
            );
            assert!(
                extra <= AT_MOST * size,
                "{path}: {} MiB beyond a {} MiB body",
                extra >> 20,
                size >> 20
            );
        }
        app.close().await;
    });
}
