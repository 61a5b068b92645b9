//! The read paths the warm-request and store-cost figures exercise, and the data they need.

use axum::http::Method;
use serde_json::json;

use crate::api::{module_path, Api, ORG};

/// Pools seeded, and the limit Hangar is configured with (it defaults to one pool, as HCP
/// Terraform's free tier).
pub const AGENT_POOLS: usize = 10;

pub struct Endpoint {
    pub name: &'static str,
    pub path: String,
    /// Which bootstrap token it is called with: the site admin's, or the broker's root token.
    pub vault: bool,
}

pub fn endpoints() -> Vec<Endpoint> {
    let api = |name, path: String| Endpoint { name, path, vault: false };
    vec![
        api("GET module", module_path(0)),
        api("list modules (page 1)", format!("/api/v2/organizations/{ORG}/registry-modules")),
        api("protocol: versions", format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/versions")),
        api("protocol: download", format!("/api/registry/v1/modules/{ORG}/mod-00000/aws/1.0.0/download")),
        api("list agent pools", format!("/api/v2/organizations/{ORG}/agent-pools")),
        Endpoint { name: "creds for a role", path: "/v1/aws/creds/bench".into(), vault: true },
    ]
}

/// Everything but the modules: the organization, version 1.0.0 of `mod-00000` (which must
/// exist), `AGENT_POOLS` agent pools, and an `assumed_role` role `bench` on the `aws/` mount, whose root
/// configuration points at `aws_endpoint` (moto) or nowhere (the in-process fake).
pub async fn seed_all_but_modules(api: &Api, admin: &str, root: &str, aws_endpoint: Option<&str>) {
    api.publish(admin, 0, "1.0.0", hangar_tests::module_archive()).await;
    api.create_agent_pools(admin, AGENT_POOLS).await;
    api.configure_aws(root, aws_endpoint).await;
    let role = json!({"credential_type": "assumed_role", "role_arns": ["arn:aws:iam::123456789012:role/bench"]});
    api.write_vault(root, "/v1/aws/roles/bench", role).await;
}

/// Calls an endpoint once and checks it succeeded.
pub async fn call(api: &Api, endpoint: &Endpoint, admin: &str, root: &str) {
    let token = if endpoint.vault { root } else { admin };
    let reply = api.send(Method::GET, &endpoint.path, token, None).await;
    assert!(reply.status.is_success(), "GET {}: {} {}", endpoint.path, reply.status, reply.body);
}
