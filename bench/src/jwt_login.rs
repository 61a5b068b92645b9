//! The broker's JWT login (issue 42): what one `auth/jwt/login` with a run identity token costs
//! the store, with 1 and 64 auth methods enabled (a login finds its method among them), and its
//! median time beside a `lookup-self` of the token it earned (the cheapest authenticated call),
//! in one run. Hangar's own issuer answers the keys, so no network call is in the figure.

use std::time::Instant;

use axum::http::Method;
use hangar::config::Config;
use serde_json::json;

use crate::api::Api;
use crate::counting::Cost;
use crate::local::{Local, ROOT_TOKEN};
use crate::stats::{micros, ratio, table, Samples};

const METHODS: [usize; 2] = [1, 64];
const LOGINS: usize = 200;
const ISSUER: &str = "http://hangar.local";

pub async fn run() -> String {
    let mut rows = Vec::new();
    for methods in METHODS {
        let (cost, login, lookup) = measure(methods).await;
        rows.push(vec![
            format!("{methods}"),
            format!("{} / {} / {}", cost.calls, cost.items_read, cost.items_written),
            micros(login.median()),
            micros(lookup.median()),
            ratio(login.median().as_secs_f64(), lookup.median().as_secs_f64()),
        ]);
    }
    let logins = table(
        &[
            "auth methods enabled",
            "store calls / items read / written, one login",
            "login, median",
            "lookup-self, median",
            "login / lookup-self",
        ],
        &rows,
    );
    format!(
        "### JWT login: a run identity token traded for a broker token\n\n\
         In-process (router called directly, embedded store), {LOGINS} logins with ES256 tokens Hangar \
         signed, checked against its own keys.\n\n{logins}"
    )
}

async fn measure(methods: usize) -> (Cost, Samples, Samples) {
    let local = Local::start(Config::default()).await;
    let api = &local.api;
    for n in 1..methods {
        api.write_vault(ROOT_TOKEN, &format!("/v1/sys/auth/other-{n}"), json!({"type": "jwt"})).await;
    }
    api.write_vault(ROOT_TOKEN, "/v1/sys/auth/jwt", json!({"type": "jwt"})).await;
    api.write_vault(ROOT_TOKEN, "/v1/auth/jwt/config", json!({"oidc_discovery_url": ISSUER, "bound_issuer": ISSUER}))
        .await;
    let role = json!({"role_type": "jwt", "bound_audiences": ["vault.workload.identity"], "bound_claims_type": "glob",
        "bound_claims": {"sub": "organization:acme:project:*:workspace:app:run_phase:*"},
        "user_claim": "terraform_full_workspace", "token_policies": ["default"], "token_ttl": "20m"});
    api.write_vault(ROOT_TOKEN, "/v1/auth/jwt/role/tfc", role).await;
    let signer = local.state.identity.as_deref().expect("dev-server's identity key");
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": ISSUER, "aud": "vault.workload.identity", "iat": now, "nbf": now, "exp": now + 3600,
        "sub": "organization:acme:project:Default Project:workspace:app:run_phase:plan",
        "terraform_full_workspace": "organization:acme:project:Default Project:workspace:app",
    });
    let jwt = hangar::identity::sign(signer, &claims).await.expect("signed");
    let body = json!({"role": "tfc", "jwt": jwt});

    let before = local.counters.snapshot();
    let token = login(api, &body).await;
    let cost = local.counters.snapshot() - before;
    let (mut logins, mut lookups) = (Samples::default(), Samples::default());
    for _ in 0..LOGINS {
        let started = Instant::now();
        login(api, &body).await;
        logins.push(started.elapsed());
        let started = Instant::now();
        let reply = api.send(Method::GET, "/v1/auth/token/lookup-self", &token, None).await;
        lookups.push(started.elapsed());
        assert!(reply.status.is_success(), "lookup-self: {}", reply.body);
    }
    (cost, logins, lookups)
}

async fn login(api: &Api, body: &serde_json::Value) -> String {
    let reply = api.send(Method::POST, "/v1/auth/jwt/login", "", Some(body.clone())).await;
    assert!(reply.status.is_success(), "login: {}", reply.body);
    reply.body["auth"]["client_token"].as_str().expect("a token").to_owned()
}
