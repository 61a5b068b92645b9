//! Per-run cloud credentials: a run phase whose workspace asks (HCP's `TFC_AWS_*`, `TFC_VAULT_*`
//! variables) gets identity tokens Hangar signs, which verify against its published keys with
//! HCP's issuer, audience and claims; the broker's JWT method trusts them for the workspace its
//! role binds, not another; and on an agent (moto as IAM and STS) the plan and apply roles'
//! credentials, or the broker's, reach Terraform, the broker's lease is revoked after the phase
//! and the files are gone after the job.

use std::time::Duration;

use hangar::config::Config;
use hangar_tests::builders::{acme_with, id, roomy};
use hangar_tests::{moto, TestApp};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::Method;
use serde_json::{json, Value};

use super::{aws, iam_user_role, Vault, ACCOUNT, ROOT};
use crate::agent_pools::registered;
use crate::runs::{agent_workspace, claimed, job, queued_run, wait_for};

async fn acme_broker() -> (TestApp, String) {
    acme_with(Config { root_service_token: Some(ROOT.into()), max_agents: 5, ..roomy() }).await
}

/// Sets environment variables of `ws`: their ids.
async fn env_vars(app: &TestApp, owners: &str, ws: &str, vars: &[(&str, &str)]) -> Vec<String> {
    let mut ids = Vec::new();
    for (key, value) in vars {
        let body = json!({"data": {"type": "vars", "attributes": {"key": key, "value": value, "category": "env"}}});
        let reply = app.post(&format!("/api/v2/workspaces/{ws}/vars"), owners, body).await;
        assert_eq!(reply.status, 201, "{key}: {:?}", reply.body);
        ids.push(id(&reply));
    }
    ids
}

/// The job spec's `credentials` of a new run of `ws`, claimed by a new agent of its pool.
async fn credentials_of_a_run(app: &TestApp, owners: &str, ws: &str, agent_secret: &str) -> (u16, Value, String) {
    let agent = registered(app, agent_secret, "a").await;
    let run_id = queued_run(app, owners, ws).await;
    let token = claimed(app, agent_secret, &agent).await;
    let spec = job(app, Method::GET, "/api/agent/job", &token, json!(null)).await;
    let given = if spec.status == 200 { spec.body["credentials"].clone() } else { spec.body };
    (spec.status.as_u16(), given, run_id)
}

/// Enables the broker's JWT method at `jwt`, trusting Hangar's own issuer, with HCP's role `tfc`
/// for the runs of workspace `app` (`token`: the role's token settings).
async fn trust_runs_of_app(root: &Vault<'_>, app: &TestApp, token: Value) {
    root.write("sys/auth/jwt", json!({"type": "jwt"})).await;
    root.write("auth/jwt/config", json!({"oidc_discovery_url": app.url, "bound_issuer": app.url})).await;
    let mut role = json!({"role_type": "jwt", "bound_audiences": ["vault.workload.identity"], "bound_claims_type": "glob",
        "bound_claims": {"sub": "organization:acme:project:*:workspace:app:run_phase:*"},
        "user_claim": "terraform_full_workspace"});
    role.as_object_mut().unwrap().extend(token.as_object().unwrap().clone());
    root.write("auth/jwt/role/tfc", role).await;
}

/// Checks `token` as AWS and Vault do: the issuer's discovery document, its keys, the signature,
/// issuer and audience. Its claims.
async fn verified(app: &TestApp, token: &str, audience: &str) -> Value {
    let discovery: Value = app
        .client
        .get(format!("{}/.well-known/openid-configuration", app.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], app.url);
    let jwks_uri = discovery["jwks_uri"].as_str().unwrap();
    assert_eq!(jwks_uri, format!("{}/.well-known/jwks", app.url));
    let keys: JwkSet = app.client.get(jwks_uri).send().await.unwrap().json().await.unwrap();
    let kid = jsonwebtoken::decode_header(token).unwrap().kid.expect("a key id");
    let key = DecodingKey::from_jwk(keys.find(&kid).expect("the signing key is published")).unwrap();
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&[audience]);
    validation.set_issuer(&[&app.url]);
    jsonwebtoken::decode::<Value>(token, &key, &validation).expect("a valid token").claims
}

#[tokio::test]
async fn a_run_phase_gets_identity_tokens_that_verify_against_hangar_s_keys_and_log_in_to_the_broker() {
    let (app, owners) = acme_broker().await;
    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    let arn = format!("arn:aws:iam::{ACCOUNT}:role/run");
    env_vars(
        &app,
        &owners,
        &ws,
        &[
            ("TFC_AWS_PROVIDER_AUTH", "true"),
            ("TFC_AWS_RUN_ROLE_ARN", &arn),
            ("TFC_VAULT_PROVIDER_AUTH", "true"),
            ("TFC_VAULT_RUN_ROLE", "tfc"),
        ],
    )
    .await;
    let (status, given, run_id) = credentials_of_a_run(&app, &owners, &ws, &secret).await;
    assert_eq!(status, 200, "{given:?}");
    let aws = &given["aws"][0];
    assert_eq!(aws["role-arn"], arn);
    let claims = verified(&app, aws["token"].as_str().unwrap(), "aws.workload.identity").await;
    let full = "organization:acme:project:Default Project:workspace:app";
    assert_eq!(claims["sub"], format!("{full}:run_phase:plan"));
    assert_eq!(claims["terraform_full_workspace"], full);
    assert_eq!(claims["terraform_workspace_id"], ws);
    assert_eq!(claims["terraform_organization_name"], "acme");
    assert_eq!(claims["terraform_project_name"], "Default Project");
    assert_eq!(claims["terraform_run_phase"], "plan");
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 2 * 3600, "a plan's timeout");
    let vault = &given["vault"][0];
    assert_eq!((vault["address"].as_str(), vault["auth-path"].as_str()), (Some(app.url.as_str()), Some("jwt")));
    verified(&app, vault["token"].as_str().unwrap(), "vault.workload.identity").await;
    let mut browser = crate::web_console::Browser::new(&app);
    browser.sign_in(&owners).await;
    let page = browser.get(&format!("/app/organizations/acme/workspaces/app/runs/{run_id}")).await;
    assert!(page.html.contains(&arn) && page.html.contains("tfc"), "the console says where from: {}", page.html);
    assert!(!page.html.contains(aws["token"].as_str().unwrap()), "never the token");

    // The broker trusts Hangar's own issuer (no network call) for the workspace its role binds.
    let root = Vault::root(&app);
    trust_runs_of_app(&root, &app, json!({"token_policies": ["reader"], "token_ttl": "20m"})).await;
    let login = |jwt: String| {
        let root = &root;
        async move { root.post("auth/jwt/login", json!({"role": "tfc", "jwt": jwt})).await }
    };
    let logged_in = login(vault["token"].as_str().unwrap().to_owned()).await;
    assert_eq!(logged_in.status, 200, "{:?}", logged_in.body);
    assert_eq!(logged_in.body["auth"]["policies"], json!(["default", "reader"]));
    assert_eq!(login(aws["token"].as_str().unwrap().to_owned()).await.status, 400, "the AWS audience is not Vault's");

    // Another workspace's run has a token of its own, which the role does not take.
    let (other, _, other_secret) = agent_workspace(&app, &owners, "other").await;
    env_vars(&app, &owners, &other, &[("TFC_VAULT_PROVIDER_AUTH", "true"), ("TFC_VAULT_RUN_ROLE", "tfc")]).await;
    let (_, other_given, _) = credentials_of_a_run(&app, &owners, &other, &other_secret).await;
    let refused = login(other_given["vault"][0]["token"].as_str().unwrap().to_owned()).await;
    assert_eq!(refused.status, 400);
    assert!(format!("{:?}", refused.body).contains("does not match any associated bound claim values"));

    // A workspace that asks for nothing gets nothing; one that asks for too little is told what to set.
    let (plain, _, plain_secret) = agent_workspace(&app, &owners, "plain").await;
    let (_, nothing, _) = credentials_of_a_run(&app, &owners, &plain, &plain_secret).await;
    assert_eq!(nothing, json!({"aws": [], "vault": [], "identity-tokens": []}));
    let (broken, _, broken_secret) = agent_workspace(&app, &owners, "broken").await;
    env_vars(&app, &owners, &broken, &[("TFC_AWS_PROVIDER_AUTH", "true")]).await;
    let (status, refusal, _) = credentials_of_a_run(&app, &owners, &broken, &broken_secret).await;
    assert_eq!(status, 422);
    assert!(refusal.to_string().contains("TFC_AWS_RUN_ROLE_ARN"), "{refusal}");
}

/// A `terraform` (Python, with boto3) that, at `plan` and `apply`, resolves AWS credentials from
/// its environment as any AWS SDK does, asks STS who it is, and appends what it found to
/// `calls.jsonl` in the scratch directory; `show -json` reports an output to add.
fn whoami_terraform(scratch: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let script = format!(
        r#"#!{python}
import json, os, sys
command = sys.argv[1]
if command == "show":
    print(json.dumps({{"resource_changes": [], "output_changes": {{"x": {{"actions": ["create"]}}}}}}))
    sys.exit(0)
if command == "plan":
    out = [a for a in sys.argv if a.startswith("-out=")][0][5:]
    open(out, "w").write("plan")
if command in ("plan", "apply"):
    record = {{"command": command}}
    for name in ("AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE", "VAULT_TOKEN", "VAULT_ADDR"):
        record[name] = os.environ.get(name)
    try:
        import boto3
        record["arn"] = boto3.client("sts").get_caller_identity()["Arn"]
    except Exception as e:
        record["error"] = repr(e)
    with open(os.path.join({scratch:?}, "calls.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
sys.exit(0)
"#,
        python = python.display(),
        scratch = scratch.display().to_string(),
    );
    let path = scratch.join("terraform");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn calls(scratch: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(scratch.join("calls.jsonl")).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn on_an_agent_terraform_gets_the_phase_s_role_or_the_broker_s_keys_and_nothing_stays() {
    let aws = aws().await;
    let (app, owners) = acme_broker().await;
    let root = Vault::root(&app);
    aws.configure(&root, "aws").await;
    iam_user_role(&root, "aws/roles/deploy", "runs").await;
    root.policy("deploy", r#"path "aws/creds/deploy" { capabilities = ["read"] }"#).await;
    trust_runs_of_app(&root, &app, json!({"token_policies": ["deploy"]})).await;

    let (ws, _, secret) = agent_workspace(&app, &owners, "app").await;
    env_vars(&app, &owners, &ws, &[("AWS_ENDPOINT_URL", &aws.endpoint), ("AWS_DEFAULT_REGION", moto::REGION)]).await;
    let scratch = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let settings = hangar_agent::Settings {
        address: app.url.clone(),
        token: secret.clone(),
        name: "whoami".into(),
        terraform: whoami_terraform(scratch.path()),
        single: false,
        work_dir: Some(work.path().to_path_buf()),
        poll: Duration::from_millis(200),
        ca_file: None,
    };
    let agent = tokio::spawn(hangar_agent::run(settings, stopped));
    let applied_run = |ws: String| {
        let (app, owners) = (&app, &owners);
        async move {
            let run_id = crate::runs::new_run(
                app,
                owners,
                &ws,
                Some(&crate::runs::uploaded(app, owners, &ws).await),
                json!({"auto-apply": true}),
            )
            .await;
            assert_eq!(run_id.status, 201, "{:?}", run_id.body);
            let run_id = id(&run_id);
            wait_for(app, owners, &run_id, "applied").await;
            run_id
        }
    };

    // HCP's AWS variables: the plan and apply roles, by web identity, nothing else.
    let plan_arn = format!("arn:aws:iam::{ACCOUNT}:role/plan-role");
    let apply_arn = format!("arn:aws:iam::{ACCOUNT}:role/apply-role");
    let direct = env_vars(
        &app,
        &owners,
        &ws,
        &[
            ("TFC_AWS_PROVIDER_AUTH", "true"),
            ("TFC_AWS_PLAN_ROLE_ARN", &plan_arn),
            ("TFC_AWS_APPLY_ROLE_ARN", &apply_arn),
        ],
    )
    .await;
    applied_run(ws.clone()).await;
    let seen = calls(scratch.path());
    assert_eq!(seen.len(), 2, "{seen:?}");
    let assumed = |call: &Value| call["arn"].as_str().unwrap_or_default().to_owned();
    assert!(assumed(&seen[0]).contains(":assumed-role/plan-role/"), "{seen:?}");
    assert!(assumed(&seen[1]).contains(":assumed-role/apply-role/"), "{seen:?}");
    assert_eq!(seen[1]["AWS_ROLE_ARN"], apply_arn);
    assert!(seen.iter().all(|c| c["VAULT_TOKEN"].is_null() && c["AWS_SHARED_CREDENTIALS_FILE"].is_null()));
    let token_file = seen[0]["AWS_WEB_IDENTITY_TOKEN_FILE"].as_str().unwrap();
    assert!(!std::path::Path::new(token_file).exists(), "the token file went with the job");
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0, "no job directory is left");
    for var in direct {
        assert_eq!(app.delete(&format!("/api/v2/workspaces/{ws}/vars/{var}"), &owners).await.status, 204);
    }

    // Vault-backed: the broker's `deploy` keys through a JWT login, revoked after each phase.
    let backed = env_vars(
        &app,
        &owners,
        &ws,
        &[
            ("TFC_VAULT_PROVIDER_AUTH", "true"),
            ("TFC_VAULT_RUN_ROLE", "tfc"),
            ("TFC_VAULT_BACKED_AWS_AUTH", "true"),
            ("TFC_VAULT_BACKED_AWS_AUTH_TYPE", "iam_user"),
            ("TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE", "deploy"),
        ],
    )
    .await;
    applied_run(ws.clone()).await;
    let seen = calls(scratch.path());
    assert_eq!(seen.len(), 4, "{seen:?}");
    for call in &seen[2..] {
        assert!(assumed(call).contains(":user/"), "the broker's IAM user: {call:?}");
        assert!(call["AWS_ROLE_ARN"].is_null() && call["VAULT_TOKEN"].is_string(), "{call:?}");
        assert_eq!(call["VAULT_ADDR"], app.url);
    }
    let leases = root.list("sys/leases/lookup/aws/creds/deploy").await;
    assert_eq!(leases.status, 404, "every lease was revoked after its phase: {:?}", leases.body);
    for var in backed {
        app.delete(&format!("/api/v2/workspaces/{ws}/vars/{var}"), &owners).await;
    }

    // A workspace that asks for nothing gets nothing of it.
    applied_run(ws.clone()).await;
    let seen = calls(scratch.path());
    let last = seen.last().unwrap();
    assert!(
        last["AWS_ROLE_ARN"].is_null()
            && last["VAULT_TOKEN"].is_null()
            && last["AWS_SHARED_CREDENTIALS_FILE"].is_null()
    );
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(20), agent).await;
}
