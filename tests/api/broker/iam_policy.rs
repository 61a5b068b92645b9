//! The broker with no more IAM permissions than Vault's documented policy for its AWS engine
//! (the block in docs/broker.md), against an emulator that enforces it: credentials are issued,
//! and revocation (of a lease, of the token holding it) deletes the user without a call that
//! policy does not grant.

use aws_sdk_iam::Client;
use hangar::config::Config;
use hangar_tests::moto::{self, Moto};
use serde_json::{json, Value};

use super::{iam_user_role, suffix, Vault, ROOT};

/// The IAM policy docs/broker.md gives, with its `Resource` widened to `*`: moto matches no
/// other resource for IAM actions.
fn documented_policy() -> String {
    let page = include_str!("../../../docs/broker.md");
    let (_, after) = page.split_once("## The IAM policy the broker needs").expect("the policy's section");
    let (_, block) = after.split_once("```json\n").expect("a JSON block");
    let (block, _) = block.split_once("```").expect("the block's end");
    let mut policy: Value = serde_json::from_str(block).expect("the documented policy is JSON");
    let actions = policy["Statement"][0]["Action"].as_array().expect("its actions").len();
    assert!(actions >= 13, "the whole list of actions: {policy}");
    policy["Statement"][0]["Resource"] = json!("*");
    policy.to_string()
}

/// A user of the emulator with `policy` inline and a key: its IAM client and (id, secret).
async fn user_with(iam: &Client, moto: &Moto, name: &str, policy: &str) -> (Client, (String, String)) {
    iam.create_user().user_name(name).send().await.expect("CreateUser");
    iam.put_user_policy().user_name(name).policy_name("only").policy_document(policy).send().await.expect("policy");
    let key = iam.create_access_key().user_name(name).send().await.expect("CreateAccessKey");
    let key = key.access_key().expect("a key");
    let (id, secret) = (key.access_key_id().to_owned(), key.secret_access_key().to_owned());
    let signed = moto::at(moto.endpoint.clone(), &id, &secret).await;
    (Client::new(&signed.sdk), (id, secret))
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn vaults_documented_policy_is_enough_to_issue_users_and_revoke_them() {
    let moto = moto::policy_moto().await;
    moto.enforce_policies(false).await;
    let iam = Client::new(&moto.sdk);
    let id = suffix();
    let everything = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
    let (admin, _) = user_with(&iam, &moto, &format!("hangar-admin-{id}"), everything).await;
    let (_, (key, secret)) = user_with(&iam, &moto, &format!("vault-root-{id}"), &documented_policy()).await;
    moto.enforce_policies(true).await;

    let app =
        hangar_tests::TestApp::spawn_with(Config { root_service_token: Some(ROOT.into()), ..Config::default() }).await;
    let root = Vault::root(&app);
    let endpoint = moto.endpoint.as_str();
    root.write(
        "aws/config/root",
        json!({"access_key": key, "secret_key": secret, "region": moto::REGION,
               "iam_endpoint": endpoint, "sts_endpoint": endpoint, "max_retries": 0}),
    )
    .await;
    let path = iam_user_role(&root, "aws/roles/vault-policy", "vault-policy").await;
    let users = |admin: Client, path: String| async move {
        let listed = admin.list_users().path_prefix(path).send().await.expect("ListUsers as the admin");
        listed.users().iter().map(|u| u.user_name().to_owned()).collect::<Vec<_>>()
    };

    // Issued and revoked by hand.
    let creds = root.get("aws/creds/vault-policy").await;
    assert_eq!(creds.status, 200, "{:?}", creds.body);
    assert_eq!(users(admin.clone(), path.clone()).await.len(), 1);
    let lease = creds.body["lease_id"].as_str().expect("a lease id");
    let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert_eq!(users(admin.clone(), path.clone()).await, Vec::<String>::new(), "the user is deleted");

    // Revoked with the token that holds it.
    let child = Vault::new(&app, &root.token(&["root"], "child").await);
    assert_eq!(child.get("aws/creds/vault-policy").await.status, 200);
    assert_eq!(child.post("auth/token/revoke-self", json!({})).await.status, 204);
    assert_eq!(users(admin.clone(), path.clone()).await, Vec::<String>::new(), "the token's user is deleted");

    moto.enforce_policies(false).await;
    app.stop().await;
}
