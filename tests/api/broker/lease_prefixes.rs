//! Vault's lease surface beyond one lease id: `sys/leases/revoke-prefix/<prefix>` (whole segments,
//! `sync` or queued), `sys/leases/revoke-force/<prefix>` (the records go even where IAM fails),
//! `LIST sys/leases/lookup/<prefix>` (the next level of lease ids), all three root-protected
//! (`sudo`) as in Vault, and the leases of STS credentials, which lookup finds, renewal refuses
//! and revocation removes.

use serde_json::{json, Value};

use hangar_tests::Reply;

use super::{aws, broker, broker_on_moto, first_error, iam_user_role, Aws, Vault};

/// Issues iam_user credentials of `role` (`aws/creds/deploy`); returns the lease id.
async fn lease_of(vault: &Vault<'_>, creds: &str) -> String {
    let reply = vault.get(creds).await;
    assert_eq!(reply.status, 200, "{creds}: {:?}", reply.body);
    reply.body["lease_id"].as_str().expect("a lease id").to_owned()
}

async fn lookup_status(vault: &Vault<'_>, lease: &str) -> u16 {
    vault.post("sys/leases/lookup", json!({"lease_id": lease})).await.status.as_u16()
}

fn keys(reply: &Reply) -> Vec<String> {
    let keys = reply.body["data"]["keys"].as_array().unwrap_or_else(|| panic!("keys: {:?}", reply.body));
    keys.iter().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// The IAM users of two iam_user roles, `dev` and `dev2` (a name `dev` is a prefix of, which a
/// revocation of `aws/creds/dev` must leave alone), and their leases: (dev's, dev2's).
async fn dev_and_dev2(aws: &Aws, root: &Vault<'_>) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let mut made = Vec::new();
    for (role, count) in [("dev", 2), ("dev2", 1)] {
        let path = iam_user_role(root, &format!("aws/roles/{role}"), role).await;
        let mut leases = Vec::new();
        for _ in 0..count {
            leases.push(lease_of(root, &format!("aws/creds/{role}")).await);
        }
        let mut users = aws.users_under(&path).await;
        users.sort();
        assert_eq!(users.len(), count, "{users:?}");
        made.push(leases.into_iter().zip(users).collect::<Vec<_>>());
    }
    let dev2 = made.pop().expect("dev2");
    (made.pop().expect("dev"), dev2)
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_prefix_revokes_the_leases_under_it_whole_segments_only() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (dev, dev2) = dev_and_dev2(&aws, &root).await;

    let revoked = root.call("PUT", "sys/leases/revoke-prefix/aws/creds/dev", None).await;
    assert_eq!(revoked.status, 204, "synchronous by default, as Vault: {:?}", revoked.body);
    for (lease, user) in &dev {
        assert!(!aws.user_exists(user).await, "{user} of {lease} is deleted before the answer");
        assert_eq!(lookup_status(&root, lease).await, 400, "{lease} is gone");
    }
    let (lease, user) = &dev2[0];
    assert!(aws.user_exists(user).await, "aws/creds/dev2 is not under aws/creds/dev");
    assert_eq!(lookup_status(&root, lease).await, 200);

    let one = root.post(&format!("sys/leases/revoke-prefix/{lease}"), json!({})).await;
    assert_eq!(one.status, 204, "a lease's own id revokes that lease: {:?}", one.body);
    assert!(!aws.user_exists(user).await);
    let nothing = root.call("PUT", "sys/leases/revoke-prefix/aws/creds/nobody", None).await;
    assert_eq!(nothing.status, 204, "nothing under the prefix is no error: {:?}", nothing.body);
    app.stop().await;
}

/// The CLI's `lease revoke -prefix` sends `{"sync": false}` unless given `-sync`; Vault answers
/// 202, having queued the work.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_prefix_revocation_with_sync_false_is_accepted_and_done() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (dev, _) = dev_and_dev2(&aws, &root).await;
    let queued = root.call("PUT", "sys/leases/revoke-prefix/aws/creds/dev", Some(json!({"sync": false}))).await;
    assert_eq!(queued.status, 202, "{:?}", queued.body);
    for (lease, user) in &dev {
        assert!(!aws.user_exists(user).await, "{user}: revoked within the call while IAM answers");
        assert_eq!(lookup_status(&root, lease).await, 400);
    }
    let bad = root.call("PUT", "sys/leases/revoke-prefix/aws/creds/dev", Some(json!({"sync": "maybe"}))).await;
    assert_eq!(bad.status, 400, "{:?}", bad.body);
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn a_prefix_above_the_mounts_reaches_every_mount_below_it() {
    let aws = aws().await;
    let app = broker().await;
    let root = Vault::root(&app);
    let mut held = Vec::new();
    for mount in ["team/a", "team/b", "other"] {
        root.write(&format!("sys/mounts/{mount}"), json!({"type": "aws"})).await;
        aws.configure(&root, mount).await;
        let path = iam_user_role(&root, &format!("{mount}/roles/deploy"), "span").await;
        let lease = lease_of(&root, &format!("{mount}/creds/deploy")).await;
        held.push((mount, lease, aws.users_under(&path).await.pop().expect("a user")));
    }
    let listed = root.list("sys/leases/lookup/team").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    assert_eq!(keys(&listed), ["a/", "b/"]);

    let revoked = root.call("PUT", "sys/leases/revoke-prefix/team", None).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    for (mount, lease, user) in &held {
        let under = mount.starts_with("team/");
        assert_eq!(aws.user_exists(user).await, !under, "{mount}");
        assert_eq!(lookup_status(&root, lease).await, if under { 400 } else { 200 }, "{mount}");
    }
    let whole_mount = root.call("PUT", "sys/leases/revoke-prefix/other", None).await;
    assert_eq!(whole_mount.status, 204, "{:?}", whole_mount.body);
    assert!(!aws.user_exists(&held[2].2).await, "a mount's path reaches all its leases");
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn listing_lease_lookup_shows_the_next_level_of_lease_ids() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let (dev, _) = dev_and_dev2(&aws, &root).await;
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    let sts = root.post("aws/sts/session", json!({})).await;
    assert_eq!(sts.status, 200, "{:?}", sts.body);

    // `vault list sys/leases/lookup/aws/creds/dev` shows the lease ids' last segments.
    let listed = root.list("sys/leases/lookup/aws/creds/dev").await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let mut expected: Vec<String> =
        dev.iter().map(|(lease, _)| lease.rsplit('/').next().expect("a segment").to_owned()).collect();
    expected.sort();
    assert_eq!(keys(&listed), expected);
    let with_slash = root.get("sys/leases/lookup/aws/creds/dev/?list=true").await;
    assert_eq!(keys(&with_slash), expected, "GET ?list=true, with a trailing slash");

    assert_eq!(keys(&root.list("sys/leases/lookup/aws/creds").await), ["dev/", "dev2/"]);
    assert_eq!(keys(&root.list("sys/leases/lookup/aws").await), ["creds/", "sts/"]);
    assert_eq!(keys(&root.list("sys/leases/lookup/").await), ["aws/"]);
    assert_eq!(keys(&root.list("sys/leases/lookup").await), ["aws/"]);
    let none = root.list("sys/leases/lookup/aws/creds/de").await;
    assert_eq!(none.status, 404, "whole segments only; nothing is a 404 as Vault answers: {:?}", none.body);
    let not_a_list = root.get("sys/leases/lookup/aws/creds/dev").await;
    assert_eq!(not_a_list.status, 405, "{:?}", not_a_list.body);
    app.stop().await;
}

/// Vault keeps a lease for STS credentials: lookup answers, renewal is refused (they live as
/// long as AWS granted), revocation removes the record (AWS cannot revoke them).
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn sts_leases_are_looked_up_not_renewed_and_revoked() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    for path in ["aws/sts/session", "aws/creds/session"] {
        let issued = root.post(path, json!({"ttl": "15m"})).await;
        assert_eq!(issued.status, 200, "{path}: {:?}", issued.body);
        let lease = issued.body["lease_id"].as_str().expect("a lease id").to_owned();

        let lookup = root.post("sys/leases/lookup", json!({"lease_id": lease})).await;
        assert_eq!(lookup.status, 200, "{path}: {:?}", lookup.body);
        let data = &lookup.body["data"];
        assert_eq!(data["id"], lease.as_str());
        assert_eq!(data["renewable"], false);
        let ttl = data["ttl"].as_i64().expect("a ttl");
        assert!((890..=900).contains(&ttl), "{path}: {ttl}");

        let renewed = root.call("PUT", "sys/leases/renew", Some(json!({"lease_id": lease}))).await;
        assert_eq!(renewed.status, 400, "{path}: {:?}", renewed.body);
        assert_eq!(first_error(&renewed), "lease is not renewable");

        let revoked = root.call("PUT", "sys/leases/revoke", Some(json!({"lease_id": lease}))).await;
        assert_eq!(revoked.status, 204, "{path}: {:?}", revoked.body);
        assert_eq!(lookup_status(&root, &lease).await, 400, "{path}: the record is gone");
    }
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoking_a_token_removes_the_sts_leases_it_holds() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    root.policy("session", r#"path "aws/sts/session" { capabilities = ["update"] }"#).await;
    let secret = root.token(&["session"], "ci").await;
    let holder = Vault::new(&app, &secret);
    let issued = holder.post("aws/sts/session", json!({})).await;
    assert_eq!(issued.status, 200, "{:?}", issued.body);
    let lease = issued.body["lease_id"].as_str().expect("a lease id").to_owned();
    assert_eq!(lookup_status(&root, &lease).await, 200);
    let revoked = root.post("auth/token/revoke", json!({"token": secret})).await;
    assert_eq!(revoked.status, 204, "{:?}", revoked.body);
    assert_eq!(lookup_status(&root, &lease).await, 400, "the token's leases go with it");
    app.stop().await;
}

/// IAM unreachable: `revoke-prefix` answers the failure and keeps the lease (the job retries it);
/// `revoke-force` removes the lease all the same, leaving the IAM user to the operator.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn revoke_force_removes_leases_whose_revocation_fails() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let path = iam_user_role(&root, "aws/roles/dev", "force").await;
    let lease = lease_of(&root, "aws/creds/dev").await;
    let user = aws.users_under(&path).await.pop().expect("a user");
    let unreachable = json!({"access_key": "testing", "secret_key": "testing", "region": "us-east-1",
        "iam_endpoint": "http://127.0.0.1:9", "sts_endpoint": "http://127.0.0.1:9"});
    root.write("aws/config/root", unreachable).await;

    let failed = root.call("PUT", "sys/leases/revoke-prefix/aws/creds/dev", None).await;
    assert!(failed.status.is_server_error(), "{} {:?}", failed.status, failed.body);
    assert_eq!(lookup_status(&root, &lease).await, 200, "a failed revocation keeps the lease");

    let forced = root.call("PUT", "sys/leases/revoke-force/aws/creds/dev", None).await;
    assert_eq!(forced.status, 204, "{:?}", forced.body);
    assert_eq!(lookup_status(&root, &lease).await, 400, "forced: the lease is gone");
    assert!(aws.user_exists(&user).await, "and its user is left in IAM");
    aws.configure(&root, "aws").await;
    let _ = aws.iam.delete_user().user_name(&user).send().await;
    app.stop().await;
}

/// As in Vault, the three are root-protected: the operation's capability on the path is not
/// enough without `sudo` from the same rule; the root token always may.
#[tokio::test]
async fn only_root_or_a_policy_with_sudo_may_revoke_by_prefix_force_or_list() {
    let app = broker().await;
    let root = Vault::root(&app);
    root.policy(
        "without-sudo",
        r#"path "sys/leases/revoke-prefix/*" { capabilities = ["update"] }
path "sys/leases/revoke-force/*" { capabilities = ["update"] }
path "sys/leases/lookup/*" { capabilities = ["list"] }"#,
    )
    .await;
    root.policy(
        "with-sudo",
        r#"path "sys/leases/revoke-prefix/aws/*" { capabilities = ["update", "sudo"] }
path "sys/leases/revoke-force/aws/*" { capabilities = ["update", "sudo"] }
path "sys/leases/lookup/aws/*" { capabilities = ["list", "sudo"] }
path "sys/leases/revoke-force/aws/creds/prod*" { capabilities = ["update"] }"#,
    )
    .await;
    let without = root.token(&["without-sudo"], "plain").await;
    let with = root.token(&["with-sudo"], "admin").await;
    let requests = [
        ("PUT", "sys/leases/revoke-prefix/aws/creds/dev", 204),
        ("PUT", "sys/leases/revoke-force/aws/creds/dev", 204),
        ("LIST", "sys/leases/lookup/aws/creds/dev", 404),
    ];
    for (method, path, allowed) in requests {
        let caller = |token: &str| Vault::new(&app, token);
        assert_eq!(caller(&without).call(method, path, None).await.status, 403, "{method} {path} without sudo");
        assert_eq!(caller(&with).call(method, path, None).await.status, allowed, "{method} {path} with sudo");
        assert_eq!(root.call(method, path, None).await.status, allowed, "{method} {path} as root");
    }
    let narrower = Vault::new(&app, &with).call("PUT", "sys/leases/revoke-force/aws/creds/prod", None).await;
    assert_eq!(narrower.status, 403, "the exact rule decides, and it has no sudo: {:?}", narrower.body);
    let outside = Vault::new(&app, &with).call("PUT", "sys/leases/revoke-prefix/team", None).await;
    assert_eq!(outside.status, 403, "{:?}", outside.body);
    app.stop().await;
}
