//! Static roles hold one IAM user each, by its IAM user id as Vault does, and own the keys the
//! broker makes for them: concurrent writes make one key, deleting the role (or moving it to
//! another user) deletes its keys, and `config/rotate-root` says when the old key stays.

use hangar_tests::aws_proxy::{AwsProxy, Fault};
use hangar_tests::moto;
use serde_json::json;

use super::{an_hour_later, aws, broker, broker_on_moto, static_key, static_role, suffix, Vault};

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_user_deleted_and_recreated_under_the_same_name_is_refused() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (user, key) = static_role(&root, &aws, "app").await;
    aws.iam.delete_access_key().user_name(&user).access_key_id(&key).send().await.expect("DeleteAccessKey");
    aws.iam.delete_user().user_name(&user).send().await.expect("DeleteUser");
    aws.create_user(&user).await;

    let rewritten = root.post("aws/static-roles/app", json!({"username": user, "rotation_period": "2h"})).await;
    assert_eq!(rewritten.status, 400, "{:?}", rewritten.body);
    assert!(super::first_error(&rewritten).contains("user id"), "{:?}", rewritten.body);

    let state = app.second_state().await;
    let (rotated, _) = hangar::broker::scheduled_run_at(&state, an_hour_later()).await.expect("a run");
    assert_eq!(rotated, 0);
    assert!(aws.access_keys(&user).await.is_empty(), "no key is made for the stranger");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn concurrent_writes_of_one_static_role_leave_exactly_one_new_key() {
    let (aws, app) = broker_on_moto().await;
    let user = format!("hangar-race-{}", suffix());
    aws.create_user(&user).await;
    let writes = (0..6).map(|_| {
        let (url, client, user) = (app.url.clone(), app.client.clone(), user.clone());
        tokio::spawn(async move {
            let body = json!({"username": user, "rotation_period": "1h"});
            let sent = client.post(format!("{url}/v1/aws/static-roles/raced")).header("X-Vault-Token", super::ROOT);
            sent.json(&body).send().await.expect("an answer").status().as_u16()
        })
    });
    let statuses: Vec<u16> = futures::future::join_all(writes).await.into_iter().map(|s| s.expect("a write")).collect();
    assert!(statuses.contains(&204), "{statuses:?}");
    assert!(statuses.iter().all(|s| matches!(s, 204 | 409)), "a write that lost is a conflict: {statuses:?}");

    let root = Vault::root(&app);
    let stored = static_key(&root, "raced").await;
    assert_eq!(aws.access_keys(&user).await, [stored], "one key, the stored one ({statuses:?})");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn deleting_a_static_role_deletes_the_keys_it_made() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (user, _) = static_role(&root, &aws, "app").await;
    let (own, _) = aws.create_key(&user).await;
    let state = app.second_state().await;
    hangar::broker::scheduled_run_at(&state, an_hour_later()).await.expect("a rotation");
    assert_eq!(aws.access_keys(&user).await.len(), 2);

    let deleted = root.delete("aws/static-roles/app").await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    assert!(aws.user_exists(&user).await, "the user stays");
    let left = aws.access_keys(&user).await;
    assert!(!left.iter().any(|key| key != &own), "only keys the broker did not make stay: {left:?}");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn moving_a_static_role_to_another_user_deletes_the_first_users_key() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (first, _) = static_role(&root, &aws, "app").await;
    let second = format!("hangar-moved-{}", suffix());
    aws.create_user(&second).await;
    let moved = root.post("aws/static-roles/app", json!({"username": second})).await;
    assert!(moved.status.is_success(), "{:?}", moved.body);
    assert!(aws.access_keys(&first).await.is_empty(), "the first user's key went");
    assert_eq!(aws.access_keys(&second).await, [static_key(&root, "app").await]);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn rotate_root_reports_an_old_key_it_could_not_delete() {
    let aws = aws().await;
    let proxy = AwsProxy::start(&aws.endpoint).await;
    let app = broker().await;
    let root = Vault::root(&app);
    let user = format!("hangar-engine-{}", suffix());
    aws.create_user(&user).await;
    let (old, secret) = aws.create_key(&user).await;
    let config = json!({
        "access_key": old, "secret_key": secret, "region": moto::REGION,
        "iam_endpoint": proxy.endpoint, "sts_endpoint": proxy.endpoint, "max_retries": 0,
    });
    root.write("aws/config/root", config).await;
    proxy.inject("DeleteAccessKey", Fault::Fail { status: 403, code: "AccessDenied" });

    let rotated = root.post("aws/config/rotate-root", json!({})).await;
    assert!(!rotated.status.is_success(), "{:?}", rotated.body);
    assert!(super::first_error(&rotated).contains(&old), "names the key left: {:?}", rotated.body);
    let stored = root.get("aws/config/root").await.body["data"]["access_key"].as_str().map(str::to_owned);
    assert_ne!(stored.as_deref(), Some(old.as_str()), "the new key is stored and used");
    assert_eq!(aws.access_keys(&user).await.len(), 2, "both keys exist");
    app.stop().await;
}
