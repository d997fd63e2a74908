//! `GET /openapi.json`: an OpenAPI 3.1 document of the console API, built from the route table
//! [`super::v1::ROUTES`] so it cannot forget a route, with the request and answer schemas.

use actix_web::{HttpResponse, web};
use serde_json::{Map, Value, json};

use super::v1::ROUTES;

/// Mounts `GET /openapi.json`.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.route("/openapi.json", web::get().to(openapi));
}

async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(document())
}

fn props(fields: &[(&str, &str)]) -> Value {
    let mut m = Map::new();
    for (name, ty) in fields {
        let v = match *ty {
            "string?" => json!({ "type": ["string", "null"] }),
            "integer[]" => json!({ "type": "array", "items": { "type": "integer" } }),
            "string[]" => json!({ "type": "array", "items": { "type": "string" } }),
            t => json!({ "type": t }),
        };
        m.insert((*name).to_string(), v);
    }
    json!({ "type": "object", "properties": m })
}

const JOB_INPUT: &[(&str, &str)] = &[
    ("jobGroup", "integer"),
    ("jobDesc", "string"),
    ("author", "string"),
    ("alarmEmail", "string?"),
    ("scheduleType", "string"),
    ("scheduleConf", "string?"),
    ("misfireStrategy", "string"),
    ("executorRouteStrategy", "string"),
    ("executorHandler", "string?"),
    ("executorParam", "string?"),
    ("executorBlockStrategy", "string"),
    ("executorTimeout", "integer"),
    ("executorFailRetryCount", "integer"),
    ("glueType", "string"),
    ("glueSource", "string?"),
    ("glueRemark", "string?"),
    ("childJobId", "string?"),
    ("timeZone", "string?"),
    ("retryInterval", "integer"),
    ("alarmWebhook", "string?"),
];

fn schemas() -> Value {
    let mut job = JOB_INPUT.to_vec();
    job.extend([
        ("id", "integer"),
        ("addTime", "string?"),
        ("updateTime", "string?"),
        ("glueUpdatetime", "string?"),
        ("triggerStatus", "integer"),
        ("triggerLastTime", "integer"),
        ("triggerNextTime", "integer"),
    ]);
    let group_input = [
        ("appName", "string"),
        ("title", "string"),
        ("addressType", "integer"),
        ("addressList", "string?"),
    ];
    let mut group = group_input.to_vec();
    group.extend([
        ("id", "integer"),
        ("registryList", "string[]"),
        ("updateTime", "string?"),
    ]);
    json!({
        "JobInput": props(JOB_INPUT),
        "Job": props(&job),
        "GroupInput": props(&group_input),
        "Group": props(&group),
        "Log": props(&[
            ("id", "integer"), ("jobGroup", "integer"), ("jobId", "integer"),
            ("executorAddress", "string?"), ("executorHandler", "string?"),
            ("executorParam", "string?"), ("executorShardingParam", "string?"),
            ("executorFailRetryCount", "integer"), ("triggerTime", "string?"),
            ("triggerCode", "integer"), ("triggerMsg", "string?"), ("handleTime", "string?"),
            ("handleCode", "integer"), ("handleMsg", "string?"), ("alarmStatus", "integer"),
            ("triggerType", "string?"), ("fireTime", "integer"), ("status", "string"),
        ]),
        "LogContent": props(&[
            ("fromLine", "integer"), ("toLine", "integer"), ("content", "string"), ("end", "boolean"),
        ]),
        "ClearInput": props(&[("jobGroup", "integer"), ("jobId", "integer"), ("type", "integer")]),
        "TriggerInput": props(&[("executorParam", "string?"), ("addressList", "string?")]),
        "Glue": props(&[
            ("jobId", "integer"), ("glueType", "string"), ("glueSource", "string?"),
            ("glueRemark", "string?"), ("glueUpdatetime", "string?"),
            ("history", "string[]"),
        ]),
        "GlueInput": props(&[("glueSource", "string"), ("glueRemark", "string")]),
        "UserInput": props(&[
            ("username", "string"), ("password", "string?"), ("role", "integer"),
            ("permission", "integer[]"),
        ]),
        "User": props(&[
            ("id", "integer"), ("username", "string"), ("role", "integer"),
            ("permission", "integer[]"),
        ]),
        "Me": props(&[
            ("id", "integer"), ("username", "string"), ("role", "integer"),
            ("permission", "integer[]"), ("scriptsEnabled", "boolean"),
        ]),
        "LoginInput": props(&[("username", "string"), ("password", "string")]),
        "Login": props(&[("token", "string"), ("expiresAt", "integer")]),
        "PasswordInput": props(&[("oldPassword", "string"), ("password", "string")]),
        "Dashboard": props(&[
            ("jobInfoCount", "integer"), ("jobLogCount", "integer"),
            ("jobLogSuccessCount", "integer"), ("jobLogFailCount", "integer"),
            ("jobLogRunningCount", "integer"), ("executorCount", "integer"),
        ]),
        "Chart": props(&[
            ("triggerDayList", "string[]"), ("triggerDayCountRunningList", "integer[]"),
            ("triggerDayCountSucList", "integer[]"), ("triggerDayCountFailList", "integer[]"),
            ("triggerCountRunningTotal", "integer"), ("triggerCountSucTotal", "integer"),
            ("triggerCountFailTotal", "integer"),
        ]),
        "Error": props(&[("status", "integer"), ("error", "string"), ("field", "string?")]),
    })
}

/// Request body schema, query parameters and answer schema of a route.
fn shape(method: &str, path: &str) -> (Option<&'static str>, &'static [&'static str], Value) {
    let r = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    let page = |name: &str| {
        json!({ "type": "object", "properties": {
            "total": { "type": "integer" },
            "items": { "type": "array", "items": r(name) } } })
    };
    const PAGE: [&str; 2] = ["offset", "limit"];
    match (method, path) {
        ("post", "/v1/auth/login") => (Some("LoginInput"), &[], r("Login")),
        ("post", "/v1/auth/password") => (Some("PasswordInput"), &[], json!(null)),
        ("get", "/v1/auth/me") => (None, &[], r("Me")),
        ("get", "/v1/groups") => (None, &["appName", "title", PAGE[0], PAGE[1]], page("Group")),
        ("post" | "put", p) if p.starts_with("/v1/groups") => (Some("GroupInput"), &[], r("Group")),
        ("get", "/v1/groups/{id}") => (None, &[], r("Group")),
        ("get", "/v1/jobs") => (
            None,
            &[
                "jobGroup",
                "triggerStatus",
                "jobDesc",
                "executorHandler",
                "author",
                "offset",
                "limit",
            ],
            page("Job"),
        ),
        ("get", "/v1/jobs/next-fire-times") => (
            None,
            &["scheduleType", "scheduleConf", "timeZone", "count"],
            json!({ "type": "object", "properties": {
                "total": { "type": "integer" },
                "items": { "type": "array", "items": { "type": "string", "format": "date-time" } } } }),
        ),
        ("post", "/v1/jobs") | ("put", "/v1/jobs/{id}") => (Some("JobInput"), &[], r("Job")),
        ("get", "/v1/jobs/{id}") | ("post", "/v1/jobs/{id}/start" | "/v1/jobs/{id}/stop") => {
            (None, &[], r("Job"))
        }
        ("post", "/v1/jobs/{id}/trigger") => {
            (Some("TriggerInput"), &[], json!({ "type": "object" }))
        }
        ("get", "/v1/jobs/{id}/glue") => (None, &[], r("Glue")),
        ("put", "/v1/jobs/{id}/glue") => (Some("GlueInput"), &[], r("Glue")),
        ("get", "/v1/logs") => (
            None,
            &[
                "jobGroup", "jobId", "status", "from", "to", "offset", "limit",
            ],
            page("Log"),
        ),
        ("post", "/v1/logs/clear") => (
            Some("ClearInput"),
            &[],
            json!({ "type": "object", "properties": { "deleted": { "type": "integer" } } }),
        ),
        ("get", "/v1/logs/{id}") | ("post", "/v1/logs/{id}/kill") => (None, &[], r("Log")),
        ("get", "/v1/logs/{id}/content") => (None, &["fromLine"], r("LogContent")),
        ("get", "/v1/users") => (None, &["username", "role", "offset", "limit"], page("User")),
        ("post" | "put", p) if p.starts_with("/v1/users") => (Some("UserInput"), &[], r("User")),
        ("get", "/v1/dashboard") => (None, &[], r("Dashboard")),
        ("get", "/v1/dashboard/chart") => (None, &["from", "to"], r("Chart")),
        _ => (None, &[], json!(null)),
    }
}

/// The whole document.
pub(crate) fn document() -> Value {
    let mut paths = Map::new();
    for (method, path, summary) in ROUTES {
        let (body, query, answer) = shape(method, path);
        let mut params: Vec<Value> = query
            .iter()
            .map(|q| json!({ "name": q, "in": "query", "required": *q == "scheduleType", "schema": { "type": "string" } }))
            .collect();
        if path.contains("{id}") {
            params.push(json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }));
        }
        let ok = if answer.is_null() {
            json!({ "204": { "description": "Done" } })
        } else {
            json!({ "200": { "description": "OK", "content": { "application/json": { "schema": answer } } } })
        };
        let mut responses = ok.as_object().cloned().unwrap_or_default();
        let err = json!({ "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
        for (code, what) in [
            ("400", "Invalid input; `field` names it"),
            ("401", "No valid token"),
            ("403", "Outside your role or groups"),
            ("404", "Unknown id"),
            ("409", "Conflicts with the current state"),
        ] {
            let mut e = err.clone();
            e["description"] = json!(what);
            responses.insert(code.into(), e);
        }
        let mut op = json!({ "summary": summary, "parameters": params, "responses": responses });
        if let Some(b) = body {
            op["requestBody"] = json!({ "required": true, "content": { "application/json": {
                "schema": { "$ref": format!("#/components/schemas/{b}") } } } });
        }
        if *path == "/v1/auth/login" {
            op["security"] = json!([]);
        }
        let entry = paths
            .entry((*path).to_string())
            .or_insert_with(|| json!({}));
        entry[*method] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "xjob console API",
            "version": env!("CARGO_PKG_VERSION"),
            "license": { "name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0" },
        },
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
                "cookie": { "type": "apiKey", "in": "cookie", "name": crate::console::auth::COOKIE },
            },
        },
        "security": [ { "bearer": [] }, { "cookie": [] } ],
    })
}
