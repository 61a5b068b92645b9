//! The live-agent limit as HCP Terraform counts it (unknown agents count; errored and exited
//! ones do not, and are pruned after the retention period), its cost whatever the limit, and
//! what the gateway checks: JSON errors for what axum refuses, agent names, token descriptions,
//! and that only the token that registered an agent reports for it. Time moves through the
//! domain functions' clock (`register_at`, `report_at`, `sweep_at`) on a second state, as the
//! broker's tests move `scheduled_run_at`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hangar::agents::agents;
use hangar::auth::{AgentGrant, Principal};
use hangar::config::Config;
use hangar::state::AppState;
use hangar_tests::builders::{acme_on_dynamodb, agent_count, agent_token, new_pool, pool, pool_and_token, token_body};
use hangar_tests::{Reply, TestApp};
use serde_json::Value;

use super::agent_pools::{register, registered, report, REGISTER};

/// One live agent, unknown after 60 s of silence and errored 60 s later, kept 300 s once ended.
fn one_agent() -> Config {
    Config {
        max_agents: 1,
        agent_ping_timeout: Duration::from_secs(60),
        agent_errored_after: Duration::from_secs(60),
        agent_retention: Duration::from_secs(300),
        ..Config::default()
    }
}

/// `acme` with a pool and an agent token: (app, owners token, pool id, agent token secret).
async fn pool_with_token(config: Config) -> (TestApp, String, String, String) {
    let (app, owners) = TestApp::spawn_with_organization(config, "acme").await;
    let (pool_id, secret) = pool_and_token(&app, &owners).await;
    (app, owners, pool_id, secret)
}

async fn shown(app: &TestApp, owners: &str, agent_id: &str) -> Reply {
    app.get(&format!("/api/v2/agents/{agent_id}"), owners).await
}

async fn status(app: &TestApp, owners: &str, agent_id: &str) -> Value {
    let reply = shown(app, owners, agent_id).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.body["data"]["attributes"]["status"].clone()
}

/// The grant an agent token's secret carries, as the gateway resolves it.
pub(super) async fn grant(state: &AppState, secret: &str) -> AgentGrant {
    match hangar::auth::resolve(state.store.as_ref(), secret).await.expect("a read") {
        Some(Principal::Agent(grant)) => grant,
        other => panic!("an agent token, not {other:?}"),
    }
}

fn later(seconds: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(seconds)
}

fn is_conflict(result: &Result<agents::Agent, hangar::agents::AgentsError>) -> bool {
    matches!(result, Err(hangar::agents::AgentsError::Conflict(_)))
}

#[tokio::test]
async fn an_unknown_agent_still_counts_and_resumes_when_it_reports_again() {
    let config = Config { agent_ping_timeout: Duration::from_secs(1), ..one_agent() };
    let (app, owners, pool_id, secret) = pool_with_token(config).await;
    let first = registered(&app, &secret, "first").await;
    tokio::time::sleep(Duration::from_millis(1300)).await;

    assert_eq!(status(&app, &owners, &first).await, "unknown");
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 1, "an unknown agent is counted");
    let refused = register(&app, &secret, "second").await;
    assert_eq!(refused.status, 409, "the unknown agent still holds the one slot: {:?}", refused.body);

    let resumed = report(&app, &secret, &first, "idle").await;
    assert_eq!(resumed.status, 200, "an unknown agent that reports again resumes: {:?}", resumed.body);
    assert_eq!(status(&app, &owners, &first).await, "idle");
    assert_eq!(register(&app, &secret, "second").await.status, 409, "and keeps its slot");
}

#[tokio::test]
async fn an_agent_silent_past_the_errored_window_gives_its_slot_to_the_next_registration() {
    let (app, owners, pool_id, secret) = pool_with_token(one_agent()).await;
    let first = registered(&app, &secret, "first").await;
    let state = app.second_state().await;
    let grant = grant(&state, &secret).await;

    let unknown = agents::register_at(&state, &grant, Some("early".into()), None, later(90)).await;
    assert!(is_conflict(&unknown), "unknown at 90 s, still counted: {unknown:?}");
    let second = agents::register_at(&state, &grant, Some("second".into()), None, later(130)).await;
    let second = second.expect("errored at 120 s: its slot is free");

    assert_eq!(status(&app, &owners, &first).await, "errored");
    assert_eq!(agent_count(&app, &owners, &pool_id).await, 1, "only the new agent counts");
    let late = agents::report_at(&state, &grant, &first, "idle", later(131)).await;
    assert!(is_conflict(&late), "an errored agent must register again: {late:?}");
    assert_eq!(status(&app, &owners, &second.id).await, "idle");
}

#[tokio::test]
async fn the_scheduled_job_marks_silent_agents_errored_and_prunes_ended_ones_after_retention() {
    let config = Config { max_agents: 2, ..one_agent() };
    let (app, owners, _, secret) = pool_with_token(config).await;
    let silent = registered(&app, &secret, "silent").await;
    let leaving = registered(&app, &secret, "leaving").await;
    assert_eq!(report(&app, &secret, &leaving, "exited").await.status, 200);
    let state = app.second_state().await;

    let early = agents::sweep_at(&state, later(90)).await.expect("a sweep");
    assert_eq!((early.errored, early.pruned), (0, 0), "nothing is due at 90 s");
    assert_eq!(status(&app, &owners, &silent).await, "idle");

    let swept = agents::sweep_at(&state, later(130)).await.expect("a sweep");
    assert_eq!((swept.errored, swept.pruned), (1, 0));
    assert_eq!(status(&app, &owners, &silent).await, "errored", "marked errored by the job");
    registered(&app, &secret, "replacement").await;
    registered(&app, &secret, "another").await;
    assert_eq!(register(&app, &secret, "third").await.status, 409, "two live agents, the limit");

    let pruned = agents::sweep_at(&state, later(440)).await.expect("a sweep");
    assert_eq!(pruned.pruned, 2, "the exited and the errored agent, 300 s after they ended");
    assert_eq!(shown(&app, &owners, &silent).await.status, 404);
    assert_eq!(shown(&app, &owners, &leaving).await.status, 404);
}

#[tokio::test]
async fn only_the_token_that_registered_an_agent_reports_for_it() {
    let config = Config { max_agents: 2, ..one_agent() };
    let (app, owners, pool_id, secret) = pool_with_token(config).await;
    let (_, other) = agent_token(&app, &owners, &pool_id).await;
    let agent = registered(&app, &secret, "runner").await;

    let foreign = report(&app, &other, &agent, "busy").await;
    assert_eq!(foreign.status, 404, "another token of the same pool: {:?}", foreign.body);
    assert_eq!(foreign.body["errors"][0]["status"], "404");
    assert_eq!(status(&app, &owners, &agent).await, "idle", "the refused report changed nothing");
    assert_eq!(report(&app, &secret, &agent, "busy").await.status, 200);
}

#[tokio::test]
async fn agent_names_and_token_descriptions_are_checked() {
    let (app, owners, pool_id, secret) = pool_with_token(Config { max_agents: 2, ..one_agent() }).await;
    let long = "a".repeat(agents::MAX_NAME_CHARS + 1);
    for (name, why) in [
        (long.as_str(), "too long"),
        ("runner\n1", "a control character"),
        ("runner\u{202E}1", "a bidi override"),
        ("runner\u{2066}1", "a bidi isolate"),
    ] {
        let reply = register(&app, &secret, name).await;
        assert_eq!(reply.status, 422, "{why}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/name", "{why}");
    }
    registered(&app, &secret, &"a".repeat(agents::MAX_NAME_CHARS)).await;

    let path = format!("/api/v2/agent-pools/{pool_id}/authentication-tokens");
    let description = "d".repeat(hangar::agents::tokens::MAX_DESCRIPTION_CHARS + 1);
    let reply = app.post(&path, &owners, token_body(&description)).await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    assert_eq!(reply.pointer(), "/data/attributes/description");
}

#[tokio::test]
async fn the_gateway_answers_bodies_it_refuses_with_json_api_errors() {
    let (app, _, _, secret) = pool_with_token(one_agent()).await;
    let send = |content_type: &'static str, body: Vec<u8>| {
        let request = app
            .client
            .post(format!("{}{REGISTER}", app.url))
            .header("Content-Type", content_type)
            .bearer_auth(&secret)
            .body(body);
        async move { Reply::read(request.send().await.expect("the request reaches dev-server")).await }
    };
    for (reply, want) in [
        (send("application/json", b"{not json".to_vec()).await, 400),
        (send("text/plain", b"{}".to_vec()).await, 415),
        (send("application/json", vec![b' '; 3 * 1024 * 1024]).await, 413),
    ] {
        assert_eq!(reply.status, want, "{:?}", reply.body);
        assert_eq!(reply.headers["content-type"], "application/vnd.api+json", "{want}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["status"], want.to_string(), "{want}: {:?}", reply.body);
    }
}

#[tokio::test]
async fn exiting_and_deleting_an_agent_cost_the_same_under_a_limit_of_a_million() {
    let config = Config { max_agents: 1_000_000, ..one_agent() };
    let (app, owners, pool_id, secret) = pool_with_token(config).await;
    let work = async {
        let agent = registered(&app, &secret, "runner").await;
        assert_eq!(report(&app, &secret, &agent, "exited").await.status, 200);
        assert_eq!(app.delete(&format!("/api/v2/agents/{agent}"), &owners).await.status, 204);
        registered(&app, &secret, "another").await;
        assert_eq!(app.delete(&format!("/api/v2/agent-pools/{pool_id}"), &owners).await.status, 204);
    };
    tokio::time::timeout(Duration::from_secs(10), work).await.expect("no step scans the limit");
}

#[tokio::test]
async fn a_pool_delete_that_raced_a_registration_leaves_no_orphan_agent() {
    let (app, owners) = TestApp::spawn_with_organization(Config { max_agents: 1000, ..one_agent() }, "acme").await;
    let state = app.second_state().await;
    let admin = Principal::SiteAdmin;
    for round in 0..25 {
        let pool_id = new_pool(&app, &owners, "acme", pool(&format!("pool-{round}"))).await;
        let grant = grant(&state, &agent_token(&app, &owners, &pool_id).await.1).await;
        let register = |n: usize| agents::register_at(&state, &grant, Some(format!("runner-{n}")), None, Utc::now());
        let (deleted, first, second, third) = tokio::join!(
            hangar::agents::pools::delete(state.store.as_ref(), &admin, &pool_id),
            register(1),
            register(2),
            register(3)
        );
        if deleted.is_err() {
            hangar::agents::pools::delete(state.store.as_ref(), &admin, &pool_id).await.expect("the retried delete");
        }
        for agent in [first, second, third].into_iter().flatten() {
            let found = shown(&app, &owners, &agent.id).await;
            assert_eq!(found.status, 404, "round {round}: agent {} outlived its pool", agent.id);
        }
    }
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn the_live_agent_counter_and_its_indexes_work_on_dynamodb() {
    let (app, owners) = acme_on_dynamodb().await;
    let (pool_id, secret) = pool_and_token(&app, &owners).await;
    let first = registered(&app, &secret, "first").await;
    assert_eq!(register(&app, &secret, "second").await.status, 409, "the default limit is one");
    let state = app.second_state().await;
    let grant = grant(&state, &secret).await;

    // Past the default ping timeout (120 s) and errored window (2 hours).
    let second = agents::register_at(&state, &grant, Some("second".into()), None, later(7400)).await;
    let second = second.expect("the errored agent's slot is given to the registration");
    assert_eq!(status(&app, &owners, &first).await, "errored");
    assert_eq!(report(&app, &secret, &second.id, "exited").await.status, 200);
    let third = registered(&app, &secret, "third").await;

    let swept = agents::sweep_at(&state, later(7400 + 86_400 + 10)).await.expect("a sweep");
    assert_eq!(swept.pruned, 2, "{swept:?}");
    assert_eq!(shown(&app, &owners, &first).await.status, 404);
    assert_eq!(app.delete(&format!("/api/v2/agent-pools/{pool_id}"), &owners).await.status, 204);
    assert_eq!(shown(&app, &owners, &third).await.status, 404);
    let (_, secret) = pool_and_token(&app, &owners).await;
    registered(&app, &secret, "after").await;
    app.stop().await;
}
