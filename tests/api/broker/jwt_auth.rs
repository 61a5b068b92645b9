//! Vault's JWT auth method in the broker: enabled at a path through `sys/auth`, configured with
//! the keys and issuer it trusts, roles that bind audiences, subjects and claims, and logins
//! that earn a token of the role's policies. Each way a token can be wrong is refused with
//! Vault's message; a disabled method's tokens stop working.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::{broker, send, Vault};
use hangar_tests::TestApp;

const ISSUER: &str = "https://ci.example";
const AUDIENCE: &str = "vault.workload.identity";
const SUBJECT: &str = "organization:acme:project:Default Project:workspace:app:run_phase:plan";

/// A P-256 key pair: (private PKCS#8 PEM, public SPKI PEM).
fn key_pair() -> (String, String) {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key");
    (pair.serialize_pem(), pair.public_key_pem())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// HCP-like claims, issued now for an hour.
fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": SUBJECT, "iat": now(), "nbf": now(), "exp": now() + 3600,
        "terraform_workspace_name": "app", "terraform_full_workspace": "organization:acme:project:Default Project:workspace:app",
        "terraform_run_phase": "plan",
    })
}

fn sign(private_pem: &str, claims: &Value) -> String {
    let key = EncodingKey::from_ec_pem(private_pem.as_bytes()).expect("an EC key");
    jsonwebtoken::encode(&Header::new(Algorithm::ES256), claims, &key).expect("signed")
}

/// dev-server with `jwt` enabled and trusting `public_pem` for `ISSUER`, and role `tfc` (glob
/// bound `sub`, the run's audience) granting policy `reader`.
async fn jwt_broker(public_pem: &str) -> TestApp {
    let app = broker().await;
    let root = Vault::root(&app);
    assert_eq!(root.post("sys/auth/jwt", json!({"type": "jwt", "description": "runs"})).await.status, 204);
    let config =
        root.post("auth/jwt/config", json!({"jwt_validation_pubkeys": [public_pem], "bound_issuer": ISSUER})).await;
    assert_eq!(config.status, 204, "{:?}", config.body);
    let role = root
        .post(
            "auth/jwt/role/tfc",
            json!({
                "role_type": "jwt", "bound_audiences": [AUDIENCE], "user_claim": "terraform_full_workspace",
                "bound_claims_type": "glob",
                "bound_claims": {"sub": "organization:acme:project:*:workspace:app:run_phase:*"},
                "claim_mappings": {"terraform_run_phase": "phase"},
                "token_policies": ["reader"], "token_ttl": "20m",
            }),
        )
        .await;
    assert_eq!(role.status, 204, "{:?}", role.body);
    app
}

async fn login(app: &TestApp, path: &str, role: &str, jwt: &str) -> hangar_tests::Reply {
    send(app, "POST", &format!("auth/{path}/login"), &[], Some(json!({"role": role, "jwt": jwt}))).await
}

fn error_of(reply: &hangar_tests::Reply) -> String {
    reply.body["errors"].as_array().map(|e| format!("{e:?}")).unwrap_or_else(|| format!("{:?}", reply.body))
}

#[tokio::test]
async fn a_jwt_the_role_binds_logs_in_to_a_token_of_the_role() {
    let (private, public) = key_pair();
    let app = jwt_broker(&public).await;
    let reply = login(&app, "jwt", "tfc", &sign(&private, &claims())).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let auth = &reply.body["auth"];
    assert_eq!(auth["policies"], json!(["default", "reader"]));
    assert_eq!(auth["metadata"], json!({"role": "tfc", "phase": "plan"}));
    assert_eq!(auth["orphan"], true);
    assert_eq!(auth["lease_duration"], 1200);
    let token = auth["client_token"].as_str().unwrap();
    let looked = Vault::new(&app, token).get("auth/token/lookup-self").await;
    assert_eq!(looked.status, 200, "{:?}", looked.body);
    assert_eq!(looked.body["data"]["path"], "auth/jwt/login");
    assert_eq!(looked.body["data"]["display_name"], "jwt-organization:acme:project:Default Project:workspace:app");

    // The role and config read back as Vault shows them; the method is listed beside the token store.
    let root = Vault::root(&app);
    let role = root.get("auth/jwt/role/tfc").await;
    assert_eq!(role.body["data"]["bound_claims_type"], "glob");
    assert_eq!(role.body["data"]["token_ttl"], 1200);
    let methods = root.get("sys/auth").await;
    assert_eq!(methods.body["data"]["jwt/"]["type"], "jwt");
    assert_eq!(methods.body["token/"]["type"], "token", "at the top level too");
    let listed = root.call("LIST", "auth/jwt/role", None).await;
    assert_eq!(listed.body["data"]["keys"], json!(["tfc"]));

    // Disabling the method ends what it issued.
    assert_eq!(root.call("DELETE", "sys/auth/jwt", None).await.status, 204);
    assert_eq!(Vault::new(&app, token).get("auth/token/lookup-self").await.status, 403);
    assert_eq!(login(&app, "jwt", "tfc", &sign(&private, &claims())).await.status, 404);
}

#[tokio::test]
async fn every_wrong_token_is_refused_with_vault_s_reason() {
    let (private, public) = key_pair();
    let (other_private, _) = key_pair();
    let app = jwt_broker(&public).await;
    let root = Vault::root(&app);
    let strict = root
        .post(
            "auth/jwt/role/strict",
            json!({"role_type": "jwt", "bound_audiences": AUDIENCE, "user_claim": "sub",
                   "bound_claims": {"terraform_workspace_name": ["app", "web"]}, "bound_subject": SUBJECT}),
        )
        .await;
    assert_eq!(strict.status, 204, "{:?}", strict.body);
    // A second method whose role `ci` is not the first's.
    assert_eq!(root.post("sys/auth/ci", json!({"type": "jwt"})).await.status, 204);
    root.post("auth/ci/config", json!({"jwt_validation_pubkeys": [public.clone()]})).await;
    let ci = root
        .post("auth/ci/role/ci", json!({"role_type": "jwt", "bound_audiences": [AUDIENCE], "user_claim": "sub"}))
        .await;
    assert_eq!(ci.status, 204, "{:?}", ci.body);

    let with = |change: Value| {
        let mut claims = claims();
        for (key, value) in change.as_object().unwrap() {
            claims[key] = value.clone();
        }
        claims
    };
    let header = |alg: &str| {
        use base64::Engine;
        let encode = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.", encode(&json!({"alg": alg, "typ": "JWT"})), encode(&claims()))
    };
    let cases: Vec<(&str, &str, String, &str)> = vec![
        (
            "wrong audience",
            "tfc",
            sign(&private, &with(json!({"aud": "sts.amazonaws.com"}))),
            "invalid audience (aud) claim",
        ),
        (
            "wrong issuer",
            "tfc",
            sign(&private, &with(json!({"iss": "https://evil.example"}))),
            "invalid issuer (iss) claim",
        ),
        (
            "expired",
            "tfc",
            sign(&private, &with(json!({"iat": now() - 7200, "nbf": now() - 7200, "exp": now() - 3600}))),
            "token is expired",
        ),
        ("not yet valid", "tfc", sign(&private, &with(json!({"nbf": now() + 3600}))), "token not yet valid"),
        ("unsigned", "tfc", header("none"), "error validating token"),
        ("signed by another key", "tfc", sign(&other_private, &claims()), "failed to verify id token signature"),
        (
            "another workspace (glob)",
            "tfc",
            sign(
                &private,
                &with(json!({"sub": "organization:acme:project:Default Project:workspace:other:run_phase:plan"})),
            ),
            "claim \\\"sub\\\" does not match any associated bound claim values",
        ),
        (
            "another workspace (string)",
            "strict",
            sign(&private, &with(json!({"terraform_workspace_name": "other"}))),
            "claim \\\"terraform_workspace_name\\\" does not match any associated bound claim values",
        ),
        ("another subject", "strict", sign(&private, &with(json!({"sub": "someone"}))), "invalid subject (sub) claim"),
        ("a role on another path", "ci", sign(&private, &claims()), "role \\\"ci\\\" could not be found"),
        ("no such role", "nobody", sign(&private, &claims()), "could not be found"),
        ("no token", "tfc", String::new(), "missing token"),
    ];
    for (case, role, jwt, expected) in cases {
        let reply = login(&app, "jwt", role, &jwt).await;
        assert_eq!(reply.status, 400, "{case}: {:?}", reply.body);
        assert!(error_of(&reply).contains(expected), "{case}: {} lacks {expected}", error_of(&reply));
        assert!(reply.body.get("auth").is_none(), "{case}");
    }
    // The right token on the right path still logs in, and the `ci` role is reached on its own path.
    assert_eq!(login(&app, "jwt", "tfc", &sign(&private, &claims())).await.status, 200);
    assert_eq!(login(&app, "ci", "ci", &sign(&private, &claims())).await.status, 200);
}

#[tokio::test]
async fn configuring_and_enabling_refuse_what_vault_refuses() {
    let (_, public) = key_pair();
    let app = broker().await;
    let root = Vault::root(&app);
    assert_eq!(root.post("sys/auth/jwt", json!({"type": "jwt"})).await.status, 204);
    let again = root.post("sys/auth/jwt", json!({"type": "jwt"})).await;
    assert_eq!(again.status, 400);
    assert!(error_of(&again).contains("path is already in use"), "{}", error_of(&again));
    assert_eq!(root.post("sys/auth/ldap", json!({"type": "ldap"})).await.status, 400);
    let two_sources = root
        .post(
            "auth/jwt/config",
            json!({"jwt_validation_pubkeys": [public.clone()], "jwks_url": "https://x.example/jwks"}),
        )
        .await;
    assert!(error_of(&two_sources).contains("exactly one of"), "{}", error_of(&two_sources));
    let bad_key = root.post("auth/jwt/config", json!({"jwt_validation_pubkeys": ["not a key"]})).await;
    assert!(error_of(&bad_key).contains("error parsing public key"), "{}", error_of(&bad_key));
    // A discovery URL inside the network Hangar runs in is refused by the VCS network guard.
    let internal = root.post("auth/jwt/config", json!({"oidc_discovery_url": "http://169.254.169.254/latest"})).await;
    assert_eq!(internal.status, 400, "{:?}", internal.body);
    assert!(error_of(&internal).contains("error checking oidc discovery URL"), "{}", error_of(&internal));
    // Hangar's own issuer is answered without a network call.
    let own = root.post("auth/jwt/config", json!({"oidc_discovery_url": app.url, "bound_issuer": app.url})).await;
    assert_eq!(own.status, 204, "{:?}", own.body);

    for (body, expected) in [
        (json!({"user_claim": "sub", "bound_audiences": ["a"]}), "allowed_redirect_uris"),
        (json!({"role_type": "jwt", "bound_audiences": ["a"]}), "a user claim must be defined"),
        (json!({"role_type": "jwt", "user_claim": "sub"}), "at least one bound constraint"),
        (
            json!({"role_type": "jwt", "user_claim": "sub", "bound_audiences": ["a"], "groups_claim": "groups"}),
            "groups_claim",
        ),
        (
            json!({"role_type": "jwt", "user_claim": "sub", "bound_audiences": ["a"], "bound_claims_type": "regex"}),
            "bound_claims_type",
        ),
    ] {
        let reply = root.post("auth/jwt/role/r", body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {:?}", reply.body);
        assert!(error_of(&reply).contains(expected), "{body}: {}", error_of(&reply));
    }

    // Enabling a method takes sudo on its sys/auth path; reading the list takes read.
    root.post(
        "sys/policies/acl/operator",
        json!({"policy": "path \"sys/auth/*\" { capabilities = [\"create\", \"update\"] }"}),
    )
    .await;
    let created = root.post("auth/token/create", json!({"policies": ["operator"]})).await;
    let operator = Vault::new(&app, created.body["auth"]["client_token"].as_str().unwrap());
    assert_eq!(operator.post("sys/auth/mine", json!({"type": "jwt"})).await.status, 403);
    assert_eq!(operator.get("sys/auth").await.status, 403);
}

#[tokio::test]
async fn a_token_without_an_audience_logs_in_to_a_role_that_binds_none_and_the_server_stands() {
    let (private, public) = key_pair();
    let app = jwt_broker(&public).await;
    let root = Vault::root(&app);
    let role = root
        .post("auth/jwt/role/subject", json!({"role_type": "jwt", "user_claim": "sub", "bound_subject": SUBJECT}))
        .await;
    assert_eq!(role.status, 204, "{:?}", role.body);
    let mut claims = claims();
    claims.as_object_mut().unwrap().remove("aud");
    let reply = login(&app, "jwt", "subject", &sign(&private, &claims)).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    // With an audience, a role that binds none refuses it, as Vault does.
    let refused = login(&app, "jwt", "subject", &sign(&private, &super::jwt_auth::claims())).await;
    assert!(error_of(&refused).contains("no audiences bound to the role"), "{}", error_of(&refused));
    assert_eq!(root.get("sys/auth").await.status, 200, "the server still answers");
}
