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
            "integer?" => json!({ "type": ["integer", "null"] }),
            "integer[]" => json!({ "type": "array", "items": { "type": "integer" } }),
            "string[]" => json!({ "type": "array", "items": { "type": "string" } }),
            t => json!({ "type": t }),
        };
        m.insert((*name).to_string(), v);
    }
    json!({ "type": "object", "properties": m })
}

/// A job's input fields and their JSON types (also the form fields XXL-JOB's `/jobinfo/add` takes).
pub(crate) const JOB_INPUT: &[(&str, &str)] = &[
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

/// `schema` (an object) with `required` properties and each `(property, constraints)` merged in.
fn constrain(mut schema: Value, required: &[&str], extra: &[(&str, Value)]) -> Value {
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    for (name, more) in extra {
        // a reference replaces the property whole (siblings of `$ref` mean nothing)
        if more.get("$ref").is_some() {
            schema["properties"][*name] = more.clone();
            continue;
        }
        if let (Some(p), Some(m)) = (
            schema["properties"][*name].as_object_mut(),
            more.as_object(),
        ) {
            for (k, v) in m {
                p.insert(k.clone(), v.clone());
            }
        }
    }
    schema
}

/// A new password's length rule.
fn password() -> Value {
    use crate::console::auth::{MAX_PASSWORD, MIN_PASSWORD};
    json!({ "minLength": MIN_PASSWORD, "maxLength": MAX_PASSWORD })
}

/// The names of an enum's values.
fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Value {
    json!(all.iter().map(|v| name(*v)).collect::<Vec<_>>())
}

/// What `JobSpec::validate` enforces that a schema can say (a cron's validity, the group's and
/// child jobs' existence cannot be).
fn job_input() -> Value {
    use crate::model::{BlockStrategy, GlueType, MisfireStrategy, RouteStrategy, ScheduleType};
    let count = json!({ "minimum": 0, "maximum": i32::MAX });
    let zones: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()).collect();
    let mut s = constrain(
        props(JOB_INPUT),
        &["jobGroup", "jobDesc", "author"],
        &[
            ("jobGroup", json!({ "minimum": 1, "maximum": i32::MAX })),
            ("jobDesc", json!({ "pattern": r"\S" })),
            ("author", json!({ "pattern": r"\S" })),
            (
                "executorParam",
                json!({ "maxLength": crate::jobs::MAX_PARAM_CHARS }),
            ),
            (
                "scheduleType",
                json!({ "enum": names(ScheduleType::ALL, ScheduleType::as_str) }),
            ),
            (
                "misfireStrategy",
                json!({ "enum": names(MisfireStrategy::ALL, MisfireStrategy::as_str) }),
            ),
            (
                "executorRouteStrategy",
                json!({ "enum": names(RouteStrategy::ALL, RouteStrategy::as_str) }),
            ),
            (
                "executorBlockStrategy",
                json!({ "enum": names(BlockStrategy::ALL, BlockStrategy::as_str) }),
            ),
            (
                "glueType",
                json!({ "enum": names(GlueType::ALL, GlueType::as_str) }),
            ),
            ("executorTimeout", count.clone()),
            ("executorFailRetryCount", count.clone()),
            ("retryInterval", count),
            (
                "alarmWebhook",
                json!({ "pattern": r"^(\s*|\s*https?://[\s\S]*)$" }),
            ),
            (
                "childJobId",
                json!({ "pattern": r"^[\s,]*([1-9][0-9]{0,8}[\s,]*)*$" }),
            ),
            ("timeZone", json!({ "enum": zones })),
        ],
    );
    // every text field at most its column's length
    for (field, max) in crate::jobs::FIELD_LIMITS {
        s["properties"][field]["maxLength"] = json!(max);
    }
    // a BEAN job (the default) names its handler
    s["if"] = json!({ "properties": { "glueType": { "const": "BEAN" } } });
    s["then"] = json!({ "required": ["executorHandler"],
        "properties": { "executorHandler": { "type": "string", "pattern": r"\S" } } });
    s
}

/// What `GroupInput` checks: the appname's length and characters, a title, and the address
/// list a manual group must have.
fn group_input_schema() -> Value {
    let mut s = constrain(
        props(&[
            ("appName", "string"),
            ("title", "string"),
            ("addressType", "integer"),
            ("addressList", "string?"),
            ("accessToken", "string?"),
        ]),
        &["appName", "title"],
        &[
            (
                "appName",
                json!({ "pattern": r"^[^<>\s][^<>]{2,62}[^<>\s]$" }),
            ),
            ("title", json!({ "maxLength": 64, "pattern": r"\S" })),
            ("addressType", json!({ "enum": [0, 1] })),
            (
                "addressList",
                json!({ "maxLength": crate::console::MAX_ADDRESS_LIST_CHARS }),
            ),
            // empty: the global token
            ("accessToken", json!({ "pattern": r"^([!-~]{16,255})?$" })),
        ],
    );
    s["if"] =
        json!({ "properties": { "addressType": { "const": 1 } }, "required": ["addressType"] });
    s["then"] = json!({ "required": ["addressList"],
        "properties": { "addressList": { "type": "string", "pattern": r"^\s*https?://" } } });
    s
}

/// A new job's input: a job's fields and whether it is created running.
fn new_job_input() -> Value {
    let mut s = job_input();
    s["properties"]["triggerStatus"] = json!({
        "type": "integer", "enum": [0, 1], "default": 0,
        "description": "0: created stopped (as XXL-JOB); 1: created running, its first fire the schedule's next time" });
    s
}

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
    let mut group = vec![
        ("appName", "string"),
        ("title", "string"),
        ("addressType", "integer"),
        ("addressList", "string?"),
    ];
    group.extend([
        ("id", "integer"),
        ("registryList", "string[]"),
        ("updateTime", "string?"),
        ("hasAccessToken", "boolean"),
        ("accessToken", "string?"),
    ]);
    json!({
        "JobInput": job_input(),
        "NewJobInput": new_job_input(),
        "Job": props(&job),
        "GroupInput": group_input_schema(),
        "Group": props(&group),
        "AuditEntry": props(&[
            ("id", "integer"), ("time", "string?"), ("username", "string"),
            ("clientIp", "string"), ("action", "string"), ("targetType", "string"),
            ("targetId", "string"), ("detail", "string"),
        ]),
        "Log": props(&[
            ("id", "integer"), ("jobGroup", "integer"), ("jobId", "integer"),
            ("jobDesc", "string?"), ("executorAddress", "string?"), ("executorHandler", "string?"),
            ("executorParam", "string?"), ("executorShardingParam", "string?"),
            ("executorFailRetryCount", "integer"), ("triggerTime", "string?"),
            ("triggerCode", "integer"), ("triggerMsg", "string?"), ("handleTime", "string?"),
            ("handleCode", "integer"), ("handleMsg", "string?"), ("alarmStatus", "integer"),
            ("triggerType", "string?"), ("fireTime", "integer?"), ("status", "string"),
        ]),
        "LogContent": props(&[
            ("fromLine", "integer"), ("toLine", "integer"), ("content", "string"), ("end", "boolean"),
        ]),
        "ClearInput": constrain(
            props(&[("jobGroup", "integer?"), ("jobId", "integer?"), ("type", "integer")]),
            &["type"],
            &[
                ("jobGroup", json!({ "minimum": i32::MIN, "maximum": i32::MAX })),
                ("jobId", json!({ "minimum": i32::MIN, "maximum": i32::MAX })),
                ("type", json!({ "minimum": 1, "maximum": 9 })),
            ],
        ),
        "TriggerInput": constrain(
            props(&[("executorParam", "string?"), ("addressList", "string?")]),
            &[],
            &[
                ("executorParam", json!({
                    "maxLength": crate::jobs::MAX_PARAM_CHARS,
                    "description": "The run's param; absent or null: the job's own param, \"\": an empty one"
                })),
                ("addressList", json!({
                    "maxLength": crate::console::MAX_ADDRESS_LIST_CHARS,
                    "description": "Comma-separated http(s):// executor addresses (each at most 255 characters) instead of the group's; a normal user may name only executors of the job's group"
                })),
            ],
        ),
        "Glue": props(&[
            ("jobId", "integer"), ("glueType", "string"), ("glueSource", "string?"),
            ("glueRemark", "string?"), ("glueUpdatetime", "string?"),
            ("history", "string[]"),
        ]),
        "GlueInput": constrain(
            props(&[("glueSource", "string"), ("glueRemark", "string")]),
            &["glueSource", "glueRemark"],
            &[("glueRemark", json!({ "minLength": 4, "maxLength": 100, "pattern": r"^\s*\S[\s\S]{2,}\S\s*$" }))],
        ),
        "UserInput": constrain(
            props(&[
                ("username", "string"), ("password", "string?"), ("role", "integer"),
                ("permission", "integer[]"),
            ]),
            &["username", "role"],
            &[
                ("username", json!({ "pattern": "^[A-Za-z0-9_.@-]{4,20}$" })),
                ("password", password()),
                ("role", json!({ "enum": [0, 1] })),
                ("permission", json!({ "items": { "type": "integer", "minimum": 1, "maximum": i32::MAX } })),
            ],
        ),
        "ApiKeyInput": constrain(
            props(&[
                ("name", "string"), ("role", "integer"), ("permission", "integer[]"),
                ("expiresInDays", "integer"),
            ]),
            &["name", "expiresInDays"],
            &[
                ("name", json!({ "minLength": 1, "maxLength": crate::console::api_keys::MAX_NAME, "pattern": r"\S" })),
                ("role", json!({ "enum": [0, 1] })),
                ("permission", json!({ "items": { "type": "integer", "minimum": 1, "maximum": i32::MAX } })),
                ("expiresInDays", json!({ "minimum": 1, "maximum": crate::console::api_keys::MAX_DAYS })),
            ],
        ),
        "WorkflowInput": constrain(
            props(&[
                ("jobGroup", "integer"), ("name", "string"), ("description", "string?"),
                ("definition", "object"), ("version", "integer?"), ("scheduleType", "string?"),
                ("scheduleConf", "string?"), ("misfireStrategy", "string?"),
                ("enabled", "boolean"), ("concurrency", "string?"), ("maxQueued", "integer?"),
            ]),
            &["jobGroup", "name", "definition"],
            &[
                ("scheduleType", json!({ "enum": ["NONE", "CRON", "FIX_RATE", null] })),
                ("misfireStrategy", json!({ "enum": ["DO_NOTHING", "FIRE_ONCE_NOW", null] })),
                ("concurrency", json!({ "enum": ["PARALLEL", "SKIP", "QUEUE", null] })),
                ("maxQueued", json!({ "minimum": 1, "maximum": crate::console::workflows::MAX_QUEUED })),
                ("scheduleConf", json!({ "maxLength": 128 })),
                ("name", json!({ "minLength": 1, "maxLength": crate::console::workflows::MAX_NAME })),
                ("definition", json!({ "$ref": "#/components/schemas/WorkflowDefinition" })),
            ],
        ),
        "WorkflowDefinition": json!({
            "type": "object",
            "description": format!(
                "A workflow's DAG: nodes (at most {}) and the edges between them (at most {})",
                crate::workflow::model::MAX_NODES,
                crate::workflow::model::MAX_EDGES
            ),
            "properties": {
                "nodes": { "type": "array", "items": { "$ref": "#/components/schemas/WorkflowNode" } },
                "edges": { "type": "array", "items": { "$ref": "#/components/schemas/WorkflowEdge" } },
            },
        }),
        "WorkflowNode": json!({
            "type": "object",
            "description": "One node. JOB runs `jobId`; DECISION evaluates `expression` on the run's context (its TRUE and FALSE edges pick the branch); WORKFLOW runs `workflowId` to completion as a nested run",
            "required": ["key", "type"],
            "properties": {
                "key": { "type": "string", "description": "Unique in the workflow: 1 to 64 letters, digits, `_`, `-` or `.`; edges name nodes by it" },
                "name": { "type": ["string", "null"], "description": "Shown in the console (the key when absent)" },
                "type": { "type": "string", "enum": ["JOB", "DECISION", "WORKFLOW"] },
                "jobId": { "type": ["integer", "null"], "minimum": i32::MIN, "maximum": i32::MAX, "description": "A JOB node's job (required for JOB; null is the same as absent)" },
                "expression": { "type": ["string", "null"], "description": "A DECISION node's expression (required for DECISION): comparisons, &&, ||, !, paths such as stats.rows or shards[0]" },
                "workflowId": { "type": ["integer", "null"], "minimum": i32::MIN, "maximum": i32::MAX, "description": "A WORKFLOW node's workflow (required for WORKFLOW; null is the same as absent)" },
                "triggerRule": { "type": "string", "enum": ["ALL_SUCCESS", "ALL_DONE", "ONE_FAILED", "NONE_FAILED", "ONE_SUCCESS"], "description": "When the node runs, given its inputs (ALL_SUCCESS by default)" },
                "disabled": { "type": "boolean", "description": "Treated as succeeded without running" },
                "allowFailure": { "type": "boolean", "description": "Its failure counts as success downstream and does not fail the run" },
                "param": { "type": ["string", "null"], "description": "The param its job gets (the job's own when absent); `${path}` takes the run's context's value there, and a path the context does not have fails the node" },
            },
        }),
        "WorkflowEdge": json!({
            "type": "object",
            "required": ["from", "to"],
            "properties": {
                "from": { "type": "string", "description": "Upstream node's key" },
                "to": { "type": "string", "description": "Downstream node's key" },
                "condition": { "type": "string", "enum": ["ALWAYS", "ON_SUCCESS", "ON_FAILURE", "TRUE", "FALSE"], "description": "When the edge is taken (ALWAYS by default; TRUE and FALSE only from a DECISION)" },
            },
        }),
        // validation reports a bad name or DAG as problems (200), not as a refused request
        "WorkflowDraft": constrain(
            props(&[
                ("jobGroup", "integer"), ("name", "string"), ("description", "string?"),
                ("definition", "object"), ("version", "integer?"),
            ]),
            &["jobGroup", "name", "definition"],
            &[("definition", json!({ "$ref": "#/components/schemas/WorkflowDefinition" }))],
        ),
        "Workflow": constrain(
            props(&[
                ("id", "integer"), ("jobGroup", "integer"), ("name", "string"),
                ("description", "string?"), ("author", "string"), ("version", "integer"),
                ("definition", "object"), ("createdAt", "string?"), ("updatedAt", "string?"),
                ("scheduleType", "string"), ("scheduleConf", "string?"), ("misfireStrategy", "string"),
                ("enabled", "boolean"), ("triggerNextTime", "string?"), ("concurrency", "string"),
                ("maxQueued", "integer"),
            ]),
            &[],
            &[("definition", json!({ "$ref": "#/components/schemas/WorkflowDefinition" }))],
        ),
        "Validation": props(&[("valid", "boolean"), ("problems", "array")]),
        "RunInput": constrain(
            json!({ "type": "object", "properties": {
                "workflowId": { "type": "integer" },
                "params": { "type": ["object", "string", "null"] },
            } }),
            &["workflowId"],
            &[
                ("workflowId", json!({ "minimum": 1, "maximum": i32::MAX })),
                ("params", json!({ "maxLength": crate::console::workflow_runs::MAX_PARAMS })),
            ],
        ),
        "RerunInput": props(&[("from", "string?")]),
        "MarkInput": constrain(props(&[("node", "string")]), &["node"], &[]),
        "WorkflowRun": props(&[
            ("id", "integer"), ("workflowId", "integer"), ("workflowName", "string?"), ("version", "integer"),
            ("jobGroup", "integer"), ("status", "string"), ("triggerType", "string"),
            ("params", "string?"), ("context", "object"), ("parentNodeRun", "integer?"),
            ("startTime", "string?"), ("endTime", "string?"), ("message", "string?"),
            ("nodes", "array"),
        ]),
        "ApiKey": props(&[
            ("id", "integer"), ("name", "string"), ("prefix", "string"), ("userId", "integer"),
            ("role", "integer"), ("permission", "integer[]"), ("createdAt", "string?"),
            ("expiresAt", "string?"),
        ]),
        "CreatedApiKey": props(&[
            ("key", "string"), ("id", "integer"), ("name", "string"), ("prefix", "string"),
            ("userId", "integer"), ("role", "integer"), ("permission", "integer[]"),
            ("createdAt", "string?"), ("expiresAt", "string?"),
        ]),
        "User": props(&[
            ("id", "integer"), ("username", "string"), ("role", "integer"),
            ("permission", "integer[]"), ("sessionsEnded", "integer"), ("apiKeysEnded", "integer"),
        ]),
        "Ended": props(&[("sessionsEnded", "integer"), ("apiKeysEnded", "integer")]),
        "Me": props(&[
            ("id", "integer"), ("username", "string"), ("role", "integer"),
            ("permission", "integer[]"), ("scriptsEnabled", "boolean"),
        ]),
        "LoginInput": constrain(
            props(&[("username", "string"), ("password", "string")]),
            &["username", "password"],
            &[],
        ),
        "Login": props(&[("token", "string"), ("expiresAt", "integer")]),
        "PasswordInput": constrain(
            props(&[("oldPassword", "string"), ("password", "string"), ("endApiKeys", "boolean")]),
            &["oldPassword", "password"],
            &[("password", password())],
        ),
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
        ("post", "/v1/auth/password") => (Some("PasswordInput"), &[], r("Ended")),
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
        ("post", "/v1/jobs") => (Some("NewJobInput"), &[], r("Job")),
        ("put", "/v1/jobs/{id}") => (Some("JobInput"), &[], r("Job")),
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
        ("get", "/v1/api-keys") => (None, &[], page("ApiKey")),
        ("post", "/v1/api-keys") => (Some("ApiKeyInput"), &[], r("CreatedApiKey")),
        ("get", "/v1/users") => (None, &["username", "role", "offset", "limit"], page("User")),
        ("post" | "put", p) if p.starts_with("/v1/users") => (Some("UserInput"), &[], r("User")),
        ("get", "/v1/audit") => (
            None,
            &[
                "username",
                "action",
                "targetType",
                "targetId",
                "from",
                "to",
                "offset",
                "limit",
            ],
            page("AuditEntry"),
        ),
        ("get", "/v1/workflows") => (
            None,
            &["jobGroup", "name", "offset", "limit"],
            page("Workflow"),
        ),
        ("post", "/v1/workflows") | ("put", "/v1/workflows/{id}") => {
            (Some("WorkflowInput"), &[], r("Workflow"))
        }
        ("post", "/v1/workflows/validate") => (Some("WorkflowDraft"), &[], r("Validation")),
        ("get", "/v1/workflows/{id}") => (None, &["version"], r("Workflow")),
        ("post", "/v1/workflows/{id}/start" | "/v1/workflows/{id}/stop") => {
            (None, &[], r("Workflow"))
        }
        ("get", "/v1/workflow-runs") => (
            None,
            &["workflowId", "jobGroup", "status", "offset", "limit"],
            page("WorkflowRun"),
        ),
        ("post", "/v1/workflow-runs") => (Some("RunInput"), &[], r("WorkflowRun")),
        ("get", "/v1/workflow-runs/{id}") | ("post", "/v1/workflow-runs/{id}/stop") => {
            (None, &[], r("WorkflowRun"))
        }
        ("post", "/v1/workflow-runs/{id}/rerun") => (Some("RerunInput"), &[], r("WorkflowRun")),
        ("post", "/v1/workflow-runs/{id}/mark") => (Some("MarkInput"), &[], r("WorkflowRun")),
        ("get", "/v1/dashboard") => (None, &[], r("Dashboard")),
        ("get", "/v1/dashboard/chart") => (None, &["from", "to"], r("Chart")),
        _ => (None, &[], json!(null)),
    }
}

/// The schema of a query parameter, as the server parses and checks it.
fn query_schema(name: &str) -> Value {
    let int32 = |min: i64| json!({ "type": "integer", "minimum": min, "maximum": i32::MAX });
    match name {
        "offset" => json!({ "type": "integer", "minimum": 0, "maximum": i64::MAX }),
        "limit" => json!({ "type": "integer", "minimum": 1,
                           "maximum": crate::console::MAX_LIMIT, "default": crate::console::DEFAULT_LIMIT }),
        // 0 or less: every group / job
        "jobGroup" | "jobId" | "workflowId" => int32(i32::MIN as i64),
        "fromLine" | "version" => int32(1),
        "count" => json!({ "type": "integer", "minimum": 1,
                           "maximum": crate::console::jobs::MAX_NEXT_TIMES }),
        "triggerStatus" => json!({ "type": "integer", "enum": [-1, 0, 1] }),
        // 0 users, 1 administrators, anything else both
        "role" => json!({ "type": "integer", "minimum": i16::MIN, "maximum": i16::MAX }),
        "status" => json!({ "type": "string", "enum": ["all", "success", "failed", "running"] }),
        "scheduleType" => json!({ "type": "string", "enum": ["CRON", "FIX_RATE"] }),
        // RFC 3339, epoch ms, or `yyyy-MM-dd[ HH:mm:ss]` in the center's zone
        // (empty: no bound)
        "from" | "to" => json!({ "type": "string", "anyOf": [
            { "maxLength": 0 },
            { "format": "date-time" },
            { "pattern": "^-?[0-9]{1,15}$" },
            { "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])( ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9])?$" },
        ] }),
        _ => json!({ "type": "string" }),
    }
}

/// The whole document.
pub(crate) fn document() -> Value {
    let mut paths = Map::new();
    for (method, path, summary) in ROUTES {
        let (body, query, answer) = shape(method, path);
        let mut params: Vec<Value> = query
            .iter()
            .map(|q| {
                // a workflow run's status is its own set
                let schema = if *q == "status" && path.starts_with("/v1/workflow-runs") {
                    json!({ "type": "string", "enum": ["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"] })
                } else {
                    query_schema(q)
                };
                json!({ "name": q, "in": "query", "required": *q == "scheduleType", "schema": schema })
            })
            .collect();
        if path.contains("{id}") {
            // run ids are 64-bit, every other id a positive 32-bit number
            let max = if path.starts_with("/v1/logs") || path.starts_with("/v1/workflow-runs") {
                i64::MAX
            } else {
                i32::MAX as i64
            };
            params.push(json!({ "name": "id", "in": "path", "required": true,
                "schema": { "type": "integer", "minimum": 1, "maximum": max } }));
        }
        let created = *method == "post"
            && matches!(
                *path,
                "/v1/groups"
                    | "/v1/jobs"
                    | "/v1/users"
                    | "/v1/api-keys"
                    | "/v1/workflows"
                    | "/v1/workflow-runs"
            );
        let ok = if answer.is_null() {
            json!({ "204": { "description": "Done" } })
        } else if created {
            json!({ "201": { "description": "Created", "content": { "application/json": { "schema": answer } } } })
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
        if body.is_some() {
            let mut e = err.clone();
            e["description"] = json!("The request body is larger than the console takes (4 MiB)");
            responses.insert("413".into(), e);
        }
        let mut op = json!({ "summary": summary, "parameters": params, "responses": responses });
        if *path == "/v1/auth/login" {
            let mut e = err.clone();
            e["description"] = json!(
                "Too many failed logins from this client (or for this user name from it), or too \
                 many logins being checked at once; retry after `Retry-After` seconds"
            );
            op["responses"]["429"] = e;
        }
        if let Some(b) = body {
            // a trigger's body (param, addresses) and a re-run's (`from`) are optional
            let required = !matches!(
                *path,
                "/v1/jobs/{id}/trigger" | "/v1/workflow-runs/{id}/rerun"
            );
            op["requestBody"] = json!({ "required": required, "content": { "application/json": {
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
