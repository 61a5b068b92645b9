//! The registry protocol over HTTP: discovery, shapes, semantic-version order, downloads,
//! auth and 404s — what `terraform init` and other registry clients read.

use hangar_tests::builders::{acme, module, module_path, new_module, new_version, publish_version, version};
use hangar_tests::{module_archive, targz, Entry, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

const V1: &str = "/api/registry/v1/modules";

/// `acme` with modules vpc/aws (versions as given, each uploaded with `archive` unless listed
/// in `pending`) and returns (app, owners token).
async fn registry(versions: &[&str], pending: &[&str]) -> (TestApp, String) {
    let (app, owners) = acme().await;
    let vpc = new_module(&app, &owners, "acme", "vpc", "aws").await;
    for v in versions {
        if pending.contains(v) {
            new_version(&app, &owners, &vpc, v).await;
        } else {
            publish_version(&app, &owners, &vpc, v, module_archive()).await;
        }
    }
    (app, owners)
}

fn versions_of(body: &Value) -> Vec<&str> {
    body["modules"][0]["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn discovery_is_open_and_points_at_the_registry_and_the_api() {
    let app = TestApp::spawn().await;
    let reply = app.request(Method::GET, "/.well-known/terraform.json", None, None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["modules.v1"], "/api/registry/v1/modules/");
    for key in ["tfe.v2", "tfe.v2.1", "tfe.v2.2"] {
        assert_eq!(reply.body[key], "/api/v2/", "{key}");
    }
}

#[tokio::test]
async fn versions_are_the_ok_ones_in_semantic_version_order() {
    let (app, owners) = registry(&["1.9.0", "1.10.0", "1.0.0", "1.0.0-beta", "2.0.0"], &["2.0.0"]).await;
    let reply = app.get(&format!("{V1}/acme/vpc/aws/versions"), &owners).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(versions_of(&reply.body), ["1.0.0-beta", "1.0.0", "1.9.0", "1.10.0"], "pending 2.0.0 is not served");
    assert_eq!(reply.body["modules"].as_array().unwrap().len(), 1);
    assert_eq!(reply.body["modules"][0]["source"], "acme/vpc/aws");
    assert_eq!(
        app.get(&format!("{V1}/acme/vpc/aws/2.0.0"), &owners).await.status,
        404,
        "a pending version does not exist here"
    );
    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/2.0.0/download"), &owners).await.status, 404);
}

#[tokio::test]
async fn a_module_without_an_ok_version_is_not_found() {
    let (app, owners) = registry(&["1.0.0"], &["1.0.0"]).await;
    for path in ["acme/vpc/aws/versions", "acme/vpc/aws", "acme/vpc", "acme/vpc/aws/download"] {
        assert_eq!(app.get(&format!("{V1}/{path}"), &owners).await.status, 404, "{path}");
    }
    let listed = app.get(&format!("{V1}/acme"), &owners).await;
    assert_eq!(listed.body["modules"], json!([]));
}

#[tokio::test]
async fn download_points_terraform_at_the_stored_archive() {
    let (app, owners) = registry(&["1.0.0"], &[]).await;
    let reply = app.get(&format!("{V1}/acme/vpc/aws/1.0.0/download"), &owners).await;
    assert_eq!(reply.status, 204);
    // Hyper leaves Content-Length out of a 204 as RFC 9110 asks; when present it must be 0.
    assert!(reply.headers.get("content-length").is_none_or(|v| v == "0"));
    assert_eq!(reply.body, Value::Null, "no body");
    let get = reply.headers["x-terraform-get"].to_str().unwrap().to_owned();
    assert!(get.ends_with("&archive=tar.gz"), "{get}");
    // The link carries its own signature; go-getter drops `archive` before fetching.
    let fetched = app.client.get(get.trim_end_matches("&archive=tar.gz")).send().await.unwrap();
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), module_archive(), "exactly the uploaded archive");

    let shown = app.get(&format!("{V1}/acme/vpc/aws/1.0.0"), &owners).await;
    assert_eq!(shown.body["downloads"], 1, "downloads are counted");
}

#[tokio::test]
async fn download_latest_redirects_to_the_highest_stable_version() {
    let (app, owners) = registry(&["1.0.0", "1.2.0", "2.0.0-rc1"], &[]).await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let reply = client.get(format!("{}{V1}/acme/vpc/aws/download", app.url)).bearer_auth(&owners).send().await.unwrap();
    assert_eq!(reply.status(), 302);
    assert_eq!(reply.headers()["location"], "/api/registry/v1/modules/acme/vpc/aws/1.2.0/download");
}

#[tokio::test]
async fn one_version_and_the_latest_carry_the_public_registry_fields() {
    let (app, owners) = registry(&["1.0.0", "1.1.0"], &[]).await;
    let latest = app.get(&format!("{V1}/acme/vpc/aws"), &owners).await;
    assert_eq!(latest.status, 200, "{:?}", latest.body);
    let body = &latest.body;
    assert_eq!(body["id"], "acme/vpc/aws/1.1.0");
    for field in [
        "owner",
        "namespace",
        "name",
        "version",
        "provider",
        "description",
        "source",
        "published_at",
        "downloads",
        "verified",
    ] {
        assert!(body.get(field).is_some(), "{field} missing from {body}");
    }
    assert_eq!(body["namespace"], "acme");
    assert_eq!(body["description"], "A test module.", "the README's first paragraph");
    assert_eq!(body["versions"], json!(["1.0.0", "1.1.0"]));
    assert!(body["root"]["readme"].as_str().unwrap().contains("# vpc"));
    assert!(body["published_at"].as_str().unwrap().ends_with('Z'));

    let one = app.get(&format!("{V1}/acme/vpc/aws/1.0.0"), &owners).await;
    assert_eq!(one.body["version"], "1.0.0");
    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/9.9.9"), &owners).await.status, 404);
}

#[tokio::test]
async fn lists_page_with_offset_and_limit_as_the_public_registry_does() {
    let (app, owners) = acme().await;
    let archive = targz(&[Entry::File("main.tf", b"")]);
    for (name, provider) in [("a", "aws"), ("b", "aws"), ("c", "google"), ("d", "aws"), ("e", "azurerm")] {
        app.post("/api/v2/organizations/acme/registry-modules", &owners, module(name, provider)).await;
        let path = module_path("acme", name, provider);
        let created = app.post(&format!("{path}/versions"), &owners, version("0.1.0")).await;
        app.upload(created.body["data"]["links"]["upload"].as_str().unwrap(), archive.clone()).await;
        app.settled(&format!("{path}/version?module_version=0.1.0"), &owners).await;
    }
    let ids = |body: &Value| -> Vec<String> {
        body["modules"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_owned()).collect()
    };

    let first = app.get(&format!("{V1}/acme?limit=2"), &owners).await;
    assert_eq!(ids(&first.body), ["a", "b"]);
    assert_eq!(first.body["meta"]["limit"], 2);
    assert_eq!(first.body["meta"]["current_offset"], 0);
    assert_eq!(first.body["meta"]["next_offset"], 2);
    assert!(first.body["meta"].get("prev_offset").is_none());
    assert_eq!(first.body["meta"]["next_url"], "/api/registry/v1/modules/acme?limit=2&offset=2");
    let second = app.get(&format!("{V1}/acme?limit=2&offset=2"), &owners).await;
    assert_eq!(ids(&second.body), ["c", "d"]);
    assert_eq!(second.body["meta"]["prev_offset"], 0);
    let last = app.get(&format!("{V1}/acme?limit=2&offset=4"), &owners).await;
    assert_eq!(ids(&last.body), ["e"]);
    assert!(last.body["meta"].get("next_offset").is_none());

    let aws = app.get(&format!("{V1}/?provider=aws"), &owners).await;
    assert_eq!(ids(&aws.body), ["a", "b", "d"]);
    assert_eq!(app.get(&format!("{V1}/search"), &owners).await.status, 400, "q is required");
    let found = app.get(&format!("{V1}/search?q=goo"), &owners).await;
    assert_eq!(ids(&found.body), ["c"]);
    assert_eq!(app.get(&format!("{V1}/acme?limit=x"), &owners).await.status, 400);

    let per_provider = app.get(&format!("{V1}/acme/a"), &owners).await;
    assert_eq!(per_provider.body["modules"][0]["id"], "acme/a/aws/0.1.0");
}

#[tokio::test]
async fn callers_without_access_learn_nothing() {
    let (app, owners) = registry(&["1.0.0"], &[]).await;
    app.create_organization("other").await;
    let outsider = app.owners_token("other").await;
    for path in [
        "acme/vpc/aws/versions",
        "acme/vpc/aws/1.0.0/download",
        "acme/vpc/aws",
        "acme",
        "acme/vpc",
        "nobody/vpc/aws/versions",
    ] {
        let reply = app.get(&format!("{V1}/{path}"), &outsider).await;
        assert_eq!(reply.status, 404, "{path}");
        assert!(reply.body["errors"].is_array(), "the registry's error format: {:?}", reply.body);
    }
    let listed = app.get(&format!("{V1}/"), &outsider).await;
    assert_eq!(listed.body["modules"], json!([]), "other organizations' modules are not listed");
    let anonymous = app.request(Method::GET, &format!("{V1}/acme/vpc/aws/versions"), None, None).await;
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.body["errors"][0].is_string());
    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/versions"), &owners).await.status, 200);
}

#[tokio::test]
async fn every_error_under_api_registry_has_the_registry_s_shape() {
    let (app, owners) = registry(&["1.0.0"], &[]).await;
    let is_registry_shape = |reply: &hangar_tests::Reply| {
        reply.body["errors"].as_array().is_some_and(|errors| !errors.is_empty() && errors.iter().all(Value::is_string))
    };
    let unknown = app.get("/api/registry/v1/nothing/here", &owners).await;
    assert_eq!(unknown.status, 404);
    assert!(is_registry_shape(&unknown), "{:?}", unknown.body);
    let unknown_public = app.get("/api/registry/public/v2/x", &owners).await;
    assert_eq!(unknown_public.status, 404);
    assert!(is_registry_shape(&unknown_public), "{:?}", unknown_public.body);
    let wrong_method = app.request(Method::POST, &format!("{V1}/acme/vpc/aws/versions"), Some(&owners), None).await;
    assert_eq!(wrong_method.status, 405);
    assert!(is_registry_shape(&wrong_method), "{:?}", wrong_method.body);
    assert_eq!(wrong_method.headers["allow"], "GET,HEAD");
}

#[tokio::test]
async fn each_version_is_described_by_its_own_readme() {
    let (app, owners) = registry(&["1.0.0", "2.0.0"], &["1.0.0", "2.0.0"]).await;
    let versions = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
    let upload = |version: &'static str, readme: &'static [u8]| {
        let (app, owners) = (&app, &owners);
        async move {
            let shown = app.get(&format!("{versions}/version?module_version={version}"), owners).await;
            let url = shown.body["data"]["links"]["upload"].as_str().expect("an upload link").to_owned();
            let archive =
                targz(&[Entry::File("./main.tf", b"variable \"x\" {}\n"), Entry::File("./README.md", readme)]);
            assert_eq!(app.upload(&url, archive).await, 200);
            app.settled(&format!("{versions}/version?module_version={version}"), owners).await;
        }
    };
    // The newer version lands first, the older one last.
    upload("2.0.0", b"# vpc\nThe second edition.\n").await;
    upload("1.0.0", b"# vpc\nThe first edition.\n").await;

    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/2.0.0"), &owners).await.body["description"], "The second edition.");
    assert_eq!(app.get(&format!("{V1}/acme/vpc/aws/1.0.0"), &owners).await.body["description"], "The first edition.");
    let latest = app.get(&format!("{V1}/acme/vpc/aws"), &owners).await;
    assert_eq!(latest.body["description"], "The second edition.", "the latest version describes the module");
    let listed = app.get(&format!("{V1}/acme"), &owners).await;
    assert_eq!(listed.body["modules"][0]["description"], "The second edition.");
}
