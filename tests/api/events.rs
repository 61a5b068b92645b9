//! The sample events of `events/` run as `cargo lambda invoke` runs them: every file, in
//! filename order, through the function its name starts with, all on one state (so each sample
//! finds what the earlier ones created). HTTP samples go through the function's router exactly
//! as `lambda_http::run` hands them over; their statuses, and the event functions' summaries,
//! must be those `events/expected.json` declares.

use std::collections::{BTreeMap, BTreeSet};

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::s3::S3Event;
use hangar::app::routers;
use hangar::config::Config;
use hangar::state::AppState;
use http_body_util::BodyExt;
use lambda_http::request::RequestContext;
use lambda_http::RequestExt;
use serde_json::Value;
use tower::ServiceExt;

const EVENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../events");
const EXPECTED: &str = "expected.json";

fn router(function: &str, state: &AppState) -> Option<axum::Router> {
    let router = match function {
        "accounts" => routers::accounts,
        "state-versions" => routers::state_versions,
        "runs" => routers::runs,
        "registry-api" => routers::registry_api,
        "registry-protocol" => routers::registry_protocol,
        "agent-pools" => routers::agent_pools,
        "agent-gateway" => routers::agent_gateway,
        "credential-broker" => routers::credential_broker,
        "web" => routers::web,
        _ => return None,
    };
    Some(router(state.clone()))
}

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{EVENTS}/{name}")).unwrap_or_else(|e| panic!("events/{name}: {e}"))
}

/// The sample files: `<function>.<NN>-<what>.json`, in the order they run.
fn samples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(EVENTS)
        .expect("events/")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json") && name != EXPECTED)
        .collect();
    names.sort();
    names
}

/// What API Gateway's HTTP API (payload 2.0) always sends, so the samples stay realistic.
fn shape_problems(event: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let present = [
        "/version",
        "/routeKey",
        "/rawPath",
        "/rawQueryString",
        "/isBase64Encoded",
        "/headers/host",
        "/headers/user-agent",
        "/headers/x-forwarded-for",
        "/requestContext/accountId",
        "/requestContext/apiId",
        "/requestContext/domainName",
        "/requestContext/http/method",
        "/requestContext/http/path",
        "/requestContext/http/protocol",
        "/requestContext/http/sourceIp",
        "/requestContext/http/userAgent",
        "/requestContext/requestId",
        "/requestContext/routeKey",
        "/requestContext/time",
        "/requestContext/timeEpoch",
    ];
    problems.extend(present.iter().filter(|pointer| event.pointer(pointer).is_none()).map(|p| format!("no {p}")));
    let equal = [("/version", "2.0"), ("/requestContext/stage", "$default"), ("/headers/x-forwarded-proto", "https")];
    for (pointer, value) in equal {
        if event.pointer(pointer) != Some(&Value::from(value)) {
            problems.push(format!("{pointer} is not {value:?}"));
        }
    }
    if event.pointer("/rawPath") != event.pointer("/requestContext/http/path") {
        problems.push("rawPath differs from requestContext.http.path".into());
    }
    if event.pointer("/routeKey") != event.pointer("/requestContext/routeKey") {
        problems.push("routeKey differs from requestContext.routeKey".into());
    }
    let headers = event.get("headers").and_then(Value::as_object);
    let credentials = headers.is_some_and(|h| h.contains_key("authorization") || h.contains_key("x-vault-token"));
    let discovery = event.pointer("/rawPath") == Some(&Value::from("/.well-known/terraform.json"));
    // The console's pages for someone signed out (its session is a cookie, not a header).
    let console = event.pointer("/rawPath").and_then(Value::as_str).is_some_and(|path| path.starts_with("/app"));
    if !credentials && !discovery && !console {
        problems.push("no authorization (or x-vault-token) header".into());
    }
    if let Some(body) = event.get("body").and_then(Value::as_str) {
        if headers.is_none_or(|h| !h.contains_key("content-type")) {
            problems.push("a body without a content-type header".into());
        }
        if serde_json::from_str::<Value>(body).is_err() {
            problems.push("body is not a JSON string".into());
        }
    }
    problems
}

#[tokio::test]
async fn every_sample_event_runs_in_order_and_answers_as_expected() {
    let data_dir = tempfile::tempdir().unwrap();
    let config = Config {
        admin_token: Some("hangar-sample-admin-token".into()),
        root_service_token: Some("hangar-sample-root-token".into()),
        data_dir: data_dir.path().to_path_buf(),
        public_url: Some("https://abc123.execute-api.us-east-1.amazonaws.com".into()),
        ..Config::default()
    };
    let state = AppState::build(config, false).await.unwrap();
    hangar::bootstrap::install_tokens(&state, hangar::bootstrap::Unconfigured::Leave).await.unwrap();

    let expected: BTreeMap<String, Value> = serde_json::from_str(&read(EXPECTED)).expect("events/expected.json");
    let samples = samples();
    let files: BTreeSet<&str> = samples.iter().map(String::as_str).collect();
    let declared: BTreeSet<&str> = expected.keys().map(String::as_str).collect();
    assert_eq!(files.difference(&declared).collect::<Vec<_>>(), Vec::<&&str>::new(), "samples with no expectation");
    assert_eq!(declared.difference(&files).collect::<Vec<_>>(), Vec::<&&str>::new(), "expectations with no sample");
    // Every function (hangar::lambda::FUNCTIONS, template.yaml's) has at least one sample.
    for function in hangar::lambda::FUNCTIONS {
        assert!(samples.iter().any(|name| name.starts_with(&format!("{function}."))), "no sample for {function}");
    }

    let mut failures = Vec::new();
    for name in &samples {
        let text = read(name);
        let want = &expected[name.as_str()];
        let function = name.split('.').next().unwrap();
        match function {
            "registry-ingest" => {
                let event: S3Event = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                let summary = hangar::jobs::ingest(&state, event).await.unwrap_or_else(|e| panic!("{name}: {e}"));
                let got = serde_json::to_value(summary).unwrap();
                if &got != want {
                    failures.push(format!("{name}: answered {got}, expected {want}"));
                }
            }
            "key-rotation" | "registry-sync" => {
                // The handlers take any payload; the sample must still be a valid EventBridge event.
                let _: EventBridgeEvent = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                let event: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                let got = match function {
                    "key-rotation" => {
                        hangar::jobs::rotate(&state, event).await.map(|s| serde_json::to_value(s).unwrap())
                    }
                    _ => hangar::jobs::sync(&state, event).await.map(|s| serde_json::to_value(s).unwrap()),
                };
                let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                if &got != want {
                    failures.push(format!("{name}: answered {got}, expected {want}"));
                }
            }
            _ => {
                let Some(router) = router(function, &state) else {
                    failures.push(format!("{name}: `{function}` is not a function"));
                    continue;
                };
                let event: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                let problems = shape_problems(&event);
                if !problems.is_empty() {
                    failures.push(format!("{name}: {}", problems.join("; ")));
                }
                let request = lambda_http::request::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
                if !matches!(request.request_context_ref(), Some(RequestContext::ApiGatewayV2(_))) {
                    failures.push(format!("{name}: not read as an HTTP API (payload 2.0) event"));
                }
                let response = router.oneshot(request).await.unwrap();
                let status = response.status().as_u16();
                let body = response.into_body().collect().await.unwrap().to_bytes();
                if want.as_u64() != Some(u64::from(status)) {
                    let body = String::from_utf8_lossy(&body);
                    failures.push(format!("{name}: answered {status}, expected {want}: {body}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
