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
