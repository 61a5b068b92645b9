//! ACL priority as Vault applies it: among the patterns matching a path, only the one of highest
//! priority decides (Vault's policy docs, "Priority matching"), so a narrow `+` deny holds
//! against a broad `*` grant.

use serde_json::json;

use super::{broker, Vault};

#[tokio::test]
async fn a_deny_on_aws_plus_prod_refuses_creds_of_prod_despite_a_read_on_aws_star() {
    let app = broker().await;
    let root = Vault::root(&app);
    // No role, no AWS: past the ACL, the engine answers for itself, which is not a 403.
    root.policy("aws-read", r#"path "aws/*" { capabilities = ["read"] }"#).await;
    root.policy("no-prod", r#"path "aws/+/prod" { capabilities = ["deny"] }"#).await;
    let token = root.token(&["aws-read", "no-prod"], "acl").await;
    let caller = Vault::new(&app, &token);

    let prod = caller.get("aws/creds/prod").await;
    assert_eq!(prod.status, 403, "aws/+/prod outranks aws/*: {:?}", prod.body);
    assert_eq!(prod.body, json!({"errors": ["permission denied"]}));
    let dev = caller.get("aws/creds/dev").await;
    assert_ne!(dev.status, 403, "only aws/* matches aws/creds/dev: {:?}", dev.body);
    app.stop().await;
}

/// `sys/leases/revoke/<lease_id>` is checked on that path, as Vault checks it: a deny on the
/// leases of `aws/creds/prod` holds against a grant on `sys/leases/revoke*`.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_lease_by_path_is_checked_on_the_leases_own_path() {
    let (_aws, app) = super::broker_on_moto().await;
    let root = Vault::root(&app);
    let arn = "arn:aws:iam::aws:policy/ReadOnlyAccess";
    root.write("aws/roles/prod", json!({"credential_type": "federation_token", "policy_arns": [arn]})).await;
    let issued = root.get("aws/creds/prod").await;
    assert_eq!(issued.status, 200, "{:?}", issued.body);
    let lease = issued.body["lease_id"].as_str().expect("a lease id").to_owned();
    let policy = r#"
        path "sys/leases/revoke*" { capabilities = ["update"] }
        path "sys/leases/revoke/aws/creds/prod/*" { capabilities = ["deny"] }
    "#;
    root.policy("revoke-but-not-prod", policy).await;
    let caller = Vault::new(&app, &root.token(&["revoke-but-not-prod"], "revoker").await);

    let by_path = caller.call("PUT", &format!("sys/leases/revoke/{lease}"), None).await;
    assert_eq!(by_path.status, 403, "{:?}", by_path.body);
    let found = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
    assert_eq!(found.status, 200, "the lease stands: {:?}", found.body);
    app.stop().await;
}
