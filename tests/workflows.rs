//! `/v1/workflows`: workflow definitions are validated as a whole (every problem naming its
//! node), saved as versions (an edit made from an old version is refused), confined to the
//! user's groups, and keep the jobs they run from being deleted.
#![allow(clippy::unwrap_used)]

mod common;

use actix_web::http::{Method, StatusCode};
use actix_web::test::init_service;
use serde_json::{Value, json};
use xjob::console::Console;
use xjob::prelude::*;

use common::{T0, TestApp, call, run_paused};

const ADMIN_PW: &str = "admin-secret-1";

fn node(key: &str, job: i32) -> Value {
    json!({ "key": key, "type": "JOB", "jobId": job })
}

#[test]
fn workflows_are_validated_versioned_and_confined_to_their_groups() {
    run_paused(|| async {
        let dir = tempfile::tempdir().unwrap();
        let app = TestApp::start_in(dir.path(), T0, |c| {
            c.security.admin_password = ADMIN_PW.into()
        })
        .await;
        let console = Console::new(app.engine.clone());
        console.bootstrap_admin().await.unwrap();
        let svc = init_service(
            actix_web::App::new().configure(xjob::routes::center(console, Some("tok".into()))),
        )
        .await;
        let (_, login) = call(
            &svc,
            Method::POST,
            "/v1/auth/login",
            "",
            Some(json!({"username": "admin", "password": ADMIN_PW})),
        )
        .await;
        let admin = login["token"].as_str().unwrap().to_string();
        let g = app.group;
        let extract = app
            .job(JobSpec::cron(g, "extract", "0 0 3 * * ?", "demoJobHandler"))
            .await;
        let load = app
            .job(JobSpec::cron(g, "load", "0 0 3 * * ?", "demoJobHandler"))
            .await;

        let good = json!({
            "jobGroup": g, "name": "nightly", "description": "extract then load",
            "definition": {
                "nodes": [
                    node("extract", extract),
                    { "key": "check", "type": "DECISION", "expression": "rows > 0" },
                    { "key": "load", "type": "JOB", "jobId": load, "triggerRule": "ALL_SUCCESS", "param": "full" },
                    { "key": "alert", "type": "JOB", "jobId": load, "triggerRule": "ONE_FAILED" }
                ],
                "edges": [
                    { "from": "extract", "to": "check", "condition": "ON_SUCCESS" },
                    { "from": "check", "to": "load", "condition": "TRUE" },
                    { "from": "extract", "to": "alert" }
                ]
            }
        });
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflows/validate",
            &admin,
            Some(good.clone()),
        )
        .await;
        assert_eq!((s, &v["valid"]), (StatusCode::OK, &json!(true)), "{v}");

        // a field is typed whatever the node's type: a JOB node with a `workflowId` that is no
        // number is refused (400), as the OpenAPI document types it, not ignored; a node
        // without its kind's field names it
        for (field, value, says) in [
            ("workflowId", json!({}), "workflowId"),
            ("jobId", json!(null), "needs `jobId`"),
            ("type", json!("TIMER"), "unknown node type `TIMER`"),
        ] {
            let mut odd = good.clone();
            odd["definition"]["nodes"][0][field] = value;
            let (s, v) = call(
                &svc,
                Method::POST,
                "/v1/workflows/validate",
                &admin,
                Some(odd),
            )
            .await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{field}: {v}");
            assert!(v.to_string().contains(says), "{field}: {v}");
        }

        // a node that can never run is named: `alert` waits for a failure its edge never carries
        let mut dead = good.clone();
        dead["definition"]["edges"][2]["condition"] = json!("ON_SUCCESS");
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflows/validate",
            &admin,
            Some(dead),
        )
        .await;
        assert_eq!((s, &v["valid"]), (StatusCode::OK, &json!(false)), "{v}");
        assert_eq!(v["problems"][0]["node"], json!("alert"), "{v}");
        assert!(
            v["problems"][0]["message"]
                .as_str()
                .unwrap()
                .contains("can never run"),
            "{v}"
        );

        // every problem at once, each naming its node
        let mut bad = good.clone();
        bad["definition"]["nodes"][0]["jobId"] = json!(9999);
        bad["definition"]["nodes"][1]["expression"] = json!("rows >");
        bad["definition"]["edges"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "from": "load", "to": "extract" }));
        bad["definition"]["edges"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "from": "load", "to": "ghost" }));
        let (s, v) = call(
            &svc,
            Method::POST,
            "/v1/workflows/validate",
            &admin,
            Some(bad.clone()),
        )
        .await;
        assert_eq!((s, &v["valid"]), (StatusCode::OK, &json!(false)), "{v}");
        let problems: Vec<(String, String)> = v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["node"].as_str().unwrap_or("").to_string(),
                    p["message"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for (node, says) in [
            ("extract", "does not exist"),
            ("check", "does not parse"),
            ("ghost", "does not exist"),
            ("extract", "cycle"),
        ] {
            assert!(
                problems.iter().any(|(n, m)| n == node && m.contains(says)),
                "{node}: {says} in {problems:?}"
            );
        }
        let (s, e) = call(&svc, Method::POST, "/v1/workflows", &admin, Some(bad)).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["field"], "definition");
        // saving lists every problem, as validation does
        let said = e["error"].as_str().unwrap();
        for (node, says) in [
            ("extract", "does not exist"),
            ("check", "does not parse"),
            ("ghost", "does not exist"),
        ] {
            assert!(
                said.contains(&format!("node `{node}`")) && said.contains(says),
                "{node}: {says} in {said}"
            );
        }
        // an unknown workflow is 404, a body over the limit 413
        let (s, _) = call(
            &svc,
            Method::POST,
            "/v1/workflow-runs",
            &admin,
            Some(json!({ "workflowId": 424_242 })),
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let mut huge = good.clone();
        huge["description"] = json!("x".repeat(5 << 20));
        let (s, v) = call(&svc, Method::POST, "/v1/workflows", &admin, Some(huge)).await;
        assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        let (_, list) = call(&svc, Method::GET, "/v1/workflows", &admin, None).await;
        assert_eq!(list["total"], 0, "nothing saved: {list}");

        let (s, w) = call(
            &svc,
            Method::POST,
            "/v1/workflows",
            &admin,
            Some(good.clone()),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{w}");
        assert_eq!(
            (w["version"].as_i64(), w["author"].as_str()),
            (Some(1), Some("admin"))
        );
        let id = w["id"].as_i64().unwrap();
        assert_eq!(w["definition"]["nodes"][2]["param"], "full");

        // an edit saves version 2; one made from version 1 again is refused
        let mut edit = good.clone();
        edit["name"] = json!("nightly v2");
        edit["version"] = json!(1);
        edit["definition"]["nodes"].as_array_mut().unwrap().pop();
        edit["definition"]["edges"].as_array_mut().unwrap().pop();
        let (s, w2) = call(
            &svc,
            Method::PUT,
            &format!("/v1/workflows/{id}"),
            &admin,
            Some(edit.clone()),
        )
        .await;
        assert_eq!(
            (s, w2["version"].as_i64()),
            (StatusCode::OK, Some(2)),
            "{w2}"
        );
        let (s, e) = call(
            &svc,
            Method::PUT,
            &format!("/v1/workflows/{id}"),
            &admin,
            Some(edit),
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "{e}");
        let (_, v1) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflows/{id}?version=1"),
            &admin,
            None,
        )
        .await;
        assert_eq!(
            (
                v1["version"].as_i64(),
                v1["definition"]["nodes"].as_array().unwrap().len()
            ),
            (Some(1), 4)
        );
        let (_, cur) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflows/{id}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(
            (
                cur["name"].as_str(),
                cur["definition"]["nodes"].as_array().unwrap().len()
            ),
            (Some("nightly v2"), 3)
        );
        let (s, _) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflows/{id}?version=7"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND);

        // a job a workflow runs is not deleted from under it
        let (s, e) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/jobs/{extract}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "{e}");
        assert!(
            e["error"]
                .as_str()
                .unwrap()
                .contains(&format!("workflow(s) {id}")),
            "{e}"
        );

        // a workflow cannot run itself, directly or through another
        let mut outer = good.clone();
        outer["name"] = json!("outer");
        outer["definition"] = json!({ "nodes": [{ "key": "inner", "type": "WORKFLOW", "workflowId": id }], "edges": [] });
        let (s, o) = call(&svc, Method::POST, "/v1/workflows", &admin, Some(outer)).await;
        assert_eq!(s, StatusCode::CREATED, "{o}");
        let outer_id = o["id"].as_i64().unwrap();
        let mut loop_back = good.clone();
        loop_back["version"] = json!(2);
        loop_back["definition"]["nodes"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "key": "back", "type": "WORKFLOW", "workflowId": outer_id }));
        let (s, e) = call(
            &svc,
            Method::PUT,
            &format!("/v1/workflows/{id}"),
            &admin,
            Some(loop_back),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
        assert!(e["error"].as_str().unwrap().contains("node `back`"), "{e}");

        // a user of another group sees none of it
        let (s, _) = call(
            &svc,
            Method::POST,
            "/v1/groups",
            &admin,
            Some(json!({ "appName": "other-app", "title": "Other" })),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED);
        let (_, groups) = call(
            &svc,
            Method::GET,
            "/v1/groups?appName=other-app",
            &admin,
            None,
        )
        .await;
        let other = groups["items"][0]["id"].as_i64().unwrap();
        // a workflow of another group that runs `load` keeps it too
        let elsewhere = json!({ "jobGroup": other, "name": "elsewhere",
            "definition": { "nodes": [node("only", load)], "edges": [] } });
        let (s, ew) = call(&svc, Method::POST, "/v1/workflows", &admin, Some(elsewhere)).await;
        assert_eq!(s, StatusCode::CREATED, "{ew}");
        let (s, e) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/jobs/{load}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "{e}");
        assert!(
            e["error"].as_str().unwrap().contains(&ew["id"].to_string()),
            "{e}"
        );
        let (s, _) = call(&svc, Method::POST, "/v1/users", &admin, Some(json!({ "username": "bobby", "password": "bob-password-1", "role": 0, "permission": [other] }))).await;
        assert_eq!(s, StatusCode::CREATED);
        let (_, bl) = call(
            &svc,
            Method::POST,
            "/v1/auth/login",
            "",
            Some(json!({"username": "bobby", "password": "bob-password-1"})),
        )
        .await;
        let bob = bl["token"].as_str().unwrap().to_string();
        let (_, list) = call(&svc, Method::GET, "/v1/workflows", &bob, None).await;
        // only the workflow of bobby's own group
        assert_eq!(list["total"], 1, "{list}");
        assert_eq!(list["items"][0]["name"], "elsewhere");
        let (s, _) = call(
            &svc,
            Method::GET,
            &format!("/v1/workflows/{id}"),
            &bob,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::FORBIDDEN);
        let mut theirs = good.clone();
        theirs["jobGroup"] = json!(other);
        let (s, e) = call(&svc, Method::POST, "/v1/workflows", &bob, Some(theirs)).await;
        assert_eq!(
            s,
            StatusCode::BAD_REQUEST,
            "jobs of a group bob may not use: {e}"
        );
        assert!(
            e["error"].as_str().unwrap().contains("no permission"),
            "{e}"
        );

        let (s, e) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/workflows/{id}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::CONFLICT, "another workflow runs it: {e}");
        assert!(
            e["error"]
                .as_str()
                .unwrap()
                .contains(&format!("workflow(s) {outer_id}")),
            "{e}"
        );
        let (s, _) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/workflows/{outer_id}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        let (s, _) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/workflows/{id}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT);
        let (s, _) = call(
            &svc,
            Method::DELETE,
            &format!("/v1/jobs/{extract}"),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, StatusCode::NO_CONTENT, "free once its workflow is gone");
        let (_, audit) = call(
            &svc,
            Method::GET,
            "/v1/audit?targetType=workflow",
            &admin,
            None,
        )
        .await;
        let actions: Vec<&str> = audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(
            actions,
            [
                "workflow.delete",
                "workflow.delete",
                "workflow.create",
                "workflow.create",
                "workflow.update",
                "workflow.create"
            ]
        );
        app.close().await;
    });
}
