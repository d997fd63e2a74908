//! The XXL-JOB 2.4 wire protocol over real HTTP on 127.0.0.1: the executor endpoints
//! (`/beat`, `/idleBeat`, `/run`, `/kill`, `/log`) and the admin API (`/api/registry`,
//! `/api/registryRemove`, `/api/callback`, also under `/xxl-job-admin`), with wrong tokens,
//! wrong methods, unknown paths and malformed bodies; and a trigger routed over HTTP from an
//! admin to standalone executors, with FAILOVER and BUSYOVER probing a dead address first.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use xjob::prelude::*;

const TOKEN: &str = "s3cret-token";

/// A node with the demo executor (or without) at its own HTTP address.
async fn node(dir: &std::path::Path, with_executor: bool) -> HttpNode {
    http_node(dir, TOKEN, with_executor, |_| {}).await
}

/// A standalone executor (the demo handlers) in `dir`, sending its results to `admin_node`.
async fn executor(
    dir: &std::path::Path,
    admin_node: &HttpNode,
) -> xjob::executor::StandaloneExecutor {
    let mut c = Config::default();
    c.executor.app_name = "wire-exec".into();
    c.executor.admin_addresses = vec![format!("{}xxl-job-admin", admin_node.address)];
    c.executor.log_path = dir.display().to_string();
    c.executor.access_token = TOKEN.into();
    xjob::executor::StandaloneExecutor::start(
        &c,
        xjob::demo::handlers().unwrap(),
        Some(std::net::TcpListener::bind("127.0.0.1:0").unwrap()),
    )
    .await
    .unwrap()
}

/// The automatic group of the standalone executors (`wire-exec`), once `addresses` have joined
/// the list dispatch routes by (which follows the stored list a moment later); answers its id.
async fn executors_group(node: &HttpNode, addresses: &[&str]) -> i32 {
    let group = node.engine.ensure_group("wire-exec", "wire").await.unwrap();
    eventually("the executors registered", 10, || async {
        let list = xjob::testing::routed_addresses(&node.engine, group);
        addresses.iter().all(|a| list.iter().any(|l| l == a))
    })
    .await;
    group
}

async fn post(url: &str, body: &str, token: Option<(&str, &str)>) -> Value {
    let c = awc::Client::default();
    let mut req = c
        .post(url)
        .insert_header(("Content-Type", "application/json;charset=UTF-8"));
    if let Some(h) = token {
        req = req.insert_header(h);
    }
    let mut resp = req.send_body(body.to_string()).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "always HTTP 200");
    serde_json::from_slice(&resp.body().await.unwrap()).unwrap()
}

async fn get(url: &str) -> Value {
    let mut resp = awc::Client::default().get(url).send().await.unwrap();
    serde_json::from_slice(&resp.body().await.unwrap()).unwrap()
}

const AUTH: (&str, &str) = ("XXL-JOB-ACCESS-TOKEN", TOKEN);

/// The executor endpoints answer as XXL-JOB's do, token checked.
#[test]
fn executor_endpoints_answer_as_xxl_job() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let n = node(dir.path(), true).await;
        let u = |p: &str| format!("{}{p}", n.address);
        assert_eq!(
            post(&u("beat"), "\"\"", Some(AUTH)).await,
            json!({"code":200})
        );
        assert_eq!(
            post(&u("beat"), "", Some(("XXL-RPC-ACCESS-TOKEN", TOKEN))).await["code"],
            200,
            "old header"
        );
        assert_eq!(
            post(&u("beat"), "", None).await,
            json!({"code":500,"msg":"The access token is wrong."})
        );
        assert_eq!(
            post(&u("beat"), "", Some(("XXL-JOB-ACCESS-TOKEN", "nope"))).await["code"],
            500
        );
        assert_eq!(
            get(&u("beat")).await["msg"],
            "invalid request, HttpMethod not support."
        );
        let bad = post(&u("run"), "{", Some(AUTH)).await;
        assert_eq!(bad["code"], 500);
        assert!(
            bad["msg"].as_str().unwrap().starts_with("request error:"),
            "{bad}"
        );
        let r = post(
            &u("run"),
            r#"{"jobId":9,"executorHandler":"nope","glueType":"BEAN","logId":1,"unknownKey":1}"#,
            Some(AUTH),
        )
        .await;
        assert_eq!(r["msg"], "job handler [nope] not found.");
        // a `/run` carrying a GLUE source of 6 MiB (XXL-JOB's executors take 5 MiB) is read,
        // not refused at actix's default 256 KiB
        let big = json!({"jobId":9,"executorHandler":"nope","glueType":"BEAN","logId":2,"glueSource":"x".repeat(6 << 20)}).to_string();
        assert_eq!(post(&u("run"), &big, Some(AUTH)).await["msg"], "job handler [nope] not found.");
        let r = post(
            &u("run"),
            r#"{"jobId":9,"glueType":"GLUE_GROOVY","logId":1}"#,
            Some(AUTH),
        )
        .await;
        assert_eq!(r["msg"], "glueType[GLUE_GROOVY] is not valid.");
        assert_eq!(
            post(&u("idleBeat"), r#"{"jobId":9}"#, Some(AUTH)).await,
            json!({"code":200})
        );
        assert_eq!(
            post(&u("kill"), r#"{"jobId":9}"#, Some(AUTH)).await,
            json!({"code":200,"msg":"job thread already killed."})
        );
        let log = post(
            &u("log"),
            r#"{"logDateTim":0,"logId":77,"fromLineNum":1}"#,
            Some(AUTH),
        )
        .await;
        // XXL-JOB's words (this executor adds why it cannot be sure of a run recorded before
        // it started)
        assert!(
            log["content"]["logContent"]
                .as_str()
                .unwrap()
                .starts_with("readLog fail, logFile not exists"),
            "{log}"
        );
        assert_eq!(log["content"]["isEnd"], true);
        assert_eq!(log["data"], log["content"], "3.3+ admins read `data`");
        n.server.stop(true).await;
        n.engine.db().clone().close().await.unwrap();
    });
}

/// The admin API registers and removes executors and takes callbacks, token checked.
#[test]
fn admin_api_registers_removes_and_takes_callbacks() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let n = node(dir.path(), true).await;
        let group = n.engine.ensure_group("remote-app", "remote").await.unwrap();
        let u = |p: &str| format!("{}{p}", n.address);
        let reg = |v: &str| json!({"registryGroup":"EXECUTOR","registryKey":"remote-app","registryValue":v}).to_string();
        assert_eq!(post(&u("api/registry"), &reg("http://10.0.0.2:9999/"), Some(AUTH)).await["code"], 200);
        assert_eq!(post(&u("xxl-job-admin/api/registry"), &reg("http://10.0.0.1:9999"), Some(AUTH)).await["code"], 200);
        let list = || async {
            xjob::testing::store::groups::get(n.engine.db(), group).await.unwrap().address_list
        };
        // a new executor is in the list at once, sorted
        assert_eq!(list().await.as_deref(), Some("http://10.0.0.1:9999,http://10.0.0.2:9999/"));
        assert_eq!(
            post(&u("api/registry"), &json!({"registryGroup":"EXECUTOR","registryKey":" ","registryValue":"x"}).to_string(), Some(AUTH)).await,
            json!({"code":500,"msg":"Illegal Argument."})
        );
        assert_eq!(post(&u("api/registry"), "not json", Some(AUTH)).await["msg"], "Illegal Argument.");
        assert_eq!(post(&u("api/registry"), &reg("http://x/"), None).await["msg"], "The access token is wrong.");
        assert_eq!(get(&u("api/registry")).await["msg"], "invalid request, HttpMethod not support.");
        assert_eq!(post(&u("api/nope"), "{}", Some(AUTH)).await["msg"], "invalid request, uri-mapping(nope) not found.");
        // a graceful removal takes effect at once
        assert_eq!(post(&u("api/registryRemove"), &reg("http://10.0.0.2:9999/"), Some(AUTH)).await["code"], 200);
        assert_eq!(list().await.as_deref(), Some("http://10.0.0.1:9999"));

        // callbacks: first result wins, messages of any JSON type
        let log_id = xjob::testing::store::logs::insert_run(n.engine.db(), group, 1, 0, xjob::model::TriggerType::Manual, 0).await.unwrap();
        let cb = json!([{"logId":log_id,"logDateTim":0,"handleCode":200,"handleMsg":{"rows":3},"executeResult":{"code":200}}]).to_string();
        assert_eq!(post(&u("api/callback"), &cb, Some(AUTH)).await, json!({"code":200}));
        let cb2 = json!([{"logId":log_id,"logDateTim":0,"handleCode":500,"handleMsg":"late"}]).to_string();
        assert_eq!(post(&u("xxl-job-admin/api/callback"), &cb2, Some(AUTH)).await["code"], 200);
        let row = xjob::testing::store::logs::get(n.engine.db(), log_id).await.unwrap();
        assert_eq!((row.handle_code, row.handle_msg.as_deref()), (200, Some(r#"{"rows":3}"#)));
        assert_eq!(post(&u("api/callback"), "[{", Some(AUTH)).await["code"], 500);
        // a callback batch over actix's default 256 KiB body limit is taken on a node that
        // mounts only the node routes (no console), like an embedding app
        let big = xjob::testing::store::logs::insert_run(n.engine.db(), group, 1, 0, xjob::model::TriggerType::Manual, 0).await.unwrap();
        let cb = json!([{"logId":big,"logDateTim":0,"handleCode":200,"handleMsg":"x".repeat(300_000)}]).to_string();
        assert!(cb.len() > 256 << 10);
        assert_eq!(post(&u("api/callback"), &cb, Some(AUTH)).await, json!({"code":200}));
        assert_eq!(xjob::testing::store::logs::get(n.engine.db(), big).await.unwrap().handle_code, 200);
        n.server.stop(true).await;
        n.engine.db().clone().close().await.unwrap();
    });
}

/// A trigger routes over HTTP to an executor served by another node.
#[test]
fn triggers_route_over_http_to_another_nodes_executor() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        // B is an executor (the demo handlers) reporting to A, an admin without one
        let a = node(dir.path(), false).await;
        let b = executor(&dir.path().join("b"), &a).await;
        // the executor's own group: the node sends its token only to its groups' addresses
        let group = executors_group(&a, &[&b.address]).await;
        let dead = "http://127.0.0.1:9/"; // nothing listens on the discard port
        for route in ["FIRST", "FAILOVER", "BUSYOVER"] {
            let mut spec = JobSpec::cron(group, route, "0 0 0 * * ?", "demoJobHandler");
            spec.executor_route_strategy = route.into();
            let job = a.engine.add_job(spec).await.unwrap();
            let list = if route == "FIRST" {
                b.address.clone()
            } else {
                format!("{dead},{}", b.address)
            };
            a.engine
                .trigger_job(job, Some("over-http".into()), Some(list))
                .await
                .unwrap();
            let db = a.engine.db().clone();
            eventually(&format!("{route} run finished"), 10, || {
                let db = db.clone();
                async move {
                    xjob::testing::store::logs::for_job(&db, job)
                        .await
                        .unwrap()
                        .first()
                        .is_some_and(|r| r.handle_code != 0)
                }
            })
            .await;
            let row = xjob::testing::store::logs::for_job(a.engine.db(), job)
                .await
                .unwrap()
                .remove(0);
            assert_eq!(row.trigger_code, 200, "{route}: {:?}", row.trigger_msg);
            assert_eq!(row.handle_code, 200, "{route}: {:?}", row.handle_msg);
            assert_eq!(row.executor_address.as_deref(), Some(b.address.as_str()));
            let msg = row.trigger_msg.unwrap();
            if route != "FIRST" {
                assert!(
                    msg.contains(&format!("address：{dead}<br>code：500")),
                    "{route} transcript: {msg}"
                );
                assert!(
                    msg.contains(&format!("address：{}<br>code：200", b.address)),
                    "{msg}"
                );
            }
        }
        b.stop().await;
        a.server.stop(true).await;
        a.engine.db().clone().close().await.unwrap();
    });
}

/// BUSYOVER skips an executor whose idle beat says it is busy with the job.
#[test]
fn busyover_skips_an_executor_busy_with_the_job() {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    actix_rt::System::new().block_on(async {
        let a = node(dir.path(), false).await;
        let b1 = executor(&dir.path().join("b1"), &a).await;
        let b2 = executor(&dir.path().join("b2"), &a).await;
        let group = executors_group(&a, &[&b1.address, &b2.address]).await;
        let mut spec = JobSpec::cron(group, "long", "0 0 0 * * ?", "sleepJobHandler");
        spec.executor_route_strategy = "BUSYOVER".into();
        let job = a.engine.add_job(spec).await.unwrap();
        // the first run keeps b1 busy with this job for a minute
        a.engine
            .trigger_job(job, Some("60".into()), Some(b1.address.clone()))
            .await
            .unwrap();
        let db = a.engine.db().clone();
        eventually("first run dispatched", 10, || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, job)
                    .await
                    .unwrap()
                    .first()
                    .is_some_and(|r| r.trigger_code == 200)
            }
        })
        .await;
        let list = format!("{},{}", b1.address, b2.address);
        a.engine
            .trigger_job(job, Some("0".into()), Some(list))
            .await
            .unwrap();
        eventually("second run dispatched", 10, || {
            let db = db.clone();
            async move {
                xjob::testing::store::logs::for_job(&db, job)
                    .await
                    .unwrap()
                    .get(1)
                    .is_some_and(|r| r.trigger_code != 0)
            }
        })
        .await;
        let second = xjob::testing::store::logs::for_job(a.engine.db(), job)
            .await
            .unwrap()
            .remove(1);
        assert_eq!(
            second.executor_address.as_deref(),
            Some(b2.address.as_str()),
            "{:?}",
            second.trigger_msg
        );
        let msg = second.trigger_msg.unwrap();
        assert!(
            msg.contains(&format!(
                "address：{}<br>code：500<br>msg：job thread is running or has trigger queue.",
                b1.address
            )),
            "{msg}"
        );
        b1.stop().await;
        b2.stop().await;
        a.server.stop(false).await;
        a.engine.db().clone().close().await.unwrap();
    });
}
