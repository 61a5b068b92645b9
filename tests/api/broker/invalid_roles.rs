//! A stored role that no longer validates (written by an earlier version, or edited in the
//! store) keeps its fields: reading it shows them with `invalid_data`, as Vault does, and a
//! partial update keeps what it does not name.

use hangar::store::{keys, Condition, ItemStore, UpdateOp};
use serde_json::json;

use super::{broker, Vault, DOCUMENT};

#[tokio::test]
async fn a_role_that_no_longer_validates_reads_back_with_its_fields_and_why() {
    let app = broker().await;
    let root = Vault::root(&app);
    let role = json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "user_path": "/kept/"});
    root.write("aws/roles/stale", role).await;
    let store = app.store();
    let mount = hangar::broker::mounts::all(&store).await.expect("mounts");
    let mount = mount.iter().find(|m| m.path.trim_end_matches('/') == "aws").expect("the aws mount");
    // An iam_user role with role_arns no longer validates.
    let stale = keys::mount_role(&mount.uuid, "stale");
    let ops = vec![UpdateOp::set("role_arns", json!(["arn:aws:iam::123456789012:role/old"]))];
    store.update(&stale, ops, Condition::Exists).await.expect("the role is edited in the store");

    let read = root.get("aws/roles/stale").await;
    assert_eq!(read.status, 200, "{:?}", read.body);
    let data = &read.body["data"];
    assert!(data["invalid_data"].as_str().is_some_and(|why| why.contains("role_arns")), "{data:?}");
    assert_eq!(data["policy_document"], DOCUMENT, "its fields are shown: {data:?}");
    assert_eq!(data["user_path"], "/kept/", "{data:?}");

    let fixed = root.post("aws/roles/stale", json!({"credential_type": "iam_user", "role_arns": []})).await;
    assert!(fixed.status.is_success(), "{:?}", fixed.body);
    let read = root.get("aws/roles/stale").await;
    assert!(read.body["data"].get("invalid_data").is_none(), "{:?}", read.body);
    assert_eq!(read.body["data"]["user_path"], "/kept/", "the partial update kept it: {:?}", read.body);
    app.stop().await;
}
