//! Plugin workload identity (enterprise): a mount configured with `role_arn` and
//! `identity_token_audience` holds no key; the broker signs an identity token for it, trades it
//! with STS (`AssumeRoleWithWebIdentity`) and signs its AWS calls with what STS returns. The
//! token checks out against the keys Hangar publishes as an OIDC issuer.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as BASE64URL;
use base64::Engine;
use hangar::config::{Config, Edition};
use hangar_tests::aws_proxy::AwsProxy;
use hangar_tests::{moto, TestApp};
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, VerifyingKey};
use serde_json::{json, Value};

use super::{aws, iam_user_role, Vault, ACCOUNT, ROOT};

fn decoded(part: &str) -> Value {
    serde_json::from_slice(&BASE64URL.decode(part).expect("base64url")).expect("JSON")
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_mount_with_workload_identity_signs_its_calls_with_the_role_sts_gave_for_its_token() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    // The emulator's STS, behind the proxy, is one the operator allows identity tokens to reach.
    let mut config =
        Config { edition: Edition::Enterprise, root_service_token: Some(ROOT.into()), ..Config::default() };
    config.broker_aws.identity_sts_endpoints = vec![proxy.endpoint.clone()];
    let app = TestApp::spawn_with(config).await;
    let root = Vault::root(&app);
    let role_arn = format!("arn:aws:iam::{ACCOUNT}:role/hangar-broker");
    let written = root
        .post(
            "aws/config/root",
            json!({
                "role_arn": role_arn, "identity_token_audience": "sts.amazonaws.com", "identity_token_ttl": 600,
                "region": moto::REGION, "iam_endpoint": proxy.endpoint, "sts_endpoint": proxy.endpoint,
            }),
        )
        .await;
    assert!(written.status.is_success(), "{:?}", written.body);
    iam_user_role(&root, "aws/roles/deploy", "identity").await;
    for _ in 0..2 {
        let creds = root.get("aws/creds/deploy").await;
        assert_eq!(creds.status, 200, "{:?}", creds.body);
    }

    let assumed = proxy.calls("AssumeRoleWithWebIdentity");
    assert_eq!(assumed.len(), 1, "the role's credentials are kept until they near their expiry");
    assert_eq!(assumed[0].params.get("RoleArn"), Some(&role_arn));
    let signed_with: Vec<_> = proxy.calls("CreateUser").into_iter().map(|call| call.access_key).collect();
    assert_eq!(signed_with.len(), 2);
    for key in &signed_with {
        let key = key.as_deref().expect("signed");
        assert_ne!(key, moto::ACCESS_KEY, "not the server's own credentials");
        assert!(key.starts_with("ASIA"), "the temporary key STS gave: {key}");
    }

    // The token, checked as AWS checks it: the issuer's discovery document, then its keys.
    let token = assumed[0].params.get("WebIdentityToken").expect("a token");
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "a compact JWS");
    let claims = decoded(parts[1]);
    let issuer = claims["iss"].as_str().expect("an issuer");
    assert_eq!(issuer, format!("{}/v1/identity/oidc/plugins", app.url));
    let discovery: Value = app
        .client
        .get(format!("{issuer}/.well-known/openid-configuration"))
        .send()
        .await
        .expect("discovery")
        .json()
        .await
        .expect("JSON");
    assert_eq!(discovery["issuer"], issuer);
    let jwks_uri = discovery["jwks_uri"].as_str().expect("a jwks_uri");
    let set: Value = app.client.get(jwks_uri).send().await.expect("keys").json().await.expect("JSON");
    let header = decoded(parts[0]);
    assert_eq!(header["alg"], "ES256");
    let jwk = set["keys"].as_array().expect("keys").iter().find(|k| k["kid"] == header["kid"]).expect("its key");
    let coordinate = |name: &str| BASE64URL.decode(jwk[name].as_str().expect("a coordinate")).expect("base64url");
    let public = VerifyingKey::from_sec1_bytes(&[vec![4], coordinate("x"), coordinate("y")].concat()).expect("P-256");
    let signature = Signature::from_slice(&BASE64URL.decode(parts[2]).expect("base64url")).expect("r || s");
    public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature).expect("the signature verifies");
    assert_eq!(claims["aud"], "sts.amazonaws.com");
    assert!(claims["sub"].as_str().is_some_and(|sub| sub.starts_with("plugin-identity:root:secret:")), "{claims}");
    let lifetime = claims["exp"].as_i64().expect("exp") - claims["iat"].as_i64().expect("iat");
    assert_eq!(lifetime, 600, "identity_token_ttl");
    app.stop().await;
}
