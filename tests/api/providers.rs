//! The private provider registry over HTTP: GPG keys, providers, versions and platforms, the
//! uploads of a release's files and what they are checked for, and the provider registry
//! protocol that `terraform init` reads. Each refusal the registry makes is a test here.

use std::io::Write;

use hangar::archive::ArchiveLimits;
use hangar::config::Config;
use hangar_tests::builders::{acme, acme_on_dynamodb, acme_with};
use hangar_tests::gpg::Gpg;
use hangar_tests::TestApp;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const KEYS: &str = "/api/registry/private/v2/gpg-keys";
const PROVIDERS: &str = "/api/v2/organizations/acme/registry-providers";
const WIDGET: &str = "/api/v2/organizations/acme/registry-providers/private/acme/widget";
pub(crate) const SIGNER: &str = "Acme Releases <releases@acme.example>";

fn provider_zip(version: &str, body: &[u8]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    writer.start_file(format!("terraform-provider-widget_v{version}"), options).unwrap();
    writer.write_all(body).unwrap();
    writer.finish().unwrap().into_inner()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn filename(version: &str) -> String {
    format!("terraform-provider-widget_{version}_linux_amd64.zip")
}

/// A release of one platform: its archive, and SHA256SUMS listing it.
pub(crate) struct Release {
    version: String,
    archive: Vec<u8>,
    sums: Vec<u8>,
}

impl Release {
    pub(crate) fn new(version: &str) -> Release {
        let archive = provider_zip(version, format!("#!/bin/sh\necho widget {version}\n").as_bytes());
        let sums = format!("{}  {}\n", sha256(&archive), filename(version)).into_bytes();
        Release { version: version.to_owned(), archive, sums }
    }
}

/// `acme` with a signing key registered and the private provider `widget`; the owners token,
/// the key's id and the gpg home that signs with it.
pub(crate) async fn acme_with_widget(config: Option<Config>) -> (TestApp, String, String, Gpg) {
    let (app, owners) = match config {
        Some(config) => acme_with(config).await,
        None => acme().await,
    };
    let (key_id, gpg) = widget_on(&app, &owners).await;
    (app, owners, key_id, gpg)
}

/// Registers a signing key in `acme` and creates its private provider `widget`.
async fn widget_on(app: &TestApp, owners: &str) -> (String, Gpg) {
    let gpg = Gpg::new();
    let armor = gpg.generate(SIGNER);
    let key = app.post(KEYS, owners, key_body("acme", &armor)).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    assert_eq!(key.body["data"]["attributes"]["ascii-armor"], armor, "the armor comes back as sent");
    let key_id = key.body["data"]["attributes"]["key-id"].as_str().unwrap().to_owned();
    assert_eq!(key_id.len(), 16);
    let created = app.post(PROVIDERS, owners, provider_body("widget", "acme", "private")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    (key_id, gpg)
}

fn key_body(namespace: &str, armor: &str) -> Value {
    json!({"data": {"type": "gpg-keys", "attributes": {"namespace": namespace, "ascii-armor": armor}}})
}

fn provider_body(name: &str, namespace: &str, registry: &str) -> Value {
    json!({"data": {"type": "registry-providers", "attributes": {"name": name, "namespace": namespace, "registry-name": registry}}})
}

fn version_body(version: &str, key_id: &str) -> Value {
    json!({"data": {"type": "registry-provider-versions", "attributes": {"version": version, "key-id": key_id, "protocols": ["5.0"]}}})
}

fn platform_body(os: &str, arch: &str, shasum: &str, filename: &str) -> Value {
    json!({"data": {"type": "registry-provider-platforms", "attributes": {"os": os, "arch": arch, "shasum": shasum, "filename": filename}}})
}

fn link(reply: &Value, name: &str) -> String {
    reply["data"]["links"][name].as_str().unwrap_or_else(|| panic!("a `{name}` link in {reply}")).to_owned()
}

/// Creates the release's version and linux/amd64 platform; answers the version and the
/// platform as created.
async fn create_release(app: &TestApp, owners: &str, key_id: &str, release: &Release) -> (Value, Value) {
    let version = app.post(&format!("{WIDGET}/versions"), owners, version_body(&release.version, key_id)).await;
    assert_eq!(version.status, 201, "{:?}", version.body);
    let path = format!("{WIDGET}/versions/{}/platforms", release.version);
    let body = platform_body("linux", "amd64", &sha256(&release.archive), &filename(&release.version));
    let platform = app.post(&path, owners, body).await;
    assert_eq!(platform.status, 201, "{:?}", platform.body);
    (version.body, platform.body)
}

/// Publishes a release signed by `signer`; answers the three uploads' statuses.
pub(crate) async fn publish(
    app: &TestApp,
    owners: &str,
    key_id: &str,
    gpg: &Gpg,
    signer: &str,
    release: &Release,
) -> [u16; 3] {
    let (version, platform) = create_release(app, owners, key_id, release).await;
    let signature = gpg.sign(signer, &release.sums);
    [
        app.upload(&link(&version, "shasums-upload"), release.sums.clone()).await.as_u16(),
        app.upload(&link(&version, "shasums-sig-upload"), signature).await.as_u16(),
        app.upload(&link(&platform, "provider-binary-upload"), release.archive.clone()).await.as_u16(),
    ]
}

async fn listed_versions(app: &TestApp, token: &str) -> Vec<String> {
    let reply = app.get("/api/registry/v1/providers/acme/widget/versions", token).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let versions = reply.body["versions"].as_array().unwrap();
    versions.iter().map(|v| v["version"].as_str().unwrap().to_owned()).collect()
}

async fn fetch(app: &TestApp, url: &str) -> (u16, Vec<u8>) {
    let url = if url.starts_with('/') { format!("{}{url}", app.url) } else { url.to_owned() };
    // No token: Terraform fetches the files without one.
    let response = app.client.get(url).send().await.unwrap();
    (response.status().as_u16(), response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn a_signed_release_is_served_through_the_protocol_with_its_key_and_files() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let release = Release::new("1.0.0");
    assert_eq!(publish(&app, &owners, &key_id, &gpg, SIGNER, &release).await, [200, 200, 200]);

    let version = app.get(&format!("{WIDGET}/versions/1.0.0"), &owners).await;
    let attributes = &version.body["data"]["attributes"];
    assert_eq!(
        (attributes["shasums-uploaded"].clone(), attributes["shasums-sig-uploaded"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(attributes["error"], Value::Null, "{:?}", version.body);
    assert!(version.body["data"]["links"]["shasums-download"].is_string(), "{:?}", version.body);
    assert!(version.body["data"]["links"].get("shasums-upload").is_none(), "a used link is not offered again");
    let platform = app.get(&format!("{WIDGET}/versions/1.0.0/platforms/linux/amd64"), &owners).await;
    assert_eq!(platform.body["data"]["attributes"]["provider-binary-uploaded"], true);
    assert_eq!(platform.body["data"]["attributes"]["error"], Value::Null);

    let included = app.get(&format!("{WIDGET}?include=registry-provider-versions"), &owners).await;
    assert_eq!(included.status, 200, "{:?}", included.body);
    let linkage = &included.body["data"]["relationships"]["registry-provider-versions"]["data"];
    assert_eq!(linkage[0]["id"], version.body["data"]["id"]);
    assert_eq!(included.body["included"][0]["attributes"]["version"], "1.0.0");
    assert_eq!(app.get(&format!("{WIDGET}?include=organization"), &owners).await.status, 400);

    let discovery = app.request(reqwest::Method::GET, "/.well-known/terraform.json", None, None).await;
    assert_eq!(discovery.body["providers.v1"], "/api/registry/v1/providers/");
    let listed = app.get("/api/registry/v1/providers/acme/widget/versions", &owners).await;
    assert_eq!(
        listed.body["versions"],
        json!([{"version": "1.0.0", "protocols": ["5.0"], "platforms": [{"os": "linux", "arch": "amd64"}]}])
    );
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    assert_eq!(download.status, 200, "{:?}", download.body);
    let package = &download.body;
    assert_eq!(package["filename"], filename("1.0.0"));
    assert_eq!(package["shasum"], sha256(&release.archive));
    assert_eq!(package["protocols"], json!(["5.0"]));
    let keys = &package["signing_keys"]["gpg_public_keys"];
    assert_eq!(keys[0]["key_id"], key_id.as_str());
    assert!(keys[0]["ascii_armor"].as_str().unwrap().contains("BEGIN PGP PUBLIC KEY BLOCK"));
    assert_eq!(fetch(&app, package["download_url"].as_str().unwrap()).await, (200, release.archive.clone()));
    assert_eq!(fetch(&app, package["shasums_url"].as_str().unwrap()).await, (200, release.sums.clone()));
    let (status, signature) = fetch(&app, package["shasums_signature_url"].as_str().unwrap()).await;
    assert_eq!(status, 200);
    let armor = keys[0]["ascii_armor"].as_str().unwrap();
    hangar::openpgp::verify_detached(armor, &release.sums, &signature).expect("the served signature verifies");

    // Without a token, or as another organization, the provider is not there.
    let anonymous =
        app.request(reqwest::Method::GET, "/api/registry/v1/providers/acme/widget/versions", None, None).await;
    assert_eq!(anonymous.status, 401);
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    let hidden = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &other).await;
    assert_eq!(hidden.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn a_binary_that_is_not_the_platforms_shasum_is_refused_and_never_served() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let release = Release::new("1.0.0");
    let (version, platform) = create_release(&app, &owners, &key_id, &release).await;
    assert_eq!(app.upload(&link(&version, "shasums-upload"), release.sums.clone()).await, 200);
    assert_eq!(app.upload(&link(&version, "shasums-sig-upload"), gpg.sign(SIGNER, &release.sums)).await, 200);
    let altered = provider_zip("1.0.0", b"#!/bin/sh\necho something else\n");
    assert_eq!(app.upload(&link(&platform, "provider-binary-upload"), altered).await, 422);
    let read = app.get(&format!("{WIDGET}/versions/1.0.0/platforms/linux/amd64"), &owners).await;
    let error = read.body["data"]["attributes"]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("not the platform's shasum"), "{:?}", read.body);
    assert_eq!(read.body["data"]["attributes"]["provider-binary-uploaded"], true);
    assert!(listed_versions(&app, &owners).await.is_empty());
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    assert_eq!(download.status, 404);

    // A platform whose sums line names another archive is not served either.
    let other = Release::new("1.1.0");
    let version = app.post(&format!("{WIDGET}/versions"), &owners, version_body("1.1.0", &key_id)).await;
    let path = format!("{WIDGET}/versions/1.1.0/platforms");
    let platform =
        app.post(&path, &owners, platform_body("linux", "amd64", &sha256(&other.archive), "other.zip")).await;
    assert_eq!(app.upload(&link(&version.body, "shasums-upload"), other.sums.clone()).await, 200);
    assert_eq!(app.upload(&link(&version.body, "shasums-sig-upload"), gpg.sign(SIGNER, &other.sums)).await, 200);
    assert_eq!(app.upload(&link(&platform.body, "provider-binary-upload"), other.archive.clone()).await, 200);
    let read = app.get(&format!("{WIDGET}/versions/1.1.0/platforms/linux/amd64"), &owners).await;
    assert_eq!(read.body["data"]["attributes"]["error"], "SHA256SUMS does not list other.zip");
    assert!(listed_versions(&app, &owners).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn sums_signed_by_a_key_the_version_does_not_name_are_never_served() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let stranger = "Someone Else <else@example.com>";
    gpg.generate(stranger);
    let release = Release::new("1.0.0");
    // Each file checks out alone; the signature is checked once both are in.
    assert_eq!(publish(&app, &owners, &key_id, &gpg, stranger, &release).await, [200, 200, 200]);
    let version = app.get(&format!("{WIDGET}/versions/1.0.0"), &owners).await;
    let error = version.body["data"]["attributes"]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("not a valid signature"), "{:?}", version.body);
    assert!(listed_versions(&app, &owners).await.is_empty());
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    assert_eq!(download.status, 404);

    // A signature that is not one at all is refused the same way.
    let garbage = Release::new("1.1.0");
    let (version, _) = create_release(&app, &owners, &key_id, &garbage).await;
    assert_eq!(app.upload(&link(&version, "shasums-sig-upload"), b"not a signature".to_vec()).await, 200);
    assert_eq!(app.upload(&link(&version, "shasums-upload"), garbage.sums.clone()).await, 200);
    let read = app.get(&format!("{WIDGET}/versions/1.1.0"), &owners).await;
    assert!(read.body["data"]["attributes"]["error"].as_str().unwrap_or_default().contains("SHA256SUMS.sig"));

    // An armored signature by the right key: Terraform reads only binary ones.
    let armored = Release::new("1.2.0");
    let (version, _) = create_release(&app, &owners, &key_id, &armored).await;
    assert_eq!(app.upload(&link(&version, "shasums-upload"), armored.sums.clone()).await, 200);
    assert_eq!(app.upload(&link(&version, "shasums-sig-upload"), gpg.sign_armored(SIGNER, &armored.sums)).await, 200);
    let read = app.get(&format!("{WIDGET}/versions/1.2.0"), &owners).await;
    let error = read.body["data"]["attributes"]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("ASCII-armored"), "{:?}", read.body);
    assert!(listed_versions(&app, &owners).await.is_empty());
    app.stop().await;
}

#[tokio::test]
async fn a_link_takes_one_upload() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let release = Release::new("1.0.0");
    let (version, platform) = create_release(&app, &owners, &key_id, &release).await;
    let sums = link(&version, "shasums-upload");
    assert_eq!(app.upload(&sums, release.sums.clone()).await, 200);
    assert_eq!(app.upload(&sums, b"0000  evil.zip\n".to_vec()).await, 409, "a used link takes nothing more");
    let binary = link(&platform, "provider-binary-upload");
    assert_eq!(app.upload(&binary, release.archive.clone()).await, 200);
    assert_eq!(app.upload(&binary, provider_zip("1.0.0", b"evil")).await, 409);
    assert_eq!(app.upload(&link(&version, "shasums-sig-upload"), gpg.sign(SIGNER, &release.sums)).await, 200);
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    assert_eq!(fetch(&app, download.body["download_url"].as_str().unwrap()).await.1, release.archive);
    app.stop().await;
}

#[tokio::test]
async fn a_zip_bomb_and_what_is_not_a_zip_are_refused() {
    let limits = ArchiveLimits { max_uncompressed_bytes: 1024 * 1024, ..ArchiveLimits::default() };
    let (app, owners, key_id, _gpg) =
        acme_with_widget(Some(Config { archive_limits: limits, ..Config::default() })).await;
    // Four MiB of zeros deflate to a few KiB.
    let bomb = provider_zip("1.0.0", &vec![0; 4 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024);
    let version = app.post(&format!("{WIDGET}/versions"), &owners, version_body("1.0.0", &key_id)).await;
    assert_eq!(version.status, 201);
    let platforms = format!("{WIDGET}/versions/1.0.0/platforms");
    let platform = app.post(&platforms, &owners, platform_body("linux", "amd64", &sha256(&bomb), "bomb.zip")).await;
    assert_eq!(app.upload(&link(&platform.body, "provider-binary-upload"), bomb).await, 422);
    let read = app.get(&format!("{platforms}/linux/amd64"), &owners).await;
    assert!(
        read.body["data"]["attributes"]["error"].as_str().unwrap().contains("uncompressed limit"),
        "{:?}",
        read.body
    );

    let text = b"just text".to_vec();
    let platform = app.post(&platforms, &owners, platform_body("darwin", "arm64", &sha256(&text), "text.zip")).await;
    assert_eq!(app.upload(&link(&platform.body, "provider-binary-upload"), text).await, 422);
    let read = app.get(&format!("{platforms}/darwin/arm64"), &owners).await;
    assert_eq!(read.body["data"]["attributes"]["error"], "the archive is not a zip file");
    app.stop().await;
}

#[tokio::test]
async fn requests_hcp_refuses_are_refused_with_the_attribute_named() {
    let (app, owners, key_id, _gpg) = acme_with_widget(None).await;
    let versions = format!("{WIDGET}/versions");
    for bad in ["v1.0.0", "1.0", "1.0.0+build.1", ""] {
        let reply = app.post(&versions, &owners, version_body(bad, &key_id)).await;
        assert_eq!(reply.status, 422, "{bad}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["source"]["pointer"], "/data/attributes/version", "{bad}");
    }
    let unknown_key = app.post(&versions, &owners, version_body("1.0.0", "0123456789ABCDEF")).await;
    assert_eq!(unknown_key.status, 422);
    assert_eq!(unknown_key.body["errors"][0]["source"]["pointer"], "/data/attributes/key-id");
    let bad_protocol =
        json!({"data": {"type": "", "attributes": {"version": "1.0.0", "key-id": key_id, "protocols": ["five"]}}});
    assert_eq!(app.post(&versions, &owners, bad_protocol).await.status, 422);
    // go-tfe's form: an empty type and no protocols.
    let go_tfe = json!({"data": {"type": "", "attributes": {"version": "1.0.0", "key-id": key_id, "protocols": null}}});
    let created = app.post(&versions, &owners, go_tfe).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["attributes"]["protocols"], json!([]));
    assert_eq!(app.post(&versions, &owners, version_body("1.0.0", &key_id)).await.status, 422, "a second 1.0.0");

    let platforms = format!("{WIDGET}/versions/1.0.0/platforms");
    let sum = "a".repeat(64);
    for (os, arch, shasum, file, pointer) in [
        ("plan10", "amd64", sum.as_str(), "a.zip", "/data/attributes/os"),
        ("linux", "z80", sum.as_str(), "a.zip", "/data/attributes/arch"),
        ("linux", "amd64", "shasum", "a.zip", "/data/attributes/shasum"),
        ("linux", "amd64", sum.as_str(), "../a.zip", "/data/attributes/filename"),
    ] {
        let reply = app.post(&platforms, &owners, platform_body(os, arch, shasum, file)).await;
        assert_eq!(reply.status, 422, "{os}/{arch}: {:?}", reply.body);
        assert_eq!(reply.body["errors"][0]["source"]["pointer"], pointer);
    }
    assert_eq!(app.post(&platforms, &owners, platform_body("linux", "amd64", &sum, "a.zip")).await.status, 201);
    assert_eq!(
        app.post(&platforms, &owners, platform_body("linux", "amd64", &sum, "b.zip")).await.status,
        422,
        "twice"
    );

    for (name, pointer) in
        [("Widget", "/data/attributes/name"), ("-w", "/data/attributes/name"), ("a--b", "/data/attributes/name")]
    {
        let reply = app.post(PROVIDERS, &owners, provider_body(name, "acme", "private")).await;
        assert_eq!(reply.status, 422, "{name}");
        assert_eq!(reply.body["errors"][0]["source"]["pointer"], pointer);
    }
    let blank = app.post(PROVIDERS, &owners, provider_body("gadget", "acme", "")).await;
    assert_eq!(blank.status, 422, "go-tfe's unset registry name");
    assert_eq!(blank.body["errors"][0]["source"]["pointer"], "/data/attributes/registry-name");
    app.create_organization("Big_Corp").await;
    let big = app.owners_token("Big_Corp").await;
    let unreadable = "/api/v2/organizations/Big_Corp/registry-providers";
    let refused = app.post(unreadable, &big, provider_body("widget", "Big_Corp", "private")).await;
    assert_eq!(refused.status, 422, "Terraform would look for big_corp, and refuse `_`: {:?}", refused.body);
    let elsewhere = app.post(PROVIDERS, &owners, provider_body("gadget", "other", "private")).await;
    assert_eq!(elsewhere.status, 422, "a private provider lives in its organization's namespace");
    assert_eq!(app.post(PROVIDERS, &owners, provider_body("widget", "acme", "private")).await.status, 422, "twice");
    let terraform_prefixed = app.post(PROVIDERS, &owners, provider_body("terraform-widget", "acme", "private")).await;
    assert_eq!(terraform_prefixed.status, 422, "Terraform refuses such a type");
    // Terraform 1.0.3's OpenPGP library checks no Ed25519 signature: such a key is refused.
    let gpg = Gpg::new();
    let ed25519 = gpg.generate_with("Modern <m@acme.example>", "ed25519", "sign");
    let refused = app.post(KEYS, &owners, key_body("acme", &ed25519)).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert!(refused.body["errors"][0]["detail"].as_str().unwrap().contains("use an RSA key"));
    let not_a_key = app.post(KEYS, &owners, key_body("acme", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnope\n")).await;
    assert_eq!(not_a_key.status, 422);
    assert_eq!(not_a_key.body["errors"][0]["source"]["pointer"], "/data/attributes/ascii-armor");
    app.stop().await;
}

#[tokio::test]
async fn teams_without_manage_providers_and_other_organizations_change_nothing() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let (_, readers) = app.team_with_token("acme", "readers", json!({"manage-modules": true})).await;
    let (_, publishers) = app.team_with_token("acme", "publishers", json!({"manage-providers": true})).await;
    // A reader sees, and changes nothing.
    assert_eq!(app.get(WIDGET, &readers).await.status, 200);
    assert_eq!(app.post(PROVIDERS, &readers, provider_body("gadget", "acme", "private")).await.status, 404);
    assert_eq!(app.post(&format!("{WIDGET}/versions"), &readers, version_body("1.0.0", &key_id)).await.status, 404);
    assert_eq!(app.post(KEYS, &readers, key_body("acme", &gpg.generate("R <r@example.com>"))).await.status, 404);
    assert_eq!(app.delete(&format!("{KEYS}/acme/{key_id}"), &readers).await.status, 404);
    assert_eq!(app.delete(WIDGET, &readers).await.status, 404);
    // A team that manages providers publishes, and gets the upload links.
    let created = app.post(&format!("{WIDGET}/versions"), &publishers, version_body("1.0.0", &key_id)).await;
    assert_eq!(created.status, 201);
    assert!(created.body["data"]["links"]["shasums-upload"].is_string());
    let read = app.get(&format!("{WIDGET}/versions/1.0.0"), &readers).await;
    assert_eq!(read.status, 200);
    assert!(read.body["data"]["links"].get("shasums-upload").is_none(), "a link is a write capability");
    assert_eq!(read.body["data"]["attributes"]["permissions"]["can-upload-asset"], false);

    // Another organization's owners: acme's namespace, provider and key are not theirs.
    app.create_organization("other").await;
    let other = app.owners_token("other").await;
    let other_armor = gpg.generate("Other <o@other.example>");
    assert_eq!(app.post(KEYS, &other, key_body("acme", &other_armor)).await.status, 404);
    assert_eq!(app.get(&format!("{KEYS}/acme/{key_id}"), &other).await.status, 404);
    assert_eq!(app.get(&format!("{KEYS}?filter[namespace]=acme"), &other).await.status, 404);
    assert_eq!(app.get(WIDGET, &other).await.status, 404);
    assert_eq!(app.post(&format!("{WIDGET}/versions"), &other, version_body("2.0.0", &key_id)).await.status, 404);
    // Their own key does not sign acme's versions, nor acme's theirs.
    let theirs = app.post(KEYS, &other, key_body("other", &other_armor)).await;
    let their_key = theirs.body["data"]["attributes"]["key-id"].as_str().unwrap().to_owned();
    assert_eq!(app.post(&format!("{WIDGET}/versions"), &owners, version_body("2.0.0", &their_key)).await.status, 422);
    let gadget = "/api/v2/organizations/other/registry-providers";
    assert_eq!(app.post(gadget, &other, provider_body("gadget", "other", "private")).await.status, 201);
    let their_versions = "/api/v2/organizations/other/registry-providers/private/other/gadget/versions";
    assert_eq!(app.post(their_versions, &other, version_body("1.0.0", &key_id)).await.status, 422);
    // Nor may they move acme's key to themselves, or theirs into acme.
    let theft = json!({"data": {"type": "gpg-keys", "attributes": {"namespace": "other"}}});
    assert_eq!(app.patch(&format!("{KEYS}/acme/{key_id}"), &other, theft).await.status, 404);
    assert_eq!(app.get(&format!("{KEYS}/acme/{key_id}"), &owners).await.status, 200, "acme's key stays");
    let moved = json!({"data": {"type": "gpg-keys", "attributes": {"namespace": "acme"}}});
    let refused = app.patch(&format!("{KEYS}/other/{their_key}"), &other, moved).await;
    assert_eq!(refused.status, 403);
    assert!(refused.body["errors"][0]["detail"].as_str().unwrap().contains("namespace not authorized"));
    app.stop().await;
}

#[tokio::test]
async fn a_key_signing_versions_stays_until_they_go_and_deletes_remove_everything() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let release = Release::new("1.0.0");
    assert_eq!(publish(&app, &owners, &key_id, &gpg, SIGNER, &release).await, [200, 200, 200]);
    let key = format!("{KEYS}/acme/{key_id}");
    assert_eq!(app.delete(&key, &owners).await.status, 409, "the key signs 1.0.0");
    let listed = app.get(&format!("{KEYS}?filter[namespace]=acme"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);

    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    let archive_url = download.body["download_url"].as_str().unwrap().to_owned();
    assert_eq!(app.delete(&format!("{WIDGET}/versions/1.0.0/platforms/linux/amd64"), &owners).await.status, 204);
    assert!(listed_versions(&app, &owners).await.is_empty(), "no platform left to serve");
    assert_eq!(fetch(&app, &archive_url).await.0, 404, "the archive went with its platform");

    assert_eq!(app.delete(WIDGET, &owners).await.status, 204);
    assert_eq!(app.get(WIDGET, &owners).await.status, 404);
    assert_eq!(app.get(&format!("{WIDGET}/versions/1.0.0"), &owners).await.status, 404);
    assert_eq!(app.delete(&key, &owners).await.status, 204, "its versions are gone with their provider");
    assert_eq!(app.get(&key, &owners).await.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn public_providers_are_records_without_versions() {
    let (app, owners, key_id, _gpg) = acme_with_widget(None).await;
    let created = app.post(PROVIDERS, &owners, provider_body("aws", "hashicorp", "public")).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["attributes"]["namespace"], "hashicorp");
    let aws = "/api/v2/organizations/acme/registry-providers/public/hashicorp/aws";
    assert_eq!(app.get(aws, &owners).await.status, 200);
    assert_eq!(app.post(&format!("{aws}/versions"), &owners, version_body("1.0.0", &key_id)).await.status, 403);
    let listed = app.get(&format!("{PROVIDERS}?filter[registry_name]=public"), &owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 1);
    let all = app.get(PROVIDERS, &owners).await;
    assert_eq!(all.body["meta"]["pagination"]["total-count"], 2);
    assert_eq!(app.delete(aws, &owners).await.status, 204);
    app.stop().await;
}

#[tokio::test]
async fn the_console_lists_providers_their_platforms_and_a_usage_snippet() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    assert_eq!(publish(&app, &owners, &key_id, &gpg, SIGNER, &Release::new("1.0.0")).await, [200, 200, 200]);
    let broken = Release::new("1.1.0");
    let (_, platform) = create_release(&app, &owners, &key_id, &broken).await;
    assert_eq!(app.upload(&link(&platform, "provider-binary-upload"), b"not a zip".to_vec()).await, 422);
    let mut browser = crate::web_console::Browser::new(&app);
    browser.sign_in(&owners).await;
    let page = browser.get("/app/organizations/acme/providers").await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(page.html.contains("acme/widget"), "{}", page.html);
    assert!(
        page.html.contains("source  = &quot;127.0.0.1:") || page.html.contains("source  = \"127.0.0.1:"),
        "{}",
        page.html
    );
    assert!(
        page.html.contains("version = &quot;1.0.0&quot;") || page.html.contains("version = \"1.0.0\""),
        "the latest installable version"
    );
    assert!(page.html.contains("the archive is not a zip file"), "1.1.0 says why it is not served");
    // Another organization's console sees none of it.
    app.create_organization("other").await;
    let mut stranger = crate::web_console::Browser::new(&app);
    stranger.sign_in(&app.owners_token("other").await).await;
    assert_eq!(stranger.get("/app/organizations/acme/providers").await.status, 404);
    app.stop().await;
}

/// The AWS path: each file PUT on its pre-signed S3 link, settled from the bucket's events, and
/// the package's files fetched from S3 through pre-signed links.
#[tokio::test]
#[ignore = "needs the AWS emulator"]
async fn on_dynamodb_and_s3_a_release_settles_from_the_buckets_events_and_downloads_from_s3() {
    let (app, owners) = acme_on_dynamodb().await;
    let (key_id, gpg) = widget_on(&app, &owners).await;
    let release = Release::new("1.0.0");
    let (version, platform) = create_release(&app, &owners, &key_id, &release).await;
    let sums_link = link(&version, "shasums-upload");
    assert_eq!(app.upload(&sums_link, release.sums.clone()).await, 200);
    assert_eq!(app.upload(&link(&version, "shasums-sig-upload"), gpg.sign(SIGNER, &release.sums)).await, 200);
    assert_eq!(app.upload(&link(&platform, "provider-binary-upload"), release.archive.clone()).await, 200);
    let listed = eventually_listed(&app, &owners).await;
    assert_eq!(listed, ["1.0.0"], "settled from the bucket's events");
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    let archive_url = download.body["download_url"].as_str().unwrap();
    assert!(archive_url.contains("X-Amz-Signature"), "a pre-signed S3 link: {archive_url}");
    assert_eq!(fetch(&app, archive_url).await, (200, release.archive.clone()));
    let sums_url = download.body["shasums_url"].as_str().unwrap().to_owned();
    assert_eq!(fetch(&app, &sums_url).await, (200, release.sums.clone()));

    // S3 takes a second PUT on a used link (it cannot refuse one); its event finds nothing
    // waiting, and what is served stays what was checked.
    let other = format!("{}  evil.zip\n", "0".repeat(64)).into_bytes();
    assert_eq!(app.upload(&sums_link, other).await, 200);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let again = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    assert_eq!(fetch(&app, again.body["shasums_url"].as_str().unwrap()).await, (200, release.sums.clone()));
    let read = app.get(&format!("{WIDGET}/versions/1.0.0"), &owners).await;
    assert_eq!(read.body["data"]["attributes"]["error"], Value::Null);
    app.stop().await;
}

/// The protocol's versions once one is listed (settling from the bucket's events takes a moment).
async fn eventually_listed(app: &TestApp, owners: &str) -> Vec<String> {
    for _ in 0..600 {
        let listed = listed_versions(app, owners).await;
        if !listed.is_empty() {
            return listed;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Vec::new()
}

#[tokio::test]
async fn deleting_the_organization_removes_its_providers_keys_and_files() {
    let (app, owners, key_id, gpg) = acme_with_widget(None).await;
    let release = Release::new("1.0.0");
    assert_eq!(publish(&app, &owners, &key_id, &gpg, SIGNER, &release).await, [200, 200, 200]);
    // A version still waiting for its files owns their upload links too.
    create_release(&app, &owners, &key_id, &Release::new("1.1.0")).await;
    let download = app.get("/api/registry/v1/providers/acme/widget/1.0.0/download/linux/amd64", &owners).await;
    let files: Vec<String> = ["download_url", "shasums_url", "shasums_signature_url"]
        .iter()
        .map(|name| download.body[name].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(app.delete("/api/v2/organizations/acme", &app.admin_token).await.status, 204);
    for file in &files {
        assert_eq!(fetch(&app, file).await.0, 404, "{file} went with its organization");
    }
    app.create_organization("acme").await;
    let owners = app.owners_token("acme").await;
    assert_eq!(
        app.get(&format!("{KEYS}?filter[namespace]=acme"), &owners).await.body["meta"]["pagination"]["total-count"],
        0
    );
    assert_eq!(app.get(PROVIDERS, &owners).await.body["meta"]["pagination"]["total-count"], 0);
    app.stop().await;
}

#[tokio::test]
async fn a_release_signed_by_a_signing_subkey_is_served() {
    let (app, owners) = acme().await;
    let gpg = Gpg::new();
    let uid = "Acme Subkeys <subkeys@acme.example>";
    let armor = gpg.generate_with_signing_subkey(uid);
    let key = app.post(KEYS, &owners, key_body("acme", &armor)).await;
    assert_eq!(key.status, 201, "{:?}", key.body);
    let key_id = key.body["data"]["attributes"]["key-id"].as_str().unwrap().to_owned();
    assert_eq!(app.post(PROVIDERS, &owners, provider_body("widget", "acme", "private")).await.status, 201);
    let release = Release::new("1.0.0");
    assert_eq!(publish(&app, &owners, &key_id, &gpg, uid, &release).await, [200, 200, 200]);
    let version = app.get(&format!("{WIDGET}/versions/1.0.0"), &owners).await;
    assert_eq!(version.body["data"]["attributes"]["error"], Value::Null, "{:?}", version.body);
    assert_eq!(listed_versions(&app, &owners).await, ["1.0.0"]);
    app.stop().await;
}

#[tokio::test]
async fn an_organization_with_private_providers_keeps_a_name_terraform_reads() {
    let (app, owners, _, _gpg) = acme_with_widget(None).await;
    let rename = |name: &str| json!({"data": {"type": "organizations", "attributes": {"name": name}}});
    let refused = app.patch("/api/v2/organizations/acme", &owners, rename("Acme_Corp")).await;
    assert_eq!(refused.status, 422, "{:?}", refused.body);
    assert_eq!(refused.body["errors"][0]["source"]["pointer"], "/data/attributes/name");
    assert_eq!(app.patch("/api/v2/organizations/acme", &owners, rename("acme-corp")).await.status, 200);
    let moved = "/api/v2/organizations/acme-corp/registry-providers/private/acme-corp/widget";
    assert_eq!(app.get(moved, &owners).await.status, 200, "the provider follows its organization's name");
    // Once its last private provider is gone, any name will do.
    assert_eq!(app.delete(moved, &owners).await.status, 204);
    assert_eq!(app.patch("/api/v2/organizations/acme-corp", &owners, rename("Acme_Corp")).await.status, 200);
    app.stop().await;
}
