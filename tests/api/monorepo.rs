//! Publishing several modules from one repository (`vcs-repo.source-directory` and
//! `vcs-repo.tag-prefix`), and the actions `permissions.can-resync` and `can-retry` advertise:
//! over HTTP, against the GitHub stand-in of `vcs_publishing`, whose `acme-corp/platform` holds
//! `modules/vpc`, `modules/dns` and `modules/leaky` (a symlink out of its folder), tagged
//! `vpc/…`, `dns-…` and `leaky/…`.

use hangar_tests::builders::{module, new_module, new_version};
use hangar_tests::{module_archive, targz, Entry};
use serde_json::{json, Value};

use crate::vcs_publishing::{
    fixture, hook_secret, main_tf, patch_body, sign, tag_push, Fixture, MONOREPO, PUBLISH, SHA_100, SHA_120,
};

const REPO: &str = "acme-corp/platform";
const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
const DNS: &str = "/api/v2/organizations/acme/registry-modules/private/acme/dns/aws";
const LEAKY: &str = "/api/v2/organizations/acme/registry-modules/private/acme/leaky/aws";

/// A publish request for one module of the monorepo, named in its attributes as HCP Terraform
/// takes a monorepo's modules.
fn monorepo_module(fx: &Fixture, name: &str, vcs_repo: Value) -> Value {
    let mut repo = json!({ "identifier": REPO, "oauth-token-id": fx.oauth_token, "display_identifier": REPO });
    for (key, value) in vcs_repo.as_object().expect("an object") {
        repo[key] = value.clone();
    }
    json!({"data": {"type": "registry-modules", "attributes": {"name": name, "provider": "aws", "vcs-repo": repo}}})
}

async fn publish(fx: &Fixture, name: &str, directory: &str, prefix: &str) -> Value {
    let body = monorepo_module(fx, name, json!({ "source-directory": directory, "tag-prefix": prefix }));
    let reply = fx.app.post(PUBLISH, &fx.owners, body).await;
    assert_eq!(reply.status, 201, "publishing {name}: {:?}", reply.body);
    reply.body["data"]["attributes"].clone()
}

/// `vpc` from `modules/vpc` (tags `vpc/…`) and `dns` from `modules/dns` (tags `dns-…`), settled.
async fn vpc_and_dns(fx: &Fixture) -> (Value, Value) {
    let vpc = publish(fx, "vpc", "modules/vpc", "vpc/").await;
    let dns = publish(fx, "dns", "modules/dns/", "dns-").await;
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    fx.versions(DNS, &[("2.0.0", "ok")]).await;
    (vpc, dns)
}

#[tokio::test]
async fn two_modules_of_one_repository_each_take_the_tags_of_their_own_prefix() {
    let fx = fixture().await;
    let (vpc, dns) = vpc_and_dns(&fx).await;
    assert_eq!((vpc["name"].as_str(), vpc["provider"].as_str()), (Some("vpc"), Some("aws")));
    assert_eq!(vpc["vcs-repo"]["source-directory"], "modules/vpc");
    assert_eq!(vpc["vcs-repo"]["tag-prefix"], "vpc/");
    assert_eq!(dns["vcs-repo"]["source-directory"], "modules/dns", "stored without its trailing /");
    assert_eq!(dns["vcs-repo"]["tag-prefix"], "dns-");
    // `v9.0.0` and `leaky/v1.0.0` belong to neither, so neither fetched them.
    let requests = fx.gh.requests();
    assert!(!requests.iter().any(|r| r.contains("/tarball/v9.0.0") || r.contains("/tarball/leaky")), "{requests:?}");
    // One repository, one webhook, shared by its modules.
    assert_eq!(fx.gh.hooks(REPO).len(), 1, "{:?}", fx.gh.hooks(REPO));
    assert_eq!(vpc["vcs-repo"]["webhook-url"], dns["vcs-repo"]["webhook-url"]);
}

#[tokio::test]
async fn a_source_directory_s_archive_holds_that_folder_and_nothing_else() {
    let fx = fixture().await;
    vpc_and_dns(&fx).await;
    let files = fx.download("vpc", "1.1.0").await;
    assert_eq!(files.keys().collect::<Vec<_>>(), ["README.md", "main.tf"], "only modules/vpc, at the root");
    assert_eq!(files["main.tf"], format!("# module vpc\n{}", main_tf("vpc/1.1.0")), "built from tag vpc/1.1.0");
    assert_eq!(files["README.md"], "# VPC\nThe network.\n", "the folder's README, not the repository's");
    let dns = fx.download("dns", "2.0.0").await;
    assert_eq!(dns.keys().collect::<Vec<_>>(), ["main.tf"]);
    assert_eq!(dns["main.tf"], format!("# module dns\n{}", main_tf("dns-v2.0.0")));
}

#[tokio::test]
async fn one_webhook_delivery_feeds_every_module_of_the_repository() {
    let fx = fixture().await;
    let (vpc, _) = vpc_and_dns(&fx).await;
    let webhook = vpc["vcs-repo"]["webhook-url"].as_str().unwrap().to_owned();
    let secret = hook_secret(&fx.gh, REPO);
    // The webhook was made when vpc was published; dns's tags arrive through it too.
    for (tag, added) in [("dns-v2.1.0", 202), ("vpc/v1.2.0", 202), ("v9.1.0", 200), ("dns-v2.1.0", 200)] {
        let body = tag_push(tag, SHA_120);
        assert_eq!(fx.delivery(&webhook, "push", &body, Some(&sign(&secret, &body))).await, added, "{tag}");
    }
    fx.versions(DNS, &[("2.0.0", "ok"), ("2.1.0", "ok")]).await;
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("1.2.0", "ok")]).await;
    assert_eq!(fx.download("dns", "2.1.0").await["main.tf"], format!("# module dns\n{}", main_tf("dns-v2.1.0")));
}

#[tokio::test]
async fn a_symlink_leaving_the_source_directory_fails_the_version_with_its_reason() {
    let fx = fixture().await;
    publish(&fx, "leaky", "modules/leaky", "leaky/").await;
    let settled = fx.versions(LEAKY, &[("1.0.0", "reg_ingress_failed")]).await;
    let error = settled["version-statuses"][0]["error"].as_str().expect("a reason");
    assert!(
        error.contains("symlink `vpc.tf` points outside the source directory `modules/leaky/`"),
        "the reason names the link and the folder: {error}"
    );
}

#[tokio::test]
async fn invalid_source_directories_prefixes_and_names_are_422_pointing_at_their_attribute() {
    let fx = fixture().await;
    let long_directory = "a/".repeat(200);
    let long_prefix = "p".repeat(129);
    let cases = [
        (json!({ "source-directory": "../secrets" }), "/data/attributes/vcs-repo/source-directory"),
        (json!({ "source-directory": "/etc" }), "/data/attributes/vcs-repo/source-directory"),
        (json!({ "source-directory": "modules//vpc" }), "/data/attributes/vcs-repo/source-directory"),
        (json!({ "source-directory": "modules/./vpc" }), "/data/attributes/vcs-repo/source-directory"),
        (json!({ "source-directory": long_directory }), "/data/attributes/vcs-repo/source-directory"),
        // Shown reversed: `modules/\u{202E}cpv` reads as another folder (Trojan Source).
        (json!({ "source-directory": "modules/\u{202E}cpv" }), "/data/attributes/vcs-repo/source-directory"),
        (json!({ "tag-prefix": "vpc\u{2066}" }), "/data/attributes/vcs-repo/tag-prefix"),
        (json!({ "tag-prefix": "vpc v" }), "/data/attributes/vcs-repo/tag-prefix"),
        (json!({ "tag-prefix": "a..b" }), "/data/attributes/vcs-repo/tag-prefix"),
        (json!({ "tag-prefix": long_prefix }), "/data/attributes/vcs-repo/tag-prefix"),
    ];
    for (repo, pointer) in &cases {
        let reply = fx.app.post(PUBLISH, &fx.owners, monorepo_module(&fx, "vpc", repo.clone())).await;
        assert_eq!(reply.status, 422, "{repo}: {:?}", reply.body);
        assert_eq!(reply.pointer(), *pointer, "{repo}");
    }
    // A monorepo's name says nothing: its modules need a name and a provider.
    let unnamed = json!({"data": {"type": "registry-modules", "attributes": {
        "vcs-repo": { "identifier": REPO, "oauth-token-id": fx.oauth_token, "display_identifier": REPO }}}});
    let reply = fx.app.post(PUBLISH, &fx.owners, unnamed).await;
    assert_eq!((reply.status.as_u16(), reply.pointer()), (422, "/data/attributes/vcs-repo/identifier"));
    let detail = reply.body["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("send the module's name and provider"), "{detail}");
    let nameless = json!({"data": {"type": "registry-modules", "attributes": { "provider": "aws",
        "vcs-repo": { "identifier": REPO, "oauth-token-id": fx.oauth_token, "display_identifier": REPO }}}});
    let reply = fx.app.post(PUBLISH, &fx.owners, nameless).await;
    assert_eq!((reply.status.as_u16(), reply.pointer()), (422, "/data/attributes/name"), "{:?}", reply.body);
    let badly_named = fx.app.post(PUBLISH, &fx.owners, monorepo_module(&fx, "Not A Name", json!({}))).await;
    assert_eq!((badly_named.status.as_u16(), badly_named.pointer()), (422, "/data/attributes/name"));
    assert_eq!(fx.app.get(VPC, &fx.owners).await.status, 404, "nothing was published");

    // The same rules hold for a PATCH.
    publish(&fx, "vpc", "modules/vpc", "vpc/").await;
    for (repo, pointer) in &cases {
        let reply = fx.app.patch(VPC, &fx.owners, patch_body(json!({ "vcs-repo": repo }))).await;
        assert_eq!(reply.status, 422, "{repo}: {:?}", reply.body);
        assert_eq!(reply.pointer(), *pointer, "{repo}");
    }
}

#[tokio::test]
async fn a_resync_reads_the_repository_s_tags_again_now() {
    let fx = fixture().await;
    let (vpc, _) = vpc_and_dns(&fx).await;
    assert_eq!(vpc["permissions"]["can-resync"], true, "owners may resync a VCS module");
    // A tag the webhook never announced.
    fx.gh.push_tag(MONOREPO, "vpc/v1.3.0", SHA_120);
    let tag_reads = || fx.gh.requests().iter().filter(|r| r.contains(&format!("/{MONOREPO}/tags"))).count();
    let before = tag_reads();

    let resync = format!("{VPC}/actions/resync");
    let (_, reader) = fx.app.team_with_token("acme", "readers", json!({})).await;
    assert_eq!(fx.app.post(&resync, &reader, json!({})).await.status, 404, "readers may not resync");
    let shown = fx.app.get(VPC, &reader).await;
    assert_eq!(shown.body["data"]["attributes"]["permissions"]["can-resync"], false);

    let reply = fx.app.post(&resync, &fx.owners, json!({})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["type"], "registry-modules");
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("1.3.0", "ok")]).await;
    assert!(tag_reads() > before, "the tags were read again");
    fx.versions(DNS, &[("2.0.0", "ok")]).await;

    // A module published by hand has nothing to resync.
    let created = fx.app.post("/api/v2/organizations/acme/registry-modules", &fx.owners, module("s3", "aws")).await;
    let permissions = &created.body["data"]["attributes"]["permissions"];
    // As HCP answers, and go-tfe's TestRegistryModulesCreate expects: what the owner may do.
    assert_eq!((&permissions["can-resync"], &permissions["can-retry"]), (&json!(true), &json!(true)));
    let s3 = "/api/v2/organizations/acme/registry-modules/private/acme/s3/aws/actions/resync";
    assert_eq!(fx.app.post(s3, &fx.owners, json!({})).await.status, 422);
}

#[tokio::test]
async fn a_failed_vcs_version_is_retried_after_its_settings_are_fixed() {
    let fx = fixture().await;
    publish(&fx, "leaky", "modules/leaky", "leaky/").await;
    let failed = fx.versions(LEAKY, &[("1.0.0", "reg_ingress_failed")]).await;
    assert_eq!(failed["permissions"]["can-retry"], true, "a module with a failed version may retry it");
    // Point the module at a folder without the escaping link, then retry the version.
    let patched =
        fx.app.patch(LEAKY, &fx.owners, patch_body(json!({ "vcs-repo": { "source-directory": "modules/dns" } })));
    let patched = patched.await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    assert_eq!(patched.body["data"]["attributes"]["vcs-repo"]["source-directory"], "modules/dns");

    let reply = fx.app.post(&format!("{LEAKY}/1.0.0/actions/retry"), &fx.owners, json!({})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["attributes"]["status"], "pending");
    // The repository's commit is fetched again: no upload link is a side door to the version.
    assert_eq!(reply.body["data"]["links"]["upload"], Value::Null, "{:?}", reply.body);
    let read = fx.app.get(&format!("{LEAKY}/version?module_version=1.0.0"), &fx.owners).await;
    assert_eq!(read.body["data"]["links"]["upload"], Value::Null, "{:?}", read.body);
    let settled = fx.versions(LEAKY, &[("1.0.0", "ok")]).await;
    assert_eq!(settled["permissions"]["can-retry"], true, "the flag says what the owner may do");
    let again = fx.app.post(&format!("{LEAKY}/1.0.0/actions/retry"), &fx.owners, json!({})).await;
    assert_eq!(again.status, 422, "an ok version is not retried: {:?}", again.body);
    // The version's commit, fetched again, with the folder now set.
    assert_eq!(fx.download("leaky", "1.0.0").await["main.tf"], format!("# module dns\n{}", main_tf(SHA_100)));
}

const BY_HAND: &str = "/api/v2/organizations/acme/registry-modules/private/acme/s3/aws";

#[tokio::test]
async fn a_failed_upload_is_retried_on_a_new_upload_link_without_deleting_anything() {
    let fx = fixture().await;
    let app = &fx.app;
    new_module(app, &fx.owners, "acme", "s3", "aws").await;
    let upload = new_version(app, &fx.owners, BY_HAND, "1.0.0").await;
    assert_eq!(app.upload(&upload, targz(&[Entry::File("./notes.txt", b"no module here")])).await, 200);
    let read = format!("{BY_HAND}/version?module_version=1.0.0");
    assert_eq!(app.settled(&read, &fx.owners).await.body["data"]["attributes"]["status"], "reg_ingress_failed");

    let retry = format!("{BY_HAND}/1.0.0/actions/retry");
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    assert_eq!(app.post(&retry, &reader, json!({})).await.status, 404, "readers may not retry");
    let reply = app.post(&retry, &fx.owners, json!({})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let again = reply.body["data"]["links"]["upload"].as_str().expect("a new upload link").to_owned();
    assert_ne!(again, upload);
    assert_eq!(app.post(&retry, &fx.owners, json!({})).await.status, 422, "a pending version is not failed");
    assert_eq!(app.upload(&again, module_archive()).await, 200);
    let settled = app.settled(&read, &fx.owners).await;
    assert_eq!(settled.body["data"]["attributes"]["status"], "ok", "{:?}", settled.body);
    assert_eq!(settled.body["data"]["attributes"]["error"], Value::Null);
    let module = app.get(BY_HAND, &fx.owners).await;
    assert_eq!(module.body["data"]["attributes"]["status"], "setup_complete");
    assert_eq!(app.post(&retry, &fx.owners, json!({})).await.status, 422, "an ok version is not retried");
    assert_eq!(app.post(&format!("{BY_HAND}/9.9.9/actions/retry"), &fx.owners, json!({})).await.status, 404);
}
