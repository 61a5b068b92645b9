//! Credentials' lifetimes and names, as AWS bounds them and Vault sends them: STS durations are
//! refused outside what each call grants (never wrapped), the lease is the lifetime STS reported,
//! names are checked before any AWS call, an STS role's `iam_groups` add their policies to the
//! session, and creds/ and sts/ answer a request alike. What STS was sent is read from a
//! recording endpoint standing in for it.

use hangar_tests::aws_proxy::{AwsProxy, Fault};
use serde_json::{json, Value};

use super::{broker, broker_on_moto, first_error, suffix, Vault, ACCOUNT, DOCUMENT};

/// A stand-in for STS: a proxy that records every request and answers the three STS calls with
/// credentials expiring `lifetime` seconds from now; anything else goes to an address that
/// refuses it.
async fn sts_stand_in(lifetime: i64) -> AwsProxy {
    let proxy = AwsProxy::start("http://127.0.0.1:1").await;
    for action in ["AssumeRole", "GetFederationToken", "GetSessionToken"] {
        proxy.inject(action, Fault::Respond { status: 200, body: answer(action, lifetime) });
    }
    proxy
}

/// The value of `key` in the last request the proxy saw.
fn last(proxy: &AwsProxy, key: &str) -> Option<String> {
    proxy.all_calls().last()?.params.get(key).cloned()
}

fn answer(action: &str, lifetime: i64) -> String {
    let expiration = chrono::Utc::now() + chrono::Duration::seconds(lifetime);
    let credentials = format!(
        "<Credentials><AccessKeyId>ASIARECORDED</AccessKeyId><SecretAccessKey>recorded-secret</SecretAccessKey>\
         <SessionToken>recorded-token</SessionToken><Expiration>{}</Expiration></Credentials>",
        expiration.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let user = match action {
        "AssumeRole" => {
            "<AssumedRoleUser><AssumedRoleId>AROA:s</AssumedRoleId>\
             <Arn>arn:aws:sts::123456789012:assumed-role/recorded/s</Arn></AssumedRoleUser>"
        }
        "GetFederationToken" => {
            "<FederatedUser><FederatedUserId>123456789012:f</FederatedUserId>\
             <Arn>arn:aws:sts::123456789012:federated-user/f</Arn></FederatedUser>"
        }
        _ => "",
    };
    format!(
        "<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{action}Result>{credentials}{user}\
         </{action}Result><ResponseMetadata><RequestId>recorded</RequestId></ResponseMetadata></{action}Response>"
    )
}

/// Points the `aws` mount's IAM at `iam` and its STS at `sts`.
async fn point(root: &Vault<'_>, iam: &str, sts: &str, extra: Value) {
    let mut body = json!({
        "access_key": hangar_tests::moto::ACCESS_KEY,
        "secret_key": hangar_tests::moto::SECRET_KEY,
        "region": hangar_tests::moto::REGION,
        "iam_endpoint": iam,
        "sts_endpoint": sts,
        "max_retries": 0,
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    root.write("aws/config/root", body).await;
}

fn role_arn(label: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/hangar-{label}-{}", suffix())
}

// ----- lifetimes -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn an_sts_ttl_outside_what_aws_grants_is_a_400_and_never_wraps() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/assume", json!({"credential_type": "assumed_role", "role_arns": role_arn("ttl")})).await;
    root.write("aws/roles/federated", json!({"credential_type": "federation_token", "policy_document": DOCUMENT}))
        .await;
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;

    for (role, ttl) in [
        ("assume", json!(4_294_970_896_u64)),
        ("assume", json!(2_147_483_648_u64)),
        ("assume", json!("12h1s")),
        ("assume", json!(899)),
        ("federated", json!("36h1s")),
        ("federated", json!(4_294_970_896_u64)),
        ("session", json!(2_147_483_648_u64)),
        ("session", json!("14m59s")),
    ] {
        let reply = root.post(&format!("aws/sts/{role}"), json!({"ttl": ttl})).await;
        assert_eq!(reply.status, 400, "{role} ttl={ttl}: {:?}", reply.body);
        assert!(first_error(&reply).contains("ttl"), "{role} ttl={ttl}: {:?}", reply.body);
    }
    for (role, ttl, expected) in [("assume", "12h", 43_200), ("federated", "36h", 129_600), ("session", "15m", 900)] {
        let reply = root.post(&format!("aws/sts/{role}"), json!({"ttl": ttl})).await;
        assert_eq!(reply.status, 200, "{role} ttl={ttl}: {:?}", reply.body);
        assert_eq!(reply.body["lease_duration"], expected, "{role} ttl={ttl}");
        assert_eq!(reply.body["data"]["ttl"], expected, "{role} ttl={ttl}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_lease_is_the_lifetime_sts_reported_and_sts_got_the_duration_asked() {
    let app = broker().await;
    let root = Vault::root(&app);
    // STS grants 15 minutes whatever it is asked, as it does for a role whose own maximum is lower.
    let sts = sts_stand_in(900).await;
    point(&root, &sts.endpoint, &sts.endpoint, json!({})).await;
    root.write(
        "aws/roles/assume",
        json!({"credential_type": "assumed_role", "role_arns": role_arn("granted"), "max_sts_ttl": "2h"}),
    )
    .await;
    let reply = root.post("aws/sts/assume", json!({"ttl": "3h"})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(last(&sts, "DurationSeconds").as_deref(), Some("7200"), "capped by max_sts_ttl as Vault caps it");
    let lease = reply.body["lease_duration"].as_u64().expect("a lease duration");
    assert!((895..=900).contains(&lease), "the lease is what STS granted, not what was asked: {lease}");
    assert_eq!(reply.body["data"]["ttl"], lease);
    app.stop().await;
}

// ----- names -----

#[tokio::test]
async fn empty_or_invalid_names_are_a_400_before_any_aws_call() {
    let app = broker().await;
    let root = Vault::root(&app);
    let aws = sts_stand_in(3600).await;
    root.write("aws/roles/user", json!({"credential_type": "iam_user", "policy_document": DOCUMENT})).await;
    root.write("aws/roles/federated", json!({"credential_type": "federation_token", "policy_document": DOCUMENT}))
        .await;
    root.write("aws/roles/assume", json!({"credential_type": "assumed_role", "role_arns": role_arn("names")})).await;

    // A template rendering nothing for IAM, and one character for STS.
    let template = r#"{{ if (eq .Type "STS") }}f{{ end }}"#;
    point(&root, &aws.endpoint, &aws.endpoint, json!({"username_template": template})).await;
    for path in ["aws/creds/user", "aws/sts/federated", "aws/sts/assume"] {
        let reply = root.post(path, json!({})).await;
        assert_eq!(reply.status, 400, "{path}: {:?}", reply.body);
        assert!(first_error(&reply).contains("name"), "{path}: {:?}", reply.body);
    }
    for session in ["a".to_owned(), "s".repeat(65)] {
        let reply = root.post("aws/sts/assume", json!({"role_session_name": session})).await;
        assert_eq!(reply.status, 400, "{session}: {:?}", reply.body);
    }
    assert!(aws.all_calls().is_empty(), "AWS was called: {:?}", aws.all_calls());

    for name in ["-lead", "trail.", "sp ace", "a@b@"] {
        let reply = root.post(&format!("aws/roles/{name}"), json!({"credential_type": "session_token"})).await;
        assert_eq!(reply.status, 400, "role name {name:?}: {:?}", reply.body);
    }
    root.write("aws/roles/a", json!({"credential_type": "session_token"})).await;
    root.write("aws/roles/team.ci@example-1", json!({"credential_type": "session_token"})).await;
    app.stop().await;
}

// ----- iam_groups -----

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn iam_groups_of_sts_roles_add_their_inline_and_managed_policies_to_the_session() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    let group = format!("hangar-sts-{}", suffix());
    aws.create_group(&group).await;
    let inline = r#"{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}}"#;
    aws.iam
        .put_group_policy()
        .group_name(&group)
        .policy_name("inline")
        .policy_document(inline)
        .send()
        .await
        .expect("PutGroupPolicy");
    let managed = aws.create_policy(&format!("hangar-sts-{}", suffix())).await;
    aws.iam.attach_group_policy().group_name(&group).policy_arn(&managed).send().await.expect("AttachGroupPolicy");
    let own = aws.create_policy(&format!("hangar-own-{}", suffix())).await;

    let sts = sts_stand_in(3600).await;
    point(&root, &aws.endpoint, &sts.endpoint, json!({})).await;
    root.write(
        "aws/roles/assume",
        json!({"credential_type": "assumed_role", "role_arns": role_arn("groups"), "policy_document": DOCUMENT,
               "policy_arns": [own], "iam_groups": [group]}),
    )
    .await;
    root.write(
        "aws/roles/federated",
        json!({"credential_type": "federation_token", "policy_document": DOCUMENT, "iam_groups": [group]}),
    )
    .await;
    for path in ["aws/sts/assume", "aws/sts/federated"] {
        let reply = root.post(path, json!({})).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        let policy: Value = serde_json::from_str(&last(&sts, "Policy").expect("a session policy")).expect("JSON");
        let statements = policy["Statement"].as_array().expect("a statement list");
        let actions: Vec<&Value> = statements.iter().map(|s| &s["Action"]).collect();
        assert_eq!(actions, [&json!("sqs:SendMessage"), &json!("s3:GetObject")], "{path}: {policy}");
        assert_eq!(policy["Version"], "2012-10-17");
        let arns: Vec<String> = (1..=3).filter_map(|n| last(&sts, &format!("PolicyArns.member.{n}.arn"))).collect();
        let expected =
            if path.ends_with("assume") { vec![own.clone(), managed.clone()] } else { vec![managed.clone()] };
        assert_eq!(arns, expected, "{path}");
    }
    app.stop().await;
}

// ----- Vault's conventions -----

fn is_uuid_v4(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    let lengths: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    lengths == [8, 4, 4, 4, 12]
        && id.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
        && parts[2].starts_with('4')
        && parts[3].starts_with(['8', '9', 'a', 'b'])
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn request_ids_are_uuids_and_role_session_names_are_normalised_as_vault_does() {
    let (_, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    for _ in 0..8 {
        let reply = root.get("aws/config/lease").await;
        let id = reply.body["request_id"].as_str().expect("a request id");
        assert!(is_uuid_v4(id), "{id}");
    }
    let arn = role_arn("session");
    root.write("aws/roles/assume", json!({"credential_type": "assumed_role", "role_arns": arn})).await;
    let reply = root.post("aws/sts/assume", json!({"role_session_name": "ci job/42 (nightly)"})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let assumed = reply.body["data"]["arn"].as_str().expect("an arn");
    assert!(assumed.ends_with("/ci_job_42__nightly_"), "{assumed}");
    assert!(is_uuid_v4(reply.body["request_id"].as_str().expect("a request id")));
    app.stop().await;
}

#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn mfa_code_needs_a_serial_and_creds_and_sts_answer_a_request_alike() {
    let (aws, app) = broker_on_moto().await;
    let root = Vault::root(&app);
    root.write("aws/roles/session", json!({"credential_type": "session_token"})).await;
    for path in ["aws/creds/session", "aws/sts/session"] {
        let reply = root.post(path, json!({"mfa_code": "123456"})).await;
        assert_eq!(reply.status, 400, "{path}: {:?}", reply.body);
        assert!(first_error(&reply).contains("mfa_serial_number"), "{path}: {:?}", reply.body);
    }

    // Vault ignores a ttl for an iam_user role (it parses it, so a bad one is refused), on both paths.
    let path = format!("/hangar-sts-{}/", suffix());
    root.write(
        "aws/roles/user",
        json!({"credential_type": "iam_user", "policy_document": DOCUMENT, "user_path": path}),
    )
    .await;
    for via in ["creds", "sts"] {
        let reply = root.post(&format!("aws/{via}/user"), json!({"ttl": "15m"})).await;
        assert_eq!(reply.status, 200, "{via}: {:?}", reply.body);
        assert_eq!(reply.body["renewable"], true, "{via}");
        let lease = reply.body["lease_id"].as_str().expect("a lease").to_owned();
        root.write("sys/leases/revoke", json!({"lease_id": lease})).await;
        let bad = root.post(&format!("aws/{via}/user"), json!({"ttl": "soon"})).await;
        assert_eq!(bad.status, 400, "{via}: {:?}", bad.body);
    }
    assert!(aws.users_under(&path).await.is_empty(), "the revoked users are gone");
    app.stop().await;
}
