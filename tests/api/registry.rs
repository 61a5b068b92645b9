//! The registry management API over HTTP: every row of the spec's error table, the upload and
//! ingest path with hostile archives, the delete cascade, deprecated endpoints, concurrency.

use hangar::archive::ArchiveLimits;
use hangar::config::{Config, Edition};
use hangar_tests::builders::{acme, acme_on_dynamodb, private_module, public_module, publish_version, version};
use hangar_tests::{module_archive, targz, Entry, Reply, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const MODULES: &str = "/api/v2/organizations/acme/registry-modules";
const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";

fn statuses(module: &Reply) -> Vec<(String, String)> {
    module.body["data"]["attributes"]["version-statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["version"].as_str().unwrap().to_owned(), s["status"].as_str().unwrap().to_owned()))
        .collect()
}

#[tokio::test]
async fn create_get_by_address_by_id_and_list_return_one_identical_object() {
    let (app, owners) = acme().await;
    let created = app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let data = &created.body["data"];
    assert_eq!(data["type"], "registry-modules");
    assert!(data["id"].as_str().unwrap().starts_with("mod-"));
    let attributes = &data["attributes"];
    assert_eq!(attributes["namespace"], "acme");
    assert_eq!(attributes["registry-name"], "private");
    assert_eq!(attributes["status"], "pending");
    assert_eq!(attributes["version-statuses"], json!([]));
    assert_eq!(attributes["no-code"], false);
    assert_eq!(attributes["permissions"]["can-delete"], true);
    assert!(
        attributes["created-at"].as_str().unwrap().ends_with('Z')
            && attributes["created-at"].as_str().unwrap().contains('.')
    );
    assert_eq!(data["relationships"]["organization"]["data"], json!({"id": "acme", "type": "organizations"}));
    assert_eq!(data["links"]["self"], "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws");

    let by_address = app.get(VPC, &owners).await;
    let by_id = app.get(&format!("/api/v2/registry-modules/{}", data["id"].as_str().unwrap()), &owners).await;
    let listed = app.get(MODULES, &owners).await;
    assert_eq!(&by_address.body["data"], data);
    assert_eq!(&by_id.body["data"], data);
    assert_eq!(&listed.body["data"][0], data);
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
}

#[tokio::test]
async fn create_rules_each_point_at_their_attribute() {
    let (app, owners) = acme().await;
    let attrs = |a: Value| json!({"data": {"type": "registry-modules", "attributes": a}});
    let cases = [
        (attrs(json!({"name": "-vpc", "provider": "aws"})), "/data/attributes/name"),
        (attrs(json!({"name": "a".repeat(65), "provider": "aws"})), "/data/attributes/name"),
        (attrs(json!({"provider": "aws"})), "/data/attributes/name"),
        (attrs(json!({"name": "vpc", "provider": "AWS"})), "/data/attributes/provider"),
        (attrs(json!({"name": "vpc", "provider": "a".repeat(65)})), "/data/attributes/provider"),
        (attrs(json!({"name": "vpc", "provider": "aws", "namespace": "other"})), "/data/attributes/namespace"),
        (attrs(json!({"name": "vpc", "provider": "aws", "registry-name": "public"})), "/data/attributes/namespace"),
        (
            attrs(json!({"name": "vpc", "provider": "aws", "registry-name": "elsewhere"})),
            "/data/attributes/registry-name",
        ),
        (attrs(json!({"name": "vpc", "provider": "aws", "no-code": "yes"})), "/data/attributes/no-code"),
        (json!({"data": {"type": "workspaces", "attributes": {"name": "vpc", "provider": "aws"}}}), "/data/type"),
    ];
    for (body, pointer) in cases {
        let reply = app.post(MODULES, &owners, body.clone()).await;
        assert_eq!(reply.status, 422, "{body}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{body}");
    }
    // `registry-name` omitted means private (older clients omit it); no-code is kept.
    let legacy = attrs(json!({"name": "vpc", "provider": "aws", "no-code": true}));
    let created = app.post(MODULES, &owners, legacy).await;
    assert_eq!(created.status, 201);
    assert_eq!(created.body["data"]["attributes"]["registry-name"], "private");
    assert_eq!(created.body["data"]["attributes"]["no-code"], true);
    let again = app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    assert_eq!(again.status, 422, "an address that exists");
    assert_eq!(
        app.post(MODULES, &owners, private_module("vpc", "google")).await.status,
        201,
        "another provider is another module"
    );
}

#[tokio::test]
async fn public_modules_are_curated_records_without_versions() {
    let (app, owners) = acme().await;
    let created = app.post(MODULES, &owners, public_module("terraform-aws-modules", "vpc", "aws")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["attributes"]["namespace"], "terraform-aws-modules");
    assert_eq!(created.body["data"]["attributes"]["registry-name"], "public");
    let public = "/api/v2/organizations/acme/registry-modules/public/terraform-aws-modules/vpc/aws";
    assert_eq!(app.get(public, &owners).await.status, 200);

    let version_reply = app.post(&format!("{public}/versions"), &owners, version("1.0.0")).await;
    assert_eq!(version_reply.status, 403, "versions of a public module");
    let patch = json!({"data": {"type": "registry-modules", "attributes": {"no-code": true}}});
    let patched = app.patch(public, &owners, patch.clone()).await;
    assert_eq!(patched.status, 403, "a curated module exists but has no settings: {:?}", patched.body);
    assert_eq!(patched.body["errors"][0]["detail"], "Public modules have no settings to update.");
    assert_eq!(app.delete(&format!("{public}/1.0.0"), &owners).await.status, 404);
    assert_eq!(app.delete(public, &owners).await.status, 404, "only the by-name form deletes a public module");
    let by_name = "/api/v2/organizations/acme/registry-modules/public/terraform-aws-modules/vpc";
    assert_eq!(app.delete(by_name, &owners).await.status, 204);
    assert_eq!(app.get(public, &owners).await.status, 404);
    assert_eq!(app.patch(public, &owners, patch).await.status, 404, "a module that is not there");
}

#[tokio::test]
async fn the_self_hosted_edition_refuses_public_curation_with_403() {
    let (app, owners) =
        TestApp::spawn_with_organization(Config { edition: Edition::SelfHosted, ..Config::default() }, "acme").await;
    let reply = app.post(MODULES, &owners, public_module("hashicorp", "consul", "aws")).await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.body["errors"][0]["detail"], "public module curation is disabled");
    let public = "/api/v2/organizations/acme/registry-modules/public/hashicorp/consul/aws";
    assert_eq!(app.get(public, &owners).await.status, 403);
    assert_eq!(
        app.delete("/api/v2/organizations/acme/registry-modules/public/hashicorp/consul", &owners).await.status,
        403
    );
    assert_eq!(
        app.post(MODULES, &owners, private_module("vpc", "aws")).await.status,
        201,
        "private modules still work"
    );
}

#[tokio::test]
async fn a_version_is_created_pending_uploaded_without_a_token_and_becomes_ok() {
    let (app, owners) = acme().await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    let created = app.post(&format!("{VPC}/versions"), &owners, version("1.2.3-alpha+feature")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let data = &created.body["data"];
    assert_eq!(data["type"], "registry-module-versions");
    assert!(data["id"].as_str().unwrap().starts_with("modver-"));
    assert_eq!(data["attributes"]["status"], "pending");
    assert_eq!(data["attributes"]["source"], "tfe-api");
    assert_eq!(data["attributes"]["version"], "1.2.3-alpha+feature");
    let module_id = app.get(VPC, &owners).await.body["data"]["id"].clone();
    assert_eq!(data["relationships"]["registry-module"]["data"], json!({"id": module_id, "type": "registry-modules"}));
    let upload = data["links"]["upload"].as_str().unwrap().to_owned();
    assert!(upload.contains("/upload/"), "{upload}");
    assert_eq!(statuses(&app.get(VPC, &owners).await), [("1.2.3-alpha+feature".into(), "pending".into())]);

    // The link carries no token, and a token sent along changes nothing.
    let sent = app
        .client
        .put(&upload)
        .bearer_auth("whatever")
        .header("Content-Type", "application/octet-stream")
        .body(module_archive())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200);
    settled(&app, &owners, "1.2.3-alpha%2Bfeature").await;
    let module_after = app.get(VPC, &owners).await;
    assert_eq!(module_after.body["data"]["attributes"]["status"], "setup_complete");
    assert_eq!(statuses(&module_after), [("1.2.3-alpha+feature".into(), "ok".into())]);
    let read = app.get(&format!("{VPC}/version?module_version=1.2.3-alpha%2Bfeature"), &owners).await;
    assert_eq!(read.body["data"]["attributes"]["status"], "ok");
    assert_eq!(read.body["data"]["links"]["upload"], Value::Null, "no upload link once it has its archive");

    assert_eq!(app.upload(&upload, module_archive()).await, 409, "a second upload to an ok version is refused");
    let again = app.post(&format!("{VPC}/versions"), &owners, version("1.2.3-alpha+feature")).await;
    assert_eq!(again.status, 422);
    assert_eq!(again.pointer(), "/data/attributes/version");
    let bad = app.post(&format!("{VPC}/versions"), &owners, version("1.2")).await;
    assert_eq!(bad.status, 422);
    assert_eq!(
        app.post(&format!("{VPC}/versions"), &owners, json!({"data": {"type": "registry-module-versions"}}))
            .await
            .status,
        422
    );
}

#[tokio::test]
async fn hostile_archives_each_end_in_a_failed_version_with_a_reason() {
    // A small uncompressed limit keeps the gzip bomb quick in a debug build; the inspector's
    // own tests run one past the default 500 MiB.
    let limits = ArchiveLimits { max_uncompressed_bytes: 8 << 20, ..ArchiveLimits::default() };
    let (app, owners) =
        TestApp::spawn_with_organization(Config { archive_limits: limits, ..Config::default() }, "acme").await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    {
        let mut builder = tar::Builder::new(&mut bomb);
        let mut header = tar::Header::new_gnu();
        header.set_path("main.tf").unwrap();
        header.set_size(64 << 20);
        header.set_cksum();
        builder.append(&header, std::io::Read::take(std::io::repeat(b' '), 64 << 20)).unwrap();
        builder.finish().unwrap();
    }
    let bomb = bomb.finish().unwrap();
    let valid = module_archive();
    let corpus: Vec<(&str, Vec<u8>)> = vec![
        ("traversal", targz(&[Entry::File("../evil.tf", b"x"), Entry::File("main.tf", b"")])),
        ("absolute path", targz(&[Entry::File("/etc/evil.tf", b"x")])),
        (
            "symlink escape",
            targz(&[
                ok_tf_entry(),
                Entry::Raw { name: "link", kind: tar::EntryType::Symlink, link: Some("../../etc/passwd") },
            ]),
        ),
        (
            "hard link escape",
            targz(&[ok_tf_entry(), Entry::Raw { name: "hard", kind: tar::EntryType::Link, link: Some("../outside") }]),
        ),
        ("device file", targz(&[ok_tf_entry(), Entry::Raw { name: "dev", kind: tar::EntryType::Char, link: None }])),
        ("gzip bomb", bomb),
        ("truncated gzip", valid[..valid.len() / 2].to_vec()),
        ("not gzip", b"just some text, not an archive".to_vec()),
        ("empty archive", targz(&[])),
        ("subdirectory only", targz(&[Entry::File("terraform-aws-vpc/main.tf", b"variable \"x\" {}\n")])),
    ];
    for (i, (case, archive)) in corpus.into_iter().enumerate() {
        let v = format!("0.0.{i}");
        let read = publish_version(&app, &owners, VPC, &v, archive).await;
        assert_eq!(read.body["data"]["attributes"]["status"], "reg_ingress_failed", "{case}: {:?}", read.body);
        let reason = read.body["data"]["attributes"]["error"].as_str().unwrap_or("");
        assert!(!reason.is_empty(), "{case} has a reason");
        let module_reply = app.get(VPC, &owners).await;
        let entry = module_reply.body["data"]["attributes"]["version-statuses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["version"] == v.as_str())
            .cloned()
            .unwrap();
        assert_eq!(entry["status"], "reg_ingress_failed");
        assert_eq!(entry["error"], reason, "{case}");
        if case == "subdirectory only" {
            assert!(reason.contains("terraform-aws-vpc"), "names the subdirectory: {reason}");
        }
    }
    assert_eq!(app.get(VPC, &owners).await.body["data"]["attributes"]["status"], "pending", "no version is ok");
    let objects = std::fs::read_dir(app.data_dir.path().join("objects")).unwrap().count();
    assert_eq!(objects, 0, "failed uploads leave nothing in the blob store");

    // A failed version can be deleted and created again.
    assert_eq!(app.delete(&format!("{VPC}/0.0.1"), &owners).await.status, 204);
    let retried = publish_version(&app, &owners, VPC, "0.0.1", module_archive()).await;
    assert_eq!(retried.body["data"]["attributes"]["status"], "ok");
}

fn ok_tf_entry() -> Entry<'static> {
    Entry::File("main.tf", b"variable \"x\" {}\n")
}

#[tokio::test]
async fn versions_are_read_one_at_a_time_and_listed_in_semantic_version_order() {
    let (app, owners) = acme().await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    for v in ["1.10.0", "1.9.0", "1.0.0-beta", "1.0.0"] {
        app.post(&format!("{VPC}/versions"), &owners, version(v)).await;
    }
    let listed = app.get(&format!("{VPC}/versions"), &owners).await;
    assert_eq!(listed.status, 200);
    let order: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|v| v["attributes"]["version"].as_str().unwrap()).collect();
    assert_eq!(order, ["1.0.0-beta", "1.0.0", "1.9.0", "1.10.0"]);
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 4);
    assert_eq!(app.get(&format!("{VPC}/version?module_version=9.9.9"), &owners).await.status, 404);
    assert_eq!(app.get(&format!("{VPC}/version"), &owners).await.status, 422);
}

#[tokio::test]
async fn update_keeps_omitted_properties_and_manages_test_config() {
    let (app, owners) = acme().await;
    let created = app.post(MODULES, &owners, json!({"data": {"type": "registry-modules", "attributes": {"name": "vpc", "provider": "aws", "no-code": true}}})).await;
    assert_eq!(created.status, 201);
    let tests_on =
        json!({"data": {"type": "registry-modules", "attributes": {"test-config": {"tests-enabled": true}}}});
    let updated = app.patch(&format!("{VPC}/"), &owners, tests_on).await;
    assert_eq!(updated.status, 200, "{:?}", updated.body);
    let test_config = &updated.body["data"]["attributes"]["test-config"];
    assert!(test_config["id"].as_str().unwrap().starts_with("tc-"));
    assert_eq!(test_config["tests-enabled"], true);
    assert_eq!(updated.body["data"]["attributes"]["no-code"], true, "omitted properties keep their value");

    let tests_off =
        json!({"data": {"type": "registry-modules", "attributes": {"test-config": {"tests-enabled": false}}}});
    let again = app.patch(VPC, &owners, tests_off).await;
    assert_eq!(again.body["data"]["attributes"]["test-config"]["id"], test_config["id"], "the same test-config");
    assert_eq!(again.body["data"]["attributes"]["test-config"]["tests-enabled"], false);

    let both =
        json!({"data": {"type": "registry-modules", "attributes": {"vcs-repo": {"branch": "main", "tags": true}}}});
    let reply = app.patch(VPC, &owners, both).await;
    assert_eq!(reply.status, 422);
    assert_eq!(reply.pointer(), "/data/attributes/vcs-repo");

    let (_, modules_team) = app.team_with_token("acme", "modules", json!({"manage-modules": true})).await;
    let forbidden =
        app.patch(VPC, &modules_team, json!({"data": {"type": "registry-modules", "attributes": {}}})).await;
    assert_eq!(forbidden.status, 404, "update is for owners only");
}

#[tokio::test]
async fn deletes_cascade_from_version_to_provider_to_module_and_remove_archives() {
    let (app, owners) = acme().await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    app.post(MODULES, &owners, private_module("vpc", "google")).await;
    publish_version(&app, &owners, VPC, "1.0.0", module_archive()).await;
    publish_version(&app, &owners, VPC, "1.1.0", module_archive()).await;
    let objects = || std::fs::read_dir(app.data_dir.path().join("objects")).unwrap().count();
    assert_eq!(objects(), 2, "one stored archive per ok version");

    let deleted = app.delete(&format!("{VPC}/1.0.0"), &owners).await;
    assert_eq!(deleted.status, 204);
    assert_eq!(deleted.body, Value::Null, "204 with no body");
    assert_eq!(statuses(&app.get(VPC, &owners).await), [("1.1.0".into(), "ok".into())]);
    assert_eq!(objects(), 1);
    assert_eq!(app.delete(&format!("{VPC}/1.1.0"), &owners).await.status, 204);
    assert_eq!(app.get(VPC, &owners).await.status, 404, "the last version took its provider along");
    assert_eq!(objects(), 0);
    let google = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/google";
    assert_eq!(app.get(google, &owners).await.status, 200, "other providers stay");

    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    publish_version(&app, &owners, VPC, "2.0.0", module_archive()).await;
    assert_eq!(app.delete(VPC, &owners).await.status, 204, "the provider form");
    assert_eq!(objects(), 0);
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    assert_eq!(app.delete("/api/v2/organizations/acme/registry-modules/private/acme/vpc", &owners).await.status, 204);
    assert_eq!(app.get(google, &owners).await.status, 404, "the module form takes every provider");
    let listed = app.get(MODULES, &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 0);
    assert_eq!(app.delete(VPC, &owners).await.status, 404);
    assert_eq!(app.delete(&format!("{VPC}/9.9.9"), &owners).await.status, 404);
}

#[tokio::test]
async fn every_deprecated_endpoint_behaves_as_its_replacement() {
    let (app, owners) = acme().await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    let created = app.post("/api/v2/registry-modules/acme/vpc/aws/versions", &owners, version("1.0.0")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let upload = created.body["data"]["links"]["upload"].as_str().unwrap().to_owned();
    assert_eq!(app.upload(&upload, module_archive()).await, 200);
    settled(&app, &owners, "1.0.0").await;
    let shown = app.get("/api/v2/registry-modules/show/acme/vpc/aws", &owners).await;
    assert_eq!(shown.body["data"], app.get(VPC, &owners).await.body["data"]);

    app.post("/api/v2/registry-modules/acme/vpc/aws/versions", &owners, version("1.1.0")).await;
    let none = Some(&*owners);
    let version_delete =
        app.request(Method::POST, "/api/v2/registry-modules/actions/delete/acme/vpc/aws/1.1.0", none, None).await;
    assert_eq!(version_delete.status, 204);
    assert_eq!(statuses(&app.get(VPC, &owners).await).len(), 1);
    let provider_delete =
        app.request(Method::POST, "/api/v2/registry-modules/actions/delete/acme/vpc/aws", none, None).await;
    assert_eq!(provider_delete.status, 204);
    assert_eq!(app.get(VPC, &owners).await.status, 404);

    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    app.post(MODULES, &owners, private_module("vpc", "azurerm")).await;
    let module_delete = app.request(Method::POST, "/api/v2/registry-modules/actions/delete/acme/vpc", none, None).await;
    assert_eq!(module_delete.status, 204);
    assert_eq!(app.get(MODULES, &owners).await.body["meta"]["pagination"]["total-count"], 0);
    assert_eq!(
        app.request(Method::POST, "/api/v2/registry-modules/actions/delete/acme/vpc", none, None).await.status,
        404
    );
}

#[tokio::test]
async fn who_may_do_what_and_everyone_else_gets_404() {
    let (app, owners) = acme().await;
    app.create_organization("other").await;
    let outsider = app.owners_token("other").await;
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (_, authors) = app.team_with_token("acme", "authors", json!({"manage-modules": true})).await;

    assert_eq!(
        app.post(MODULES, &reader, private_module("vpc", "aws")).await.status,
        404,
        "create needs manage-modules"
    );
    assert_eq!(app.post(MODULES, &outsider, private_module("vpc", "aws")).await.status, 404);
    assert_eq!(app.post(MODULES, &authors, private_module("vpc", "aws")).await.status, 201);
    assert_eq!(app.post(&format!("{VPC}/versions"), &reader, version("1.0.0")).await.status, 404);
    assert_eq!(app.post(&format!("{VPC}/versions"), &outsider, version("1.0.0")).await.status, 404);
    assert_eq!(app.post(&format!("{VPC}/versions"), &authors, version("1.0.0")).await.status, 201);

    for token in [&reader, &authors] {
        assert_eq!(app.get(VPC, token).await.status, 200, "reads are for any member");
        assert_eq!(app.get(MODULES, token).await.status, 200);
    }
    let module_id = app.get(VPC, &owners).await.body["data"]["id"].as_str().unwrap().to_owned();
    for path in
        [VPC.to_owned(), MODULES.to_owned(), format!("/api/v2/registry-modules/{module_id}"), format!("{VPC}/versions")]
    {
        assert_eq!(app.get(&path, &outsider).await.status, 404, "{path}");
    }
    assert_eq!(app.get("/api/v2/organizations/nobody/registry-modules", &owners).await.status, 404);
    assert_eq!(
        app.get("/api/v2/organizations/acme/registry-modules/private/acme/nothing/aws", &owners).await.status,
        404
    );
    assert_eq!(app.get("/api/v2/organizations/acme/registry-modules/private/other/vpc/aws", &owners).await.status, 404);

    for token in [&reader, &authors, &outsider] {
        assert_eq!(app.delete(&format!("{VPC}/1.0.0"), token).await.status, 404, "delete is for owners");
        assert_eq!(app.delete(VPC, token).await.status, 404);
    }
    assert_eq!(app.delete(VPC, &owners).await.status, 204);
}

#[tokio::test]
async fn the_list_searches_filters_and_pages_in_a_stable_order() {
    let (app, owners) = acme().await;
    for (name, provider) in [("vpc", "aws"), ("vpc", "google"), ("network", "aws"), ("dns", "azurerm")] {
        app.post(MODULES, &owners, private_module(name, provider)).await;
    }
    app.post(MODULES, &owners, public_module("hashicorp", "consul", "aws")).await;
    let names = |reply: &Reply| -> Vec<String> {
        reply.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}/{}/{}",
                    m["attributes"]["namespace"].as_str().unwrap(),
                    m["attributes"]["name"].as_str().unwrap(),
                    m["attributes"]["provider"].as_str().unwrap()
                )
            })
            .collect()
    };
    let all = app.get(MODULES, &owners).await;
    assert_eq!(
        names(&all),
        ["acme/dns/azurerm", "acme/network/aws", "acme/vpc/aws", "acme/vpc/google", "hashicorp/consul/aws"]
    );
    assert_eq!(all.body["meta"]["pagination"]["total-count"], 5);

    let q = app.get(&format!("{MODULES}?q=vp"), &owners).await;
    assert_eq!(names(&q), ["acme/vpc/aws", "acme/vpc/google"]);
    let by_namespace = app.get(&format!("{MODULES}?q=hashi"), &owners).await;
    assert_eq!(names(&by_namespace), ["hashicorp/consul/aws"]);
    let provider = app.get(&format!("{MODULES}?filter%5Bprovider%5D=aws"), &owners).await;
    assert_eq!(names(&provider), ["acme/network/aws", "acme/vpc/aws", "hashicorp/consul/aws"]);
    assert_eq!(provider.body["meta"]["pagination"]["total-count"], 3);
    let public = app.get(&format!("{MODULES}?filter[registry_name]=public"), &owners).await;
    assert_eq!(names(&public), ["hashicorp/consul/aws"]);
    assert_eq!(public.body["meta"]["pagination"]["total-count"], 1);
    let org = app.get(&format!("{MODULES}?filter[organization_name]=someone-else"), &owners).await;
    assert_eq!(names(&org), Vec::<String>::new());
    assert_eq!(app.get(&format!("{MODULES}?filter[registry_name]=nope"), &owners).await.status, 422);

    let page = app.get(&format!("{MODULES}?page[size]=2&page[number]=2&filter[provider]=aws"), &owners).await;
    assert_eq!(names(&page), ["hashicorp/consul/aws"]);
    assert_eq!(page.body["meta"]["pagination"]["prev-page"], 1);
    assert_eq!(page.body["meta"]["pagination"]["next-page"], Value::Null);
    assert!(
        page.body["links"]["first"].as_str().unwrap().contains("filter%5Bprovider%5D=aws"),
        "links keep the filters"
    );
}

#[tokio::test]
async fn concurrent_creates_of_one_address_or_version_have_exactly_one_winner() {
    let (app, owners) = acme().await;
    let app = std::sync::Arc::new(app);
    let creates = (0..8).map(|_| {
        let (app, owners) = (app.clone(), owners.clone());
        tokio::spawn(async move { app.post(MODULES, &owners, private_module("race", "aws")).await.status.as_u16() })
    });
    let mut statuses: Vec<u16> = futures_join(creates).await;
    statuses.sort();
    assert_eq!(statuses, [201, 422, 422, 422, 422, 422, 422, 422]);

    let path = "/api/v2/organizations/acme/registry-modules/private/acme/race/aws/versions";
    let versions = (0..8).map(|_| {
        let (app, owners) = (app.clone(), owners.clone());
        tokio::spawn(async move { app.post(path, &owners, version("1.0.0")).await.status.as_u16() })
    });
    let mut statuses: Vec<u16> = futures_join(versions).await;
    statuses.sort();
    assert_eq!(statuses, [201, 422, 422, 422, 422, 422, 422, 422]);
    let module_reply = app.get("/api/v2/organizations/acme/registry-modules/private/acme/race/aws", &owners).await;
    assert_eq!(module_reply.body["data"]["attributes"]["version-statuses"].as_array().unwrap().len(), 1);
}

async fn futures_join(tasks: impl Iterator<Item = tokio::task::JoinHandle<u16>>) -> Vec<u16> {
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.unwrap());
    }
    out
}

#[tokio::test]
async fn deleting_the_organization_removes_its_modules_and_archives() {
    let (app, owners) = acme().await;
    app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    publish_version(&app, &owners, VPC, "1.0.0", module_archive()).await;
    let pending = app.post(&format!("{VPC}/versions"), &owners, version("1.1.0")).await;
    let upload = pending.body["data"]["links"]["upload"].as_str().unwrap().to_owned();
    let module_id = app.get(VPC, &owners).await.body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(app.delete("/api/v2/organizations/acme", &app.admin_token).await.status, 204);
    assert_eq!(std::fs::read_dir(app.data_dir.path().join("objects")).unwrap().count(), 0);
    assert_eq!(app.get(&format!("/api/v2/registry-modules/{module_id}"), &app.admin_token).await.status, 404);
    assert_eq!(app.upload(&upload, module_archive()).await, 409, "the upload link died with its version");
}

#[tokio::test]
async fn upload_links_go_only_to_those_who_may_publish() {
    let (app, owners) = acme().await;
    let (_, reader) = app.team_with_token("acme", "readers", json!({})).await;
    let (_, authors) = app.team_with_token("acme", "authors", json!({"manage-modules": true})).await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    assert_eq!(app.post(&format!("{VPC}/versions"), &authors, version("1.0.0")).await.status, 201);

    let read = |token: String| {
        let app = &app;
        async move { app.get(&format!("{VPC}/version?module_version=1.0.0"), &token).await }
    };
    let as_reader = read(reader.clone()).await;
    assert_eq!(as_reader.status, 200, "a member reads the version");
    assert_eq!(as_reader.body["data"]["attributes"]["status"], "pending");
    assert!(
        as_reader.body["data"]["links"].get("upload").is_none(),
        "a reader gets no upload link: {:?}",
        as_reader.body
    );
    for token in [owners, authors] {
        let as_publisher = read(token).await;
        assert!(as_publisher.body["data"]["links"]["upload"].is_string(), "a publisher still gets it");
    }
}

#[tokio::test]
async fn versions_equal_but_for_build_metadata_or_over_long_are_refused_with_422() {
    let (app, owners) = acme().await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    assert_eq!(app.post(&format!("{VPC}/versions"), &owners, version("1.0.0+a")).await.status, 201);
    for refused in ["1.0.0", "1.0.0+b"] {
        let reply = app.post(&format!("{VPC}/versions"), &owners, version(refused)).await;
        assert_eq!(reply.status, 422, "{refused}: {:?}", reply.body);
        assert_eq!(reply.pointer(), "/data/attributes/version");
    }
    assert_eq!(app.post(&format!("{VPC}/versions"), &owners, version("1.0.1+a")).await.status, 201);
    for long in [format!("1.0.0-{}", "a".repeat(2_000)), format!("1.0.0+{}", "b".repeat(500_000))] {
        let reply = app.post(&format!("{VPC}/versions"), &owners, version(&long)).await;
        assert_eq!(reply.status, 422, "a version of {} characters", long.len());
    }
    let listed = app.get(&format!("{VPC}/versions"), &owners).await;
    assert_eq!(listed.body["data"].as_array().map(Vec::len), Some(2), "nothing refused was stored");
}

#[tokio::test]
async fn a_read_of_a_path_that_only_deletes_is_a_404_and_other_wrong_methods_a_405() {
    let (app, owners) = acme().await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    let delete_only = "/api/v2/organizations/acme/registry-modules/private/acme/vpc";
    for method in [Method::GET, Method::HEAD] {
        let reply = app.request(method.clone(), delete_only, Some(&owners), None).await;
        assert_eq!(reply.status, 404, "{method}");
    }
    let put = app.request(Method::PUT, delete_only, Some(&owners), None).await;
    assert_eq!(put.status, 405);
    assert_eq!(put.body["errors"][0]["status"], "405", "a JSON:API 405");
    assert_eq!(app.get(VPC, &owners).await.status, 200, "nothing was deleted");
}

#[tokio::test]
async fn a_module_published_by_hand_says_non_vcs() {
    let (app, owners) = acme().await;
    let created = app.post(MODULES, &owners, private_module("vpc", "aws")).await;
    assert_eq!(created.body["data"]["attributes"]["publishing-mechanism"], "non_vcs");
    assert_eq!(app.get(VPC, &owners).await.body["data"]["attributes"]["publishing-mechanism"], "non_vcs");
}

/// Waits until the version is no longer `pending` (ingest runs after the upload, off the PUT).
pub(crate) async fn settled(app: &TestApp, token: &str, v: &str) -> Reply {
    app.settled(&format!("{VPC}/version?module_version={v}"), token).await
}

/// 80 distinct versions created from 40 tasks while the module is being downloaded: every
/// create succeeds, the module lists every version, and every download is counted. Run here on
/// SQLite and in `dynamodb` on DynamoDB.
pub(crate) async fn distinct_versions_created_at_once_all_succeed_and_downloads_count(app: TestApp, owners: String) {
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    let created = app.post(&format!("{VPC}/versions"), &owners, version("0.1.0")).await;
    let url = created.body["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
    assert_eq!(app.upload(&url, module_archive()).await, 200);
    assert_eq!(settled(&app, &owners, "0.1.0").await.body["data"]["attributes"]["status"], "ok");

    let app = std::sync::Arc::new(app);
    let creates = (0..40).map(|task| {
        let (app, owners) = (app.clone(), owners.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for minor in 0..2 {
                let v = format!("1.{minor}.{task}");
                let reply = app.post(&format!("{VPC}/versions"), &owners, version(&v)).await;
                statuses.push((v, reply.status.as_u16(), reply.body.to_string()));
            }
            statuses
        })
    });
    let downloads = (0..20).map(|_| {
        let (app, owners) = (app.clone(), owners.clone());
        tokio::spawn(async move {
            app.get("/api/registry/v1/modules/acme/vpc/aws/0.1.0/download", &owners).await.status.as_u16()
        })
    });
    let creates: Vec<_> = creates.collect();
    for download in downloads {
        assert_eq!(download.await.unwrap(), 204);
    }
    for task in creates {
        for (v, status, body) in task.await.unwrap() {
            assert_eq!(status, 201, "version {v}: {body}");
        }
    }
    let reply = app.get(VPC, &owners).await;
    assert_eq!(statuses(&reply).len(), 81, "every version is listed");
    let shown = app.get("/api/registry/v1/modules/acme/vpc/aws", &owners).await;
    assert_eq!(shown.body["downloads"], 20, "every download is counted");
}

#[tokio::test]
async fn distinct_versions_created_at_once_all_succeed_on_sqlite() {
    let (app, owners) = acme().await;
    distinct_versions_created_at_once_all_succeed_and_downloads_count(app, owners).await;
}

/// A module's versions are not bounded by one stored item: 5,000 versions with long
/// pre-release labels (past DynamoDB's 400 KB item limit were they kept in the module's item)
/// are all created, listed and shown.
pub(crate) async fn a_module_with_5000_versions_lists_them_all(app: TestApp, owners: String) {
    const COUNT: usize = 5_000;
    const TASKS: usize = 16;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    let app = create_versions_at_once(app, &owners, COUNT, TASKS, &"r".repeat(100)).await;
    let reply = app.get(VPC, &owners).await;
    assert_eq!(reply.status, 200);
    assert_eq!(statuses(&reply).len(), COUNT);
    let listed = app.get(&format!("{VPC}/versions"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], COUNT);
    let one_more = app.post(&format!("{VPC}/versions"), &owners, version("2.0.0")).await;
    assert_eq!(one_more.status, 201, "{:?}", one_more.body);
}

/// Creates versions `1.0.<i>-<label>` of vpc/aws for i below `count`, from `tasks` concurrent
/// tasks, each expecting a 201.
async fn create_versions_at_once(
    app: TestApp,
    owners: &str,
    count: usize,
    tasks: usize,
    label: &str,
) -> std::sync::Arc<TestApp> {
    let app = std::sync::Arc::new(app);
    let creates = (0..tasks).map(|task| {
        let (app, owners, label) = (app.clone(), owners.to_owned(), label.to_owned());
        tokio::spawn(async move {
            for i in (task..count).step_by(tasks) {
                let v = format!("1.0.{i}-{label}");
                let reply = app.post(&format!("{VPC}/versions"), &owners, version(&v)).await;
                assert_eq!(reply.status, 201, "version {i}: {:?}", reply.body);
            }
        })
    });
    for task in creates.collect::<Vec<_>>() {
        task.await.unwrap();
    }
    app
}

#[tokio::test]
async fn a_module_with_5000_versions_lists_them_all_on_sqlite() {
    let (app, owners) = acme().await;
    a_module_with_5000_versions_lists_them_all(app, owners).await;
}

/// A module stored before versions and download counts had items of their own (its versions and
/// count inside the module's item) reads as before and takes new versions under the same rules.
#[tokio::test]
async fn a_module_stored_in_the_older_layout_keeps_its_versions_and_downloads() {
    use hangar::store::{keys, Condition, ItemStore};
    let (app, owners) = acme().await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    assert_eq!(publish_version(&app, &owners, VPC, "1.0.0", module_archive()).await.status, 200);
    settled(&app, &owners, "1.0.0").await;

    // Rewrite the module as the older layout stored it.
    let store = app.store();
    let org_id = app.get("/api/v2/organizations/acme", &owners).await.body["data"]["attributes"]["external-id"]
        .as_str()
        .expect("the organization's id")
        .to_owned();
    let module_key = keys::module(&org_id, None, "vpc", "aws");
    let mut item = store.get(&module_key).await.unwrap().expect("the module's item");
    let statuses_query = keys::version_statuses(&org_id, "vpc", "aws");
    let entries: Vec<Value> = store
        .query(statuses_query.clone())
        .await
        .unwrap()
        .items
        .iter()
        .map(|i| Value::Object(i.attrs().unwrap().into_owned()))
        .collect();
    assert_eq!(entries.len(), 1);
    for entry in store.query(statuses_query).await.unwrap().items {
        store.delete(&entry.key, Condition::Always).await.unwrap();
    }
    item.attrs_mut().unwrap().remove("latest");
    item.attrs_mut().unwrap().insert("versions".into(), Value::Array(entries));
    item.attrs_mut().unwrap().insert("downloads".into(), json!(7));
    store.put(item, Condition::Always).await.unwrap();

    let reply = app.get(VPC, &owners).await;
    assert_eq!(statuses(&reply), [("1.0.0".to_owned(), "ok".to_owned())]);
    let shown = app.get("/api/registry/v1/modules/acme/vpc/aws", &owners).await;
    assert_eq!((shown.body["version"].clone(), shown.body["downloads"].clone()), (json!("1.0.0"), json!(7)));
    let sibling = app.post(&format!("{VPC}/versions"), &owners, version("1.0.0+other")).await;
    assert_eq!(sibling.status, 422, "{:?}", sibling.body);
    assert_eq!(app.post(&format!("{VPC}/versions"), &owners, version("1.1.0")).await.status, 201);
    assert_eq!(statuses(&app.get(VPC, &owners).await).len(), 2);
}

/// On DynamoDB's expressions: a module whose versions outgrow its version index (64 KB of
/// entries, about 180 of these, whose versions are 126 characters long) keeps taking versions, concurrently, and its reads still show
/// every one (queried, once the index is an overflowed marker).
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn versions_past_the_version_index_s_budget_are_all_shown_on_dynamodb() {
    let (app, owners) = acme_on_dynamodb().await;
    assert_eq!(app.post(MODULES, &owners, private_module("vpc", "aws")).await.status, 201);
    const COUNT: usize = 200;
    let label = "r".repeat(118);
    let app = create_versions_at_once(app, &owners, COUNT, 8, &label).await;
    let reply = app.get(VPC, &owners).await;
    assert_eq!(reply.status, 200);
    assert_eq!(statuses(&reply).len(), COUNT);
    let org = app.get("/api/v2/organizations/acme", &owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();
    let state = app.second_state().await;
    let index = state.store.get(&hangar::store::keys::version_index(&org_id, "vpc", "aws")).await.unwrap();
    let index = index.expect("the index, as an overflowed marker");
    assert_eq!(
        index.attrs().unwrap().get("complete"),
        Some(&Value::Bool(false)),
        "{:?}",
        index.attrs().unwrap().keys().take(5).collect::<Vec<_>>()
    );
    let deleted = app.delete(&format!("{VPC}/1.0.7-{label}"), &owners).await;
    assert_eq!(deleted.status, 204, "{:?}", deleted.body);
    assert_eq!(statuses(&app.get(VPC, &owners).await).len(), COUNT - 1);
}
