//! A version's lifecycle as HCP Terraform's "Manage module versions" sets it: deprecated
//! versions stay installable and carry their deprecation in the protocol's versions list;
//! revoked ones are not offered (out of the list, download refused) while the management API
//! still shows them; who may change it; what bad input gets.

use hangar::config::{Config, Edition};
use hangar_tests::builders::{acme_with, new_module, publish_version, version};
use hangar_tests::{module_archive, Reply, TestApp};
use serde_json::{json, Value};

const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
const V1: &str = "/api/registry/v1/modules/acme/vpc/aws";

fn deprecate(reason: &str, link: &str) -> Value {
    json!({"data": {"type": "module-versions", "attributes": {
        "deprecation": {"deprecated-status": "Deprecated", "reason": reason, "link": link}}}})
}

fn undeprecate() -> Value {
    json!({"data": {"type": "module-versions", "attributes": {"deprecation": {"deprecated-status": "Undeprecated"}}}})
}

fn revoke(message: &str, link: &str) -> Value {
    json!({"data": {"type": "module-versions", "attributes": {
        "revocation": {"status": "Revoked", "message": message, "link": link}}}})
}

fn unrevoke() -> Value {
    json!({"data": {"type": "module-versions", "attributes": {"revocation": {"status": "Unrevoked"}}}})
}

/// `acme`'s module vpc/aws with each of `versions` ingested (`ok`), on `config`.
async fn registry_on(config: Config, versions: &[&str]) -> (TestApp, String) {
    let (app, owners) = acme_with(config).await;
    new_module(&app, &owners, "acme", "vpc", "aws").await;
    for v in versions {
        let settled = publish_version(&app, &owners, VPC, v, module_archive()).await;
        assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "{:?}", settled.body);
    }
    (app, owners)
}

async fn registry(versions: &[&str]) -> (TestApp, String) {
    registry_on(Config::default(), versions).await
}

/// The versions the protocol offers, each with its `deprecation`.
async fn offered(app: &TestApp, token: &str) -> Vec<(String, Value)> {
    let listed = app.get(&format!("{V1}/versions"), token).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let versions = listed.body["modules"][0]["versions"].as_array().expect("versions").clone();
    versions.iter().map(|v| (v["version"].as_str().expect("a version").to_owned(), v["deprecation"].clone())).collect()
}

async fn patch(app: &TestApp, token: &str, version: &str, body: Value) -> Reply {
    app.patch(&format!("{VPC}/{version}"), token, body).await
}

#[tokio::test]
async fn a_deprecated_version_stays_offered_with_its_deprecation_until_reverted() {
    let (app, owners) = registry(&["1.0.0", "1.1.0"]).await;
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null), ("1.1.0".into(), Value::Null)]);

    let reply = patch(&app, &owners, "1.0.0", deprecate("Upgrade to 1.1.", "https://example.com/why")).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let data = &reply.body["data"];
    assert_eq!(data["type"], "registry-module-versions");
    assert_eq!(data["attributes"]["version"], "1.0.0");
    let deprecation = &data["attributes"]["deprecation"];
    assert_eq!(deprecation["deprecated-status"], "Deprecated");
    assert_eq!(deprecation["reason"], "Upgrade to 1.1.");
    assert_eq!(deprecation["link"], "https://example.com/why");
    assert_eq!(data["attributes"]["revocation"], Value::Null);
    // As HCP Terraform answers: the deprecation as a related, included resource.
    let related = &data["relationships"]["deprecation"]["data"];
    assert_eq!(related["type"], "deprecations");
    let included = &reply.body["included"][0];
    assert_eq!((&included["type"], &included["id"]), (&json!("deprecations"), &related["id"]));
    assert_eq!(included["attributes"], json!({"reason": "Upgrade to 1.1.", "link": "https://example.com/why"}));

    let expected = json!({"reason": "Upgrade to 1.1.", "link": "https://example.com/why"});
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), expected.clone()), ("1.1.0".into(), Value::Null)]);
    let detail = app.get(&format!("{V1}/1.0.0"), &owners).await;
    assert_eq!(detail.body["deprecation"], expected);
    assert_eq!(app.get(&format!("{V1}/1.0.0/download"), &owners).await.status, 204, "still installable");

    // Read back through the management API: the version and the module's statuses.
    let read = app.get(&format!("{VPC}/version?module_version=1.0.0"), &owners).await;
    assert_eq!(read.body["data"]["attributes"]["deprecation"]["reason"], "Upgrade to 1.1.");
    let module = app.get(VPC, &owners).await;
    let statuses = &module.body["data"]["attributes"]["version-statuses"];
    assert_eq!(statuses[0]["deprecation"]["reason"], "Upgrade to 1.1.");
    assert_eq!(statuses[1]["deprecation"], Value::Null);

    let reverted = patch(&app, &owners, "1.0.0", undeprecate()).await;
    assert_eq!(reverted.status, 200, "{:?}", reverted.body);
    assert_eq!(reverted.body["data"]["attributes"]["deprecation"], Value::Null);
    assert_eq!(reverted.body["data"]["relationships"]["deprecation"]["data"], Value::Null);
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null), ("1.1.0".into(), Value::Null)]);
}

#[tokio::test]
async fn deprecating_again_replaces_the_reason_and_reverting_twice_is_harmless() {
    let (app, owners) = registry(&["1.0.0"]).await;
    let first = patch(&app, &owners, "1.0.0", deprecate("first", "")).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["data"]["attributes"]["deprecation"]["link"], Value::Null, "an empty link is none");
    let second = patch(&app, &owners, "1.0.0", deprecate("second", "http://example.com")).await;
    assert_eq!(second.body["data"]["attributes"]["deprecation"]["reason"], "second");
    let first_at = &first.body["data"]["attributes"]["deprecation"]["deprecated-at"];
    assert_eq!(&second.body["data"]["attributes"]["deprecation"]["deprecated-at"], first_at, "still since the first");
    assert_eq!(offered(&app, &owners).await[0].1, json!({"reason": "second", "link": "http://example.com"}));
    for _ in 0..2 {
        assert_eq!(patch(&app, &owners, "1.0.0", undeprecate()).await.status, 200);
    }
    assert_eq!(offered(&app, &owners).await[0].1, Value::Null);
}

#[tokio::test]
async fn a_revoked_version_is_not_offered_but_still_shown_until_its_revocation_is_reverted() {
    let (app, owners) = registry(&["1.0.0", "1.1.0"]).await;
    let refused = patch(&app, &owners, "1.1.0", revoke("broken", "")).await;
    assert_eq!(refused.status, 422, "only a deprecated version can be revoked: {:?}", refused.body);
    assert_eq!(refused.pointer(), "/data/attributes/revocation/status");

    assert_eq!(patch(&app, &owners, "1.1.0", deprecate("broken", "")).await.status, 200);
    let revoked = patch(&app, &owners, "1.1.0", revoke("Leaks credentials.", "https://example.com/cve")).await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.body);
    let revocation = &revoked.body["data"]["attributes"]["revocation"];
    assert_eq!(revocation["status"], "Revoked");
    assert_eq!(revocation["message"], "Leaks credentials.");
    assert_eq!(revocation["link"], "https://example.com/cve");

    // Not offered: out of the list, its download and detail refused, no longer the latest.
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null)]);
    let download = app.get(&format!("{V1}/1.1.0/download"), &owners).await;
    assert_eq!(download.status, 410, "{:?}", download.body);
    let why = download.body["errors"][0].as_str().expect("the protocol's error format");
    assert!(why.contains("revoked") && why.contains("Leaks credentials."), "{why}");
    assert!(download.headers.get("x-terraform-get").is_none());
    assert_eq!(app.get(&format!("{V1}/1.1.0"), &owners).await.status, 410);
    let latest = app.get(V1, &owners).await;
    assert_eq!(latest.body["version"], "1.0.0", "{:?}", latest.body);
    assert_eq!(latest.body["versions"], json!(["1.0.0"]));
    let listed = app.get("/api/registry/v1/modules/acme", &owners).await;
    assert_eq!(listed.body["modules"][0]["version"], "1.0.0");

    // Still shown by the management API.
    let read = app.get(&format!("{VPC}/version?module_version=1.1.0"), &owners).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["data"]["attributes"]["revocation"]["message"], "Leaks credentials.");
    let module = app.get(VPC, &owners).await;
    assert_eq!(module.body["data"]["attributes"]["revoked-versions"], json!(["1.1.0"]));
    assert_eq!(module.body["data"]["attributes"]["version-statuses"][1]["revocation"]["status"], "Revoked");

    // A revoked version stays deprecated.
    let undeprecated = patch(&app, &owners, "1.1.0", undeprecate()).await;
    assert_eq!(undeprecated.status, 422, "{:?}", undeprecated.body);
    assert_eq!(undeprecated.pointer(), "/data/attributes/deprecation/deprecated-status");

    // Reverting the revocation offers it again, deprecated, and as the latest.
    let reverted = patch(&app, &owners, "1.1.0", unrevoke()).await;
    assert_eq!(reverted.status, 200, "{:?}", reverted.body);
    assert_eq!(reverted.body["data"]["attributes"]["revocation"], Value::Null);
    assert_eq!(reverted.body["data"]["attributes"]["deprecation"]["reason"], "broken");
    let deprecated = json!({"reason": "broken", "link": ""});
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null), ("1.1.0".into(), deprecated)]);
    assert_eq!(app.get(&format!("{V1}/1.1.0/download"), &owners).await.status, 204);
    assert_eq!(app.get(V1, &owners).await.body["version"], "1.1.0");
    let module = app.get(VPC, &owners).await;
    assert_eq!(module.body["data"]["attributes"]["revoked-versions"], json!([]));
}

#[tokio::test]
async fn revoking_the_only_version_leaves_nothing_to_install() {
    let (app, owners) = registry(&["1.0.0"]).await;
    assert_eq!(patch(&app, &owners, "1.0.0", deprecate("", "")).await.status, 200);
    assert_eq!(patch(&app, &owners, "1.0.0", revoke("", "")).await.status, 200);
    assert_eq!(app.get(&format!("{V1}/versions"), &owners).await.status, 404);
    assert_eq!(app.get(&format!("{V1}/download"), &owners).await.status, 404);
    assert_eq!(app.get("/api/registry/v1/modules/acme", &owners).await.body["modules"], json!([]));
    // A revoked version's download is not counted.
    assert_eq!(app.get(&format!("{V1}/1.0.0/download"), &owners).await.status, 410);
    assert_eq!(patch(&app, &owners, "1.0.0", unrevoke()).await.status, 200);
    assert_eq!(app.get(&format!("{V1}/1.0.0"), &owners).await.body["downloads"], 0);
}

#[tokio::test]
async fn deprecate_and_revoke_in_one_request_and_revert_both_in_one() {
    let (app, owners) = registry(&["1.0.0", "2.0.0"]).await;
    let both = json!({"data": {"type": "module-versions", "attributes": {
        "deprecation": {"deprecated-status": "Deprecated", "reason": "old"},
        "revocation": {"status": "Revoked", "message": "gone"}}}});
    assert_eq!(patch(&app, &owners, "2.0.0", both).await.status, 200);
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null)]);
    let neither = json!({"data": {"type": "module-versions", "attributes": {
        "deprecation": {"deprecated-status": "Undeprecated"}, "revocation": {"status": "Unrevoked"}}}});
    assert_eq!(patch(&app, &owners, "2.0.0", neither).await.status, 200);
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null), ("2.0.0".into(), Value::Null)]);
}

#[tokio::test]
async fn only_owners_and_module_managers_may_change_a_version_s_lifecycle() {
    let (app, owners) = registry(&["1.0.0"]).await;
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (_, managers) = app.team_with_token("acme", "modules", json!({"manage-modules": true})).await;
    app.create_organization("other").await;
    let outsider = app.owners_token("other").await;

    for token in [&reader, &outsider] {
        let refused = patch(&app, token, "1.0.0", deprecate("no", "")).await;
        assert_eq!(refused.status, 404, "{:?}", refused.body);
    }
    assert_eq!(offered(&app, &owners).await[0].1, Value::Null, "nothing changed");
    let unauthenticated = app.request(reqwest::Method::PATCH, &format!("{VPC}/1.0.0"), None, Some(undeprecate())).await;
    assert_eq!(unauthenticated.status, 401);

    assert_eq!(patch(&app, &managers, "1.0.0", deprecate("managed", "")).await.status, 200);
    assert_eq!(patch(&app, &managers, "1.0.0", revoke("managed", "")).await.status, 200);
    assert_eq!(patch(&app, &reader, "1.0.0", unrevoke()).await.status, 404);
    assert_eq!(patch(&app, &owners, "1.0.0", unrevoke()).await.status, 200);
    // Readers still see the lifecycle.
    let read = app.get(&format!("{VPC}/version?module_version=1.0.0"), &reader).await;
    assert_eq!(read.body["data"]["attributes"]["deprecation"]["reason"], "managed");
}

#[tokio::test]
async fn missing_versions_and_versions_without_an_archive_cannot_change() {
    let (app, owners) = registry(&["1.0.0"]).await;
    assert_eq!(patch(&app, &owners, "9.9.9", deprecate("x", "")).await.status, 404);
    let other = "/api/v2/organizations/acme/registry-modules/private/acme/nope/aws/1.0.0";
    assert_eq!(app.patch(other, &owners, deprecate("x", "")).await.status, 404);
    let public = "/api/v2/organizations/acme/registry-modules/public/hashicorp/vpc/aws/1.0.0";
    assert_eq!(app.patch(public, &owners, deprecate("x", "")).await.status, 404);

    assert_eq!(app.post(&format!("{VPC}/versions"), &owners, version("2.0.0")).await.status, 201);
    let pending = patch(&app, &owners, "2.0.0", deprecate("x", "")).await;
    assert_eq!(pending.status, 422, "{:?}", pending.body);
    assert_eq!(pending.pointer(), "/data/attributes/deprecation");
}

#[tokio::test]
async fn bad_lifecycle_requests_get_a_422_naming_the_member() {
    let (app, owners) = registry(&["1.0.0"]).await;
    let long = "x".repeat(1001);
    let long_link = format!("https://example.com/{}", "a".repeat(2048));
    let cases = [
        (json!({}), ""),
        (json!({"deprecation": {"deprecated-status": "Maybe"}}), "/data/attributes/deprecation/deprecated-status"),
        (json!({"deprecation": {"reason": "no status"}}), "/data/attributes/deprecation/deprecated-status"),
        (
            json!({"deprecation": {"deprecated-status": "Deprecated", "reason": long}}),
            "/data/attributes/deprecation/reason",
        ),
        (
            json!({"deprecation": {"deprecated-status": "Deprecated", "link": "javascript:alert(1)"}}),
            "/data/attributes/deprecation/link",
        ),
        (
            json!({"deprecation": {"deprecated-status": "Deprecated", "link": "/relative"}}),
            "/data/attributes/deprecation/link",
        ),
        (
            json!({"deprecation": {"deprecated-status": "Deprecated", "link": long_link}}),
            "/data/attributes/deprecation/link",
        ),
        (json!({"revocation": {"status": "Gone"}}), "/data/attributes/revocation/status"),
        (json!({"revocation": {"status": "Revoked", "link": "ftp://example.com"}}), "/data/attributes/revocation/link"),
        (json!({"deprecation": {"deprecated-status": 3}}), "/data/attributes/deprecation/deprecated-status"),
        (json!({"deprecation": "Deprecated"}), "/data/attributes/deprecation"),
    ];
    for (attributes, pointer) in cases {
        let body = json!({"data": {"type": "module-versions", "attributes": attributes}});
        let reply = patch(&app, &owners, "1.0.0", body).await;
        assert_eq!(reply.status, 422, "{attributes}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{attributes}: {:?}", reply.body);
        assert!(reply.body["errors"][0]["detail"].as_str().is_some_and(|d| !d.is_empty()));
    }
    let wrong_type = json!({"data": {"type": "registry-modules", "attributes": {"deprecation": {"deprecated-status": "Deprecated"}}}});
    assert_eq!(patch(&app, &owners, "1.0.0", wrong_type).await.status, 422);
    assert_eq!(offered(&app, &owners).await[0].1, Value::Null, "nothing changed");
    // The version's path still cannot be read.
    assert_eq!(app.get(&format!("{VPC}/1.0.0"), &owners).await.status, 404);
}

#[tokio::test]
async fn the_self_hosted_edition_deprecates_but_does_not_revoke() {
    let config = Config { edition: Edition::SelfHosted, ..Config::default() };
    let (app, owners) = registry_on(config, &["1.0.0"]).await;
    assert_eq!(patch(&app, &owners, "1.0.0", deprecate("old", "")).await.status, 200);
    let refused = patch(&app, &owners, "1.0.0", revoke("gone", "")).await;
    assert_eq!(refused.status, 403, "{:?}", refused.body);
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), json!({"reason": "old", "link": ""}))]);
}

#[tokio::test]
async fn concurrent_lifecycle_changes_are_each_applied_once() {
    let (app, owners) = registry(&["1.0.0", "1.1.0", "1.2.0"]).await;
    let changes = ["1.0.0", "1.1.0", "1.2.0"].map(|v| {
        let app = &app;
        let owners = &owners;
        async move { patch(app, owners, v, deprecate(&format!("reason {v}"), "")).await }
    });
    for reply in futures::future::join_all(changes).await {
        assert_eq!(reply.status, 200, "{:?}", reply.body);
    }
    let both = ["1.1.0", "1.2.0"].map(|v| {
        let app = &app;
        let owners = &owners;
        async move { patch(app, owners, v, revoke("gone", "")).await }
    });
    for reply in futures::future::join_all(both).await {
        assert_eq!(reply.status, 200, "{:?}", reply.body);
    }
    // Both revocations moved the module's latest version; neither undid the other.
    let module = app.get(VPC, &owners).await;
    assert_eq!(module.body["data"]["attributes"]["revoked-versions"], json!(["1.1.0", "1.2.0"]));
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), json!({"reason": "reason 1.0.0", "link": ""}))]);
    assert_eq!(app.get(V1, &owners).await.body["version"], "1.0.0");
    for v in ["1.1.0", "1.2.0"] {
        let read = app.get(&format!("{VPC}/version?module_version={v}"), &owners).await;
        assert_eq!(read.body["data"]["attributes"]["deprecation"]["reason"], format!("reason {v}"));
    }
}

/// On DynamoDB (the emulator), where the conditional writes (on the lifecycle revision, on the
/// module's revision) and the download count's "not revoked" check are DynamoDB expressions
/// rather than the SQLite adapter's evaluation.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn deprecating_and_revoking_a_version_work_on_dynamodb() {
    let app = hangar_tests::spawn_on_dynamodb().await;
    let owners = app.admin_token.clone();
    app.create_organization("acme").await;
    new_module(&app, &owners, "acme", "vpc", "aws").await;
    for v in ["1.0.0", "1.1.0"] {
        let settled = publish_version(&app, &owners, VPC, v, module_archive()).await;
        assert_eq!(settled.body["data"]["attributes"]["status"], "ok");
    }
    assert_eq!(app.get(&format!("{V1}/1.1.0/download"), &owners).await.status, 204, "a version never changed counts");
    assert_eq!(patch(&app, &owners, "1.1.0", deprecate("old", "")).await.status, 200);
    assert_eq!(patch(&app, &owners, "1.1.0", revoke("gone", "")).await.status, 200);
    assert_eq!(offered(&app, &owners).await, [("1.0.0".into(), Value::Null)]);
    assert_eq!(app.get(&format!("{V1}/1.1.0/download"), &owners).await.status, 410);
    assert_eq!(app.get(V1, &owners).await.body["version"], "1.0.0");
    assert_eq!(patch(&app, &owners, "1.1.0", unrevoke()).await.status, 200);
    assert_eq!(app.get(&format!("{V1}/1.1.0/download"), &owners).await.status, 204);
    let detail = app.get(&format!("{V1}/1.1.0"), &owners).await;
    assert_eq!(detail.body["deprecation"], json!({"reason": "old", "link": ""}));
    assert_eq!(detail.body["downloads"], 2, "the refused download was not counted");
    app.stop().await;
}
