//! The small builders the black-box tests share, one set for every family: JSON:API request
//! bodies, readers of a reply, and what a test starts from (the organization `acme`, workspaces,
//! agent pools and their tokens, registry modules and their versions). Each builder that creates
//! something asserts that it was created and returns what the test goes on with.

use hangar::config::Config;
use serde_json::{json, Value};

use crate::{Reply, TestApp};

// ----- request bodies -----

/// The body that creates a workspace `name`.
pub fn workspace(name: &str) -> Value {
    json!({"data": {"type": "workspaces", "attributes": {"name": name}}})
}

/// The body that creates an agent pool `name`, scoped to its whole organization.
pub fn pool(name: &str) -> Value {
    json!({"data": {"type": "agent-pools", "attributes": {"name": name}}})
}

/// Relationship data naming resources of one `kind` by id.
pub fn refs(kind: &str, ids: &[&str]) -> Value {
    Value::Array(ids.iter().map(|id| json!({"id": id, "type": kind})).collect())
}

/// The body of a pool `name` only the listed workspaces may use.
pub fn restricted_pool(name: &str, allowed: &[&str]) -> Value {
    json!({"data": {
        "type": "agent-pools",
        "attributes": {"name": name, "organization-scoped": false},
        "relationships": {"allowed-workspaces": {"data": refs("workspaces", allowed)}},
    }})
}

/// The body that creates an agent token described as `description`.
pub fn token_body(description: &str) -> Value {
    json!({"data": {"type": "authentication-tokens", "attributes": {"description": description}}})
}

/// The body that creates a module `name`/`provider` (private, the registry left to its default).
pub fn module(name: &str, provider: &str) -> Value {
    json!({"data": {"type": "registry-modules", "attributes": {"name": name, "provider": provider}}})
}

/// The same, naming the private registry.
pub fn private_module(name: &str, provider: &str) -> Value {
    json!({"data": {"type": "registry-modules", "attributes": {
        "name": name, "provider": provider, "registry-name": "private"}}})
}

/// The body that curates the public registry's module `namespace/name/provider`.
pub fn public_module(namespace: &str, name: &str, provider: &str) -> Value {
    json!({"data": {"type": "registry-modules", "attributes": {
        "name": name, "provider": provider, "namespace": namespace, "registry-name": "public"}}})
}

/// The body that creates module version `v`.
pub fn version(v: &str) -> Value {
    json!({"data": {"type": "registry-module-versions", "attributes": {"version": v}}})
}

/// The path of `org`'s private module `name`/`provider`.
pub fn module_path(org: &str, name: &str, provider: &str) -> String {
    format!("/api/v2/organizations/{org}/registry-modules/private/{org}/{name}/{provider}")
}

// ----- reading a reply -----

/// The id of the resource a reply carries.
pub fn id(reply: &Reply) -> String {
    reply.body["data"]["id"].as_str().unwrap_or_else(|| panic!("an id in {:?}", reply.body)).to_owned()
}

/// The `detail` of the first error ("" when there is none).
pub fn detail(reply: &Reply) -> String {
    reply.body["errors"][0]["detail"].as_str().unwrap_or("").to_owned()
}

/// The `name` attribute of every resource of a list.
pub fn names(reply: &Reply) -> Vec<String> {
    let list = reply.body["data"].as_array().unwrap_or_else(|| panic!("a list in {:?}", reply.body));
    list.iter().map(|p| p["attributes"]["name"].as_str().unwrap_or("").to_owned()).collect()
}

// ----- what a test starts from -----

/// dev-server with an organization `acme`; returns it and the owners team's token.
pub async fn acme() -> (TestApp, String) {
    acme_with(Config::default()).await
}

/// The same, started with `config`.
pub async fn acme_with(config: Config) -> (TestApp, String) {
    TestApp::spawn_with_organization(config, "acme").await
}

/// Room for several agent pools (5) and live agents (3).
pub fn roomy() -> Config {
    Config { max_agent_pools: 5, max_agents: 3, ..Config::default() }
}

/// Creates a workspace `name` in `org` and returns its id.
pub async fn new_workspace(app: &TestApp, token: &str, org: &str, name: &str) -> String {
    let reply = app.post(&format!("/api/v2/organizations/{org}/workspaces"), token, workspace(name)).await;
    assert_eq!(reply.status, 201, "creating workspace {name}: {:?}", reply.body);
    id(&reply)
}

/// Creates an agent pool in `org` from `body` and returns its id.
pub async fn new_pool(app: &TestApp, token: &str, org: &str, body: Value) -> String {
    let reply = app.post(&format!("/api/v2/organizations/{org}/agent-pools"), token, body).await;
    assert_eq!(reply.status, 201, "creating a pool: {:?}", reply.body);
    id(&reply)
}

/// Creates an agent token (described as `ci`) of a pool and returns (token id, secret).
pub async fn agent_token(app: &TestApp, token: &str, pool_id: &str) -> (String, String) {
    let reply =
        app.post(&format!("/api/v2/agent-pools/{pool_id}/authentication-tokens"), token, token_body("ci")).await;
    assert_eq!(reply.status, 201, "creating an agent token: {:?}", reply.body);
    let secret = reply.body["data"]["attributes"]["token"].as_str().expect("the secret, once").to_owned();
    (id(&reply), secret)
}

/// A pool `builders` of `acme` and an agent token of it: (pool id, secret).
pub async fn pool_and_token(app: &TestApp, owners: &str) -> (String, String) {
    let pool_id = new_pool(app, owners, "acme", pool("builders")).await;
    let (_, secret) = agent_token(app, owners, &pool_id).await;
    (pool_id, secret)
}

/// The pool's `agent-count`, as its show answers it.
pub async fn agent_count(app: &TestApp, token: &str, pool_id: &str) -> Value {
    let reply = app.get(&format!("/api/v2/agent-pools/{pool_id}"), token).await;
    assert_eq!(reply.status, 200, "showing pool {pool_id}: {:?}", reply.body);
    reply.body["data"]["attributes"]["agent-count"].clone()
}

/// Creates `org`'s private module `name`/`provider` and returns its path.
pub async fn new_module(app: &TestApp, token: &str, org: &str, name: &str, provider: &str) -> String {
    let reply = app.post(&format!("/api/v2/organizations/{org}/registry-modules"), token, module(name, provider)).await;
    assert_eq!(reply.status, 201, "creating module {name}/{provider}: {:?}", reply.body);
    module_path(org, name, provider)
}

/// Creates version `v` of the module at `module` (its path) and returns the version's upload link.
pub async fn new_version(app: &TestApp, token: &str, module: &str, v: &str) -> String {
    let created = app.post(&format!("{module}/versions"), token, version(v)).await;
    assert_eq!(created.status, 201, "creating version {v}: {:?}", created.body);
    created.body["data"]["links"]["upload"].as_str().expect("an upload link").to_owned()
}

/// Creates version `v` of the module at `module`, uploads `archive` to it, and waits until ingest
/// has settled it; returns the version as then read (its status is for the caller to check).
pub async fn publish_version(app: &TestApp, token: &str, module: &str, v: &str, archive: Vec<u8>) -> Reply {
    let link = new_version(app, token, module, v).await;
    assert_eq!(app.upload(&link, archive).await, 200, "uploading version {v}");
    app.settled(&format!("{module}/version?module_version={v}"), token).await
}

/// dev-server on DynamoDB and S3 in the emulator ([`crate::spawn_on_dynamodb`]) with an
/// organization `acme`; returns it and the owners team's token. A failure without the emulator.
pub async fn acme_on_dynamodb() -> (TestApp, String) {
    with_acme(crate::spawn_on_dynamodb().await).await
}

/// The same with no upload-event queue ([`crate::spawn_on_dynamodb_without_queue`]).
pub async fn acme_on_dynamodb_without_queue() -> (TestApp, String) {
    with_acme(crate::spawn_on_dynamodb_without_queue().await).await
}

async fn with_acme(app: TestApp) -> (TestApp, String) {
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    (app, owners)
}

// ----- workspaces' state -----

/// A Terraform state (format 4) with `serial`, `lineage` and one output per `(name, value,
/// sensitive)`, and one managed resource.
pub fn terraform_state(serial: u64, lineage: &str, outputs: &[(&str, Value, bool)]) -> Vec<u8> {
    let outputs: serde_json::Map<String, Value> = outputs
        .iter()
        .map(|(name, value, sensitive)| {
            (name.to_string(), json!({ "value": value, "type": "string", "sensitive": sensitive }))
        })
        .collect();
    let state = json!({
        "version": 4, "terraform_version": "1.0.3", "serial": serial, "lineage": lineage,
        "outputs": outputs,
        "resources": [{
            "mode": "managed", "type": "null_resource", "name": "one",
            "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
            "instances": [{ "schema_version": 0, "attributes": { "id": "1" } }]
        }]
    });
    serde_json::to_vec_pretty(&state).expect("a state serializes")
}

/// A state-version document carrying `state` inline, as the CLI's remote backend sends it.
pub fn state_version_body(state: &[u8], serial: u64, force: bool) -> Value {
    use base64::Engine;
    use md5::Digest;
    json!({"data": {"type": "state-versions", "attributes": {
        "serial": serial,
        "md5": hex::encode(md5::Md5::digest(state)),
        "force": force,
        "state": base64::engine::general_purpose::STANDARD.encode(state),
    }}})
}

/// Locks the workspace `id` as `token`'s holder.
pub async fn lock(app: &TestApp, token: &str, id: &str) {
    let reply = app.post(&format!("/api/v2/workspaces/{id}/actions/lock"), token, json!({"reason": "test"})).await;
    assert_eq!(reply.status, 200, "locking {id}: {:?}", reply.body);
}

/// Writes `state` (serial `serial`) to the workspace `id`, which `token` holds locked.
pub async fn write_state(app: &TestApp, token: &str, id: &str, state: &[u8], serial: u64) -> Reply {
    app.post(&format!("/api/v2/workspaces/{id}/state-versions"), token, state_version_body(state, serial, false)).await
}

/// Grants the team `team_id` access to the workspace `workspace_id` (`attributes`: `access` and,
/// with `custom`, the fine-grained permissions), as `token`; returns the access's id.
pub async fn grant(app: &TestApp, token: &str, team_id: &str, workspace_id: &str, attributes: Value) -> String {
    let body = json!({"data": {"type": "team-workspaces", "attributes": attributes, "relationships": {
        "team": {"data": {"type": "teams", "id": team_id}},
        "workspace": {"data": {"type": "workspaces", "id": workspace_id}},
    }}});
    let reply = app.post("/api/v2/team-workspaces", token, body).await;
    assert_eq!(reply.status, 201, "granting {team_id} access to {workspace_id}: {:?}", reply.body);
    id(&reply)
}
