//! Publishing modules from a VCS repository, over HTTP: the publish request and its 422s, the
//! deprecated form, tag-based versions made by the scheduled job, webhook deliveries, branch-based
//! versions, switching between the two, and test settings of a VCS module.
//!
//! Each test runs dev-server against a local stand-in of GitHub's REST API (a `github_enterprise`
//! connection, whose web and API URLs can both point at it). The stand-in serves one tarball per
//! ref whose `main.tf` names the ref, so a downloaded version shows which ref it was built from,
//! and records what reached it (requests, registered webhooks). The job runs off the request path,
//! so tests poll the module until its state settles instead of sleeping.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hangar::registry::publishing::{run_pending_at, RunBounds};
use hangar_tests::{Reply, TestApp};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::net::TcpListener;

const GH_TOKEN: &str = "gh-token";
const OWNER: &str = "acme-corp";
const VPC_REPO: &str = "acme-corp/terraform-aws-vpc";
const VPC: &str = "/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws";
pub(crate) const PUBLISH: &str = "/api/v2/organizations/acme/registry-modules/vcs";
const MODULES: &str = "/api/v2/organizations/acme/registry-modules";

pub(crate) const SHA_100: &str = "1000000000000000000000000000000000000000";
pub(crate) const SHA_110: &str = "1100000000000000000000000000000000000000";
pub(crate) const SHA_RELEASE: &str = "ee00000000000000000000000000000000000000";
/// The commit a tag pushed later (announced by a webhook delivery) points at.
pub(crate) const SHA_120: &str = "1200000000000000000000000000000000000000";
/// The head of `main`.
const SHA_MAIN: &str = "abc1234def5678abc1234def5678abc1234def56";
/// What the stand-in's errors for `terraform-aws-leaky` say: nothing a caller should read.
const LEAK: &str = "upstream db at 10.0.0.7 refused password hunter2";
/// How long the job gets to settle a module.
const SETTLE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// The GitHub REST stand-in.

/// What reached the stand-in.
#[derive(Default)]
struct Seen {
    /// Path and query of every request.
    requests: Vec<String>,
    /// (repository, body) of every webhook registration.
    hooks: Vec<(String, Value)>,
    /// (repository, tag, commit) of tags pushed since the stand-in started, listed after those
    /// of [`tags_of`].
    pushed: Vec<(String, String, String)>,
}

#[derive(Clone, Default)]
pub(crate) struct GitHub {
    url: String,
    seen: Arc<Mutex<Seen>>,
}

impl GitHub {
    /// Adds a tag to `repo` (its name without the owner), as a push would, without a delivery.
    pub(crate) fn push_tag(&self, repo: &str, tag: &str, sha: &str) {
        self.seen.lock().unwrap().pushed.push((repo.to_owned(), tag.to_owned(), sha.to_owned()));
    }

    pub(crate) fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().requests.clone()
    }

    pub(crate) fn hooks(&self, repo: &str) -> Vec<Value> {
        self.seen.lock().unwrap().hooks.iter().filter(|(r, _)| r == repo).map(|(_, body)| body.clone()).collect()
    }

    /// Records the request and refuses it as GitHub would: a bad token is 401, a repository the
    /// token may not see is 404 (`terraform-aws-hidden`, other owners) or 403
    /// (`terraform-aws-forbidden`).
    fn gate(&self, headers: &HeaderMap, uri: &Uri, owner: &str, repo: &str) -> Result<(), Refusal> {
        self.seen.lock().unwrap().requests.push(uri.to_string());
        let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if authorization != format!("Bearer {GH_TOKEN}") {
            return Err(refusal(StatusCode::UNAUTHORIZED, "Bad credentials"));
        }
        match (owner, repo) {
            (OWNER, "terraform-aws-forbidden") => {
                Err(refusal(StatusCode::FORBIDDEN, "Resource not accessible by personal access token"))
            }
            (OWNER, "terraform-aws-hidden") => Err(refusal(StatusCode::NOT_FOUND, "Not Found")),
            (OWNER, "terraform-aws-leaky") => Err(refusal(StatusCode::INTERNAL_SERVER_ERROR, LEAK)),
            (OWNER, _) => Ok(()),
            _ => Err(refusal(StatusCode::NOT_FOUND, "Not Found")),
        }
    }
}

/// An error as GitHub answers it.
type Refusal = (StatusCode, Json<Value>);
type Answer = Result<Response, Refusal>;

fn refusal(status: StatusCode, message: &str) -> Refusal {
    (status, Json(json!({ "message": message, "documentation_url": "https://docs.github.com/rest" })))
}

/// The tags a repository lists, with their commits.
fn tags_of(repo: &str) -> Vec<(String, &'static str)> {
    let tags = |listed: &[(&str, &'static str)]| listed.iter().map(|(name, sha)| ((*name).to_owned(), *sha)).collect();
    match repo {
        "terraform-aws-notags" => tags(&[("release-x", SHA_RELEASE), ("latest", SHA_MAIN), ("v1.2", SHA_110)]),
        "terraform-aws-longname" | "terraform-aws-archivedown" => tags(&[("v1.0.0", SHA_100)]),
        // More tags than one store transaction could add at once.
        "terraform-aws-manytags" => (0..MANY_TAGS).map(|patch| (format!("v1.0.{patch}"), SHA_100)).collect(),
        // A monorepo: each module's tags carry its prefix; `v9.0.0` belongs to none of them.
        MONOREPO => tags(&[
            ("vpc/v1.0.0", SHA_100),
            ("vpc/1.1.0", SHA_110),
            ("dns-v2.0.0", SHA_RELEASE),
            ("leaky/v1.0.0", SHA_100),
            ("v9.0.0", SHA_MAIN),
        ]),
        _ => tags(&[("v1.0.0", SHA_100), ("1.1.0", SHA_110), ("release-x", SHA_RELEASE)]),
    }
}

const MANY_TAGS: usize = 40;
/// The name of the monorepo [`tarball`] lays out with a folder per module.
pub(crate) const MONOREPO: &str = "platform";

/// The commit a ref names: a listed tag, the tag pushed later, a branch or a commit SHA.
fn commit_of(repo: &str, git_ref: &str) -> String {
    let later = [("v1.2.0", SHA_120), ("main", SHA_MAIN)].map(|(name, sha)| (name.to_owned(), sha));
    let known = tags_of(repo).into_iter().chain(later);
    known.into_iter().find(|(name, _)| name == git_ref).map_or_else(|| git_ref.to_owned(), |(_, sha)| sha.to_owned())
}

/// What `main.tf` holds at `git_ref`: it names the ref, so downloads tell versions apart.
pub(crate) fn main_tf(git_ref: &str) -> String {
    format!("# built from ref {git_ref}\nvariable \"cidr\" {{}}\noutput \"ref\" {{ value = \"{git_ref}\" }}\n")
}

/// A tarball as GitHub serves it: a pax global header naming the commit, then everything in
/// one top-level directory `<owner>-<repo>-<short sha>/`.
fn tarball(owner: &str, repo: &str, git_ref: &str) -> Vec<u8> {
    let sha = commit_of(repo, git_ref);
    // A ref the stand-in does not know stands for its own commit; only its letters and digits
    // name the top-level directory, as a SHA's would.
    let short: String = sha.chars().filter(char::is_ascii_alphanumeric).take(7).collect();
    let top = format!("{owner}-{repo}-{short}");
    let gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gzip);
    let comment = format!("comment={sha}\n");
    let record = format!("{} {comment}", comment.len() + 3);
    let mut pax = tar::Header::new_ustar();
    pax.set_entry_type(tar::EntryType::XGlobalHeader);
    pax.set_size(record.len() as u64);
    pax.set_mode(0o644);
    tar.append_data(&mut pax, "pax_global_header", record.as_bytes()).unwrap();
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_size(0);
    dir.set_mode(0o755);
    tar.append_data(&mut dir, format!("{top}/"), std::io::empty()).unwrap();
    let mut files =
        vec![("main.tf".to_owned(), main_tf(git_ref)), ("README.md".to_owned(), format!("# {repo}\nAt {git_ref}.\n"))];
    if repo == MONOREPO {
        files = monorepo_files(git_ref);
    }
    for (name, body) in files {
        let mut file = tar::Header::new_gnu();
        file.set_size(body.len() as u64);
        file.set_mode(0o644);
        tar.append_data(&mut file, format!("{top}/{name}"), body.as_bytes()).unwrap();
    }
    if repo == MONOREPO {
        // A module whose symlink leads to another module's folder.
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        link.set_mode(0o777);
        tar.append_link(&mut link, format!("{top}/modules/leaky/vpc.tf"), "../vpc/main.tf").unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// The monorepo's files at `git_ref`: a folder per module, each `main.tf` naming the module and
/// the ref, and files of the repository's own.
fn monorepo_files(git_ref: &str) -> Vec<(String, String)> {
    let module = |name: &str| format!("# module {name}\n{}", main_tf(git_ref));
    vec![
        ("README.md".into(), format!("# platform\nAt {git_ref}.\n")),
        (".github/workflows/ci.yml".into(), "on: push\n".into()),
        ("modules/vpc/main.tf".into(), module("vpc")),
        ("modules/vpc/README.md".into(), "# VPC\nThe network.\n".into()),
        ("modules/dns/main.tf".into(), module("dns")),
        ("modules/leaky/main.tf".into(), module("leaky")),
    ]
}

type Repo = Path<(String, String)>;
type RepoAnd = Path<(String, String, String)>;

async fn repository(State(gh): State<GitHub>, headers: HeaderMap, uri: Uri, Path((owner, repo)): Repo) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    Ok(Json(json!({ "html_url": format!("{}/{owner}/{repo}", gh.url), "default_branch": "main" })).into_response())
}

async fn tags(State(gh): State<GitHub>, headers: HeaderMap, uri: Uri, Path((owner, repo)): Repo) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    if unavailable(&gh, &repo, "tags") {
        return Err(refusal(StatusCode::BAD_GATEWAY, "Server Error"));
    }
    let page = uri.query().unwrap_or_default().split('&').find_map(|p| p.strip_prefix("page=")).unwrap_or("1");
    let pushed: Vec<(String, String)> = {
        let seen = gh.seen.lock().unwrap();
        seen.pushed.iter().filter(|(r, _, _)| *r == repo).map(|(_, tag, sha)| (tag.clone(), sha.clone())).collect()
    };
    let listed: Vec<Value> = match page {
        "1" => tags_of(&repo)
            .into_iter()
            .map(|(name, sha)| (name, sha.to_owned()))
            .chain(pushed)
            .map(|(name, sha)| json!({ "name": name, "commit": { "sha": sha } }))
            .collect(),
        _ => Vec::new(),
    };
    Ok(Json(listed).into_response())
}

async fn branch(
    State(gh): State<GitHub>,
    headers: HeaderMap,
    uri: Uri,
    Path((owner, repo, branch)): RepoAnd,
) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    match branch.as_str() {
        "main" => Ok(Json(json!({ "name": "main", "commit": { "sha": SHA_MAIN } })).into_response()),
        _ => Err(refusal(StatusCode::NOT_FOUND, "Branch not found")),
    }
}

async fn commit(State(gh): State<GitHub>, headers: HeaderMap, uri: Uri, Path((owner, repo, sha)): RepoAnd) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    if repo == "terraform-aws-moved" {
        // The same server under another host name, and a repository the token can read.
        let elsewhere = gh.url.replace("127.0.0.1", "localhost");
        let location = format!("{elsewhere}/repos/{owner}/terraform-aws-vpc/commits/{sha}");
        return Ok((StatusCode::FOUND, [(header::LOCATION, location)]).into_response());
    }
    let known = [SHA_100, SHA_110, SHA_RELEASE, SHA_120, SHA_MAIN];
    match known.into_iter().find(|full| full.starts_with(&sha.to_ascii_lowercase())) {
        Some(full) => Ok(Json(json!({ "sha": full })).into_response()),
        None => Err(refusal(StatusCode::UNPROCESSABLE_ENTITY, &format!("No commit found for SHA: {sha}"))),
    }
}

async fn archive(
    State(gh): State<GitHub>,
    headers: HeaderMap,
    uri: Uri,
    Path((owner, repo, git_ref)): RepoAnd,
) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    if unavailable(&gh, &repo, "tarball") {
        return Err(refusal(StatusCode::BAD_GATEWAY, "Server Error"));
    }
    let body = match repo.as_str() {
        "terraform-aws-longname" => long_name_bomb(&owner, &repo).to_vec(),
        _ => tarball(&owner, &repo, &git_ref),
    };
    Ok(([(header::CONTENT_TYPE, "application/x-gzip")], body).into_response())
}

/// Whether the stand-in answers 502 to this `call` (`tags`, `tarball`) of `repo`: always for
/// `terraform-aws-down…`'s tags and `terraform-aws-archivedown`'s tarballs, the first time only
/// for `terraform-aws-flaky…`'s tags.
fn unavailable(gh: &GitHub, repo: &str, call: &str) -> bool {
    let asked = gh.requests().iter().filter(|r| r.contains(&format!("/{repo}/{call}"))).count();
    match call {
        "tags" if repo.starts_with("terraform-aws-down") => true,
        "tags" if repo.starts_with("terraform-aws-flaky") => asked == 1,
        "tarball" => repo == "terraform-aws-archivedown",
        _ => false,
    }
}

/// `terraform-aws-longname`'s tarball: a GNU long-name entry that claims a GiB and holds it,
/// then `main.tf` in the top-level directory. The GiB is zeros, about a megabyte deflated: one
/// MiB of zeros is deflated once and its blocks repeated (a full flush leaves them standing
/// alone), so neither the stand-in nor the test ever holds or deflates the GiB.
fn long_name_bomb(owner: &str, repo: &str) -> &'static [u8] {
    static BOMB: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BOMB.get_or_init(|| {
        const MIB: usize = 1 << 20;
        let mut long = tar::Header::new_gnu();
        long.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        long.set_entry_type(tar::EntryType::GNULongName);
        long.set_size(1024 * MIB as u64);
        long.set_mode(0o644);
        long.set_cksum();
        let mut rest = tar::Builder::new(Vec::new());
        let body = main_tf("v1.0.0");
        let mut file = tar::Header::new_gnu();
        file.set_size(body.len() as u64);
        file.set_mode(0o644);
        rest.append_data(&mut file, format!("{owner}-{repo}-1000000/main.tf"), body.as_bytes()).unwrap();
        let rest = rest.into_inner().unwrap();

        let zeros = vec![0; MIB];
        let (mut crc, mut zeros_crc) = (flate2::Crc::new(), flate2::Crc::new());
        zeros_crc.update(&zeros);
        let zeros_deflated = deflated(&zeros);
        let mut blocks = deflated(long.as_bytes());
        crc.update(long.as_bytes());
        for _ in 0..1024 {
            blocks.extend_from_slice(&zeros_deflated);
            crc.combine(&zeros_crc);
        }
        blocks.extend(deflated(&rest));
        crc.update(&rest);
        // The last block: final, fixed Huffman codes, nothing but its end.
        blocks.extend([0x03, 0x00]);
        let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        gzip.extend(blocks);
        gzip.extend(crc.sum().to_le_bytes());
        gzip.extend(crc.amount().to_le_bytes());
        gzip
    })
}

/// `data` as raw deflate blocks that refer to nothing before them, ending byte-aligned.
fn deflated(data: &[u8]) -> Vec<u8> {
    let mut deflate = flate2::Compress::new(flate2::Compression::best(), false);
    let mut out = Vec::with_capacity(data.len() + 1024);
    deflate.compress_vec(data, &mut out, flate2::FlushCompress::Full).unwrap();
    assert_eq!(deflate.total_in(), data.len() as u64, "all of it deflated");
    out
}

async fn create_hook(
    State(gh): State<GitHub>,
    headers: HeaderMap,
    uri: Uri,
    Path((owner, repo)): Repo,
    Json(body): Json<Value>,
) -> Answer {
    gh.gate(&headers, &uri, &owner, &repo)?;
    gh.seen.lock().unwrap().hooks.push((format!("{owner}/{repo}"), body));
    Ok((StatusCode::CREATED, Json(json!({ "id": 1, "type": "Repository", "active": true }))).into_response())
}

async fn github_stand_in() -> GitHub {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gh = GitHub { url: format!("http://{}", listener.local_addr().unwrap()), seen: Arc::default() };
    let router = Router::new()
        .route("/repos/{owner}/{repo}", get(repository))
        .route("/repos/{owner}/{repo}/tags", get(tags))
        .route("/repos/{owner}/{repo}/branches/{*branch}", get(branch))
        .route("/repos/{owner}/{repo}/commits/{sha}", get(commit))
        .route("/repos/{owner}/{repo}/tarball/{*ref}", get(archive))
        .route("/repos/{owner}/{repo}/hooks", post(create_hook))
        .with_state(gh.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    gh
}

// ---------------------------------------------------------------------------------------------
// Fixture and helpers.

/// dev-server with organization `acme`, its owners token, and a VCS connection to the stand-in.
pub(crate) struct Fixture {
    pub(crate) app: TestApp,
    pub(crate) owners: String,
    pub(crate) gh: GitHub,
    /// The connection's `ot-…` id.
    pub(crate) oauth_token: String,
}

async fn connect(app: &TestApp, token: &str, org: &str, gh: &GitHub) -> String {
    let body = json!({"data": {"type": "oauth-clients", "attributes": {
        "service-provider": "github_enterprise",
        "http-url": gh.url,
        "api-url": gh.url,
        "oauth-token-string": GH_TOKEN,
    }}});
    let created = app.post(&format!("/api/v2/organizations/{org}/oauth-clients"), token, body).await;
    assert_eq!(created.status, 201, "creating a VCS connection: {:?}", created.body);
    let id = created.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"].as_str().expect("an ot- id");
    assert!(id.starts_with("ot-"), "{id}");
    id.to_owned()
}

pub(crate) async fn fixture() -> Fixture {
    let gh = github_stand_in().await;
    let (app, owners) = TestApp::with_organization_and_vcs_stand_ins("acme").await;
    let oauth_token = connect(&app, &owners, "acme", &gh).await;
    Fixture { app, owners, gh, oauth_token }
}

/// A publish request for `identifier` with extra `vcs-repo` keys.
fn publish_body(identifier: &str, oauth_token: &str, extra: Value) -> Value {
    let mut repo = json!({ "identifier": identifier, "oauth-token-id": oauth_token, "display_identifier": identifier });
    for (key, value) in extra.as_object().expect("an object") {
        repo[key] = value.clone();
    }
    json!({"data": {"type": "registry-modules", "attributes": {"vcs-repo": repo}}})
}

impl Fixture {
    pub(crate) async fn publish(&self, identifier: &str, extra: Value) -> Reply {
        self.app.post(PUBLISH, &self.owners, publish_body(identifier, &self.oauth_token, extra)).await
    }

    /// Publishes `identifier` tag-based and asserts it is accepted.
    async fn published(&self, identifier: &str) -> Value {
        let reply = self.publish(identifier, json!({})).await;
        assert_eq!(reply.status, 201, "publishing {identifier}: {:?}", reply.body);
        reply.body["data"].clone()
    }

    /// Polls `path` until `done` holds for the module's attributes; returns them.
    pub(crate) async fn until(&self, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.until_as(&self.owners, SETTLE, path, what, done).await
    }

    /// The same, reading with `token` and waiting up to `within`.
    async fn until_as(
        &self,
        token: &str,
        within: Duration,
        path: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let reply = self.app.get(path, token).await;
            assert_eq!(reply.status, 200, "reading {path}: {:?}", reply.body);
            let attributes = &reply.body["data"]["attributes"];
            if done(attributes) {
                return attributes.clone();
            }
            assert!(Instant::now() < deadline, "{what} within {within:?}; the module is {attributes}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the module's versions are exactly `expected`, all settled.
    pub(crate) async fn versions(&self, path: &str, expected: &[(&str, &str)]) -> Value {
        let mut want: Vec<(String, String)> = expected.iter().map(|(v, s)| ((*v).into(), (*s).into())).collect();
        want.sort();
        self.until(path, &format!("versions {want:?}"), |a| statuses(a) == want).await
    }

    pub(crate) async fn delivery(
        &self,
        webhook_url: &str,
        event: &str,
        body: &[u8],
        signature: Option<&str>,
    ) -> StatusCode {
        let mut request = self
            .app
            .client
            .post(webhook_url)
            .header("Content-Type", "application/json")
            .header("X-GitHub-Event", event)
            .header("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
            .header("User-Agent", "GitHub-Hookshot/044aadd")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("X-Hub-Signature-256", signature);
        }
        request.send().await.expect("the delivery reaches dev-server").status()
    }

    /// The files of a version's archive as the registry protocol serves it: path → content.
    pub(crate) async fn download(&self, name: &str, version: &str) -> BTreeMap<String, String> {
        let path = format!("/api/registry/v1/modules/acme/{name}/aws/{version}/download");
        let reply = self.app.get(&path, &self.owners).await;
        assert_eq!(reply.status, 204, "{path}: {:?}", reply.body);
        let link = reply.headers["x-terraform-get"].to_str().unwrap().to_owned();
        assert!(link.ends_with("&archive=tar.gz"), "{link}");
        let link = link.trim_end_matches("&archive=tar.gz");
        let link = if link.starts_with('/') { format!("{}{link}", self.app.url) } else { link.to_owned() };
        let fetched = self.app.client.get(&link).send().await.unwrap();
        assert_eq!(fetched.status(), 200, "fetching the archive of {version}");
        let bytes = fetched.bytes().await.unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        let mut files = BTreeMap::new();
        for entry in archive.entries().expect("a tar.gz archive") {
            let mut entry = entry.expect("an entry");
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let name = entry.path().unwrap().to_string_lossy().trim_start_matches("./").to_owned();
            let mut content = String::new();
            entry.read_to_string(&mut content).unwrap();
            files.insert(name, content);
        }
        files
    }
}

/// `version-statuses` as sorted (version, status) pairs.
fn statuses(attributes: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = attributes["version-statuses"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|s| {
                    (s["version"].as_str().unwrap_or("").to_owned(), s["status"].as_str().unwrap_or("").to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    all.sort();
    all
}

fn version_body(attributes: Value) -> Value {
    json!({"data": {"type": "registry-module-versions", "attributes": attributes}})
}

pub(crate) fn patch_body(attributes: Value) -> Value {
    json!({"data": {"type": "registry-modules", "attributes": attributes}})
}

/// `X-Hub-Signature-256` of `body` under `secret`.
pub(crate) fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// GitHub's `push` event for a newly created tag.
pub(crate) fn tag_push(tag: &str, sha: &str) -> Vec<u8> {
    json!({
        "ref": format!("refs/tags/{tag}"),
        "before": "0000000000000000000000000000000000000000",
        "after": sha,
        "created": true,
        "deleted": false,
        "forced": false,
        "base_ref": "refs/heads/main",
        "compare": format!("https://github.com/{VPC_REPO}/compare/{tag}"),
        "commits": [],
        "head_commit": { "id": sha, "message": "Release", "timestamp": "2024-05-01T12:00:00Z" },
        "repository": { "full_name": VPC_REPO, "name": "terraform-aws-vpc" },
        "pusher": { "name": "octocat" },
    })
    .to_string()
    .into_bytes()
}

/// The webhook secret the module registered for `repo`.
pub(crate) fn hook_secret(gh: &GitHub, repo: &str) -> String {
    let hooks = gh.hooks(repo);
    assert_eq!(hooks.len(), 1, "one webhook on {repo}: {hooks:?}");
    hooks[0]["config"]["secret"].as_str().expect("a secret").to_owned()
}

// ---------------------------------------------------------------------------------------------
// Publishing, tag-based.

#[tokio::test]
async fn publishing_from_tags_answers_201_pending_with_the_repository_and_no_versions_yet() {
    let fx = fixture().await;
    let display = "ACME-Corp/terraform-aws-vpc";
    let reply = fx.publish(VPC_REPO, json!({ "display_identifier": display })).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/vnd.api+json");
    let data = &reply.body["data"];
    assert_eq!(data["type"], "registry-modules");
    assert!(data["id"].as_str().unwrap().starts_with("mod-"), "{}", data["id"]);
    let attributes = &data["attributes"];
    assert_eq!(attributes["name"], "vpc", "the name comes from terraform-<provider>-<name>");
    assert_eq!(attributes["provider"], "aws");
    assert_eq!(attributes["namespace"], "acme");
    assert_eq!(attributes["registry-name"], "private");
    assert_eq!(attributes["status"], "pending");
    assert_eq!(attributes["version-statuses"], json!([]));
    assert_eq!(attributes["publishing-mechanism"], "git_tag");
    let vcs = &attributes["vcs-repo"];
    assert_eq!(vcs["branch"], "", "empty when tag-based");
    assert_eq!(vcs["ingress-submodules"], false);
    assert_eq!(vcs["identifier"], VPC_REPO);
    assert_eq!(vcs["display-identifier"], display, "taken from the request's display_identifier");
    assert_eq!(vcs["oauth-token-id"], fx.oauth_token.as_str());
    assert_eq!(vcs["service-provider"], "github_enterprise");
    assert_eq!(vcs["repository-http-url"], format!("{}/{VPC_REPO}", fx.gh.url));
    let webhook = vcs["webhook-url"].as_str().expect("a webhook-url");
    let uuid = webhook.strip_prefix(&format!("{}/webhooks/vcs/", fx.app.url)).expect("<base>/webhooks/vcs/<uuid>");
    assert!(!uuid.is_empty() && !uuid.contains('/'), "{webhook}");
    assert_eq!(data["relationships"]["organization"]["data"], json!({"id": "acme", "type": "organizations"}));
    assert_eq!(data["links"]["self"], VPC);
}

#[tokio::test]
async fn every_semver_tag_becomes_an_ok_version_and_other_tags_are_ignored() {
    let fx = fixture().await;
    fx.published(VPC_REPO).await;
    // v1.0.0 (with its `v`) and 1.1.0 are semantic versions; release-x is not.
    let settled = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    assert_eq!(settled["status"], "setup_complete");
    let listed = fx.app.get(&format!("{VPC}/versions"), &fx.owners).await;
    assert_eq!(listed.status, 200, "{:?}", listed.body);
    let versions: Vec<&str> =
        listed.body["data"].as_array().unwrap().iter().map(|v| v["attributes"]["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["1.0.0", "1.1.0"]);
    let requests = fx.gh.requests();
    assert!(
        !requests.iter().any(|r| r.contains("/tarball/release-x")),
        "a tag that is not a version is never fetched: {requests:?}"
    );
}

#[tokio::test]
async fn a_repository_with_more_tags_than_one_transaction_holds_gets_every_version() {
    let fx = fixture().await;
    fx.published("acme-corp/terraform-aws-manytags").await;
    let path = "/api/v2/organizations/acme/registry-modules/private/acme/manytags/aws";
    let all_ok = fx
        .until_as(&fx.owners, SETTLE * 6, path, "every tag a version", |attributes| {
            let statuses = attributes["version-statuses"].as_array().map_or(&[][..], Vec::as_slice);
            statuses.len() == MANY_TAGS && statuses.iter().all(|s| s["status"] == "ok")
        })
        .await;
    assert_eq!(all_ok["status"], "setup_complete");
}

#[tokio::test]
async fn a_tag_version_downloads_as_the_tag_s_files_at_the_archive_root() {
    let fx = fixture().await;
    fx.published(VPC_REPO).await;
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    let files = fx.download("vpc", "1.1.0").await;
    assert_eq!(files.keys().collect::<Vec<_>>(), ["README.md", "main.tf"], "the top-level directory is stripped");
    assert_eq!(files["main.tf"], main_tf("1.1.0"), "1.1.0 is built from tag 1.1.0");
    assert_eq!(fx.download("vpc", "1.0.0").await["main.tf"], main_tf("v1.0.0"), "1.0.0 from tag v1.0.0");
}

#[tokio::test]
async fn publishing_registers_a_webhook_with_its_url_and_a_secret() {
    let fx = fixture().await;
    let reply = fx.publish(VPC_REPO, json!({})).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let hooks = fx.gh.hooks(VPC_REPO);
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    let config = &hooks[0]["config"];
    assert_eq!(config["url"], reply.body["data"]["attributes"]["vcs-repo"]["webhook-url"]);
    assert_eq!(config["content_type"], "json");
    let secret = config["secret"].as_str().expect("a secret");
    assert!(secret.len() >= 16, "a secret worth the name: {secret:?}");
    let events: Vec<&str> = hooks[0]["events"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(events.contains(&"push"), "tags arrive as push events: {events:?}");
    assert!(!reply.body.to_string().contains(secret), "the secret is not shown");
    let shown = fx.app.get(VPC, &fx.owners).await;
    assert!(!shown.body.to_string().contains(secret), "the secret is not shown");
}

#[tokio::test]
async fn every_malformed_publish_request_is_422_pointing_at_its_attribute() {
    let fx = fixture().await;
    // A token of another organization is unknown in this one.
    fx.app.create_organization("globex").await;
    let globex_owners = fx.app.owners_token("globex").await;
    let globex_token = connect(&fx.app, &globex_owners, "globex", &fx.gh).await;
    let repo = "/data/attributes/vcs-repo";
    let ot = fx.oauth_token.as_str();
    let body = |attributes: Value| json!({"data": {"type": "registry-modules", "attributes": attributes}});
    let vcs = |repo: Value| body(json!({ "vcs-repo": repo }));
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        ("no identifier", vcs(json!({ "oauth-token-id": ot })), vec![format!("{repo}/identifier")]),
        (
            "an empty identifier",
            vcs(json!({ "identifier": "", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        ("no vcs-repo at all", body(json!({})), vec![format!("{repo}/identifier")]),
        (
            "an identifier that is not a string",
            vcs(json!({ "identifier": 5, "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "both oauth-token-id and github-app-installation-id",
            vcs(json!({ "identifier": VPC_REPO, "oauth-token-id": ot, "github-app-installation-id": "ghain-1" })),
            vec![format!("{repo}/oauth-token-id"), format!("{repo}/github-app-installation-id")],
        ),
        (
            "github-app-installation-id alone",
            vcs(json!({ "identifier": VPC_REPO, "github-app-installation-id": "ghain-1" })),
            vec![format!("{repo}/github-app-installation-id")],
        ),
        ("neither", vcs(json!({ "identifier": VPC_REPO })), vec![format!("{repo}/oauth-token-id")]),
        (
            "an unknown oauth token",
            vcs(json!({ "identifier": VPC_REPO, "oauth-token-id": "ot-doesnotexist" })),
            vec![format!("{repo}/oauth-token-id")],
        ),
        (
            "another organization's oauth token",
            vcs(json!({ "identifier": VPC_REPO, "oauth-token-id": globex_token })),
            vec![format!("{repo}/oauth-token-id")],
        ),
        (
            "a repository not named terraform-<provider>-<name>",
            vcs(json!({ "identifier": "acme-corp/vpc", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "a repository named terraform-<provider> only",
            vcs(json!({ "identifier": "acme-corp/terraform-aws", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "an identifier without an organization",
            vcs(json!({ "identifier": "terraform-aws-vpc", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "an identifier with too many segments for GitHub",
            vcs(json!({ "identifier": "acme-corp/infra/terraform-aws-vpc", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "an identifier with a space",
            vcs(json!({ "identifier": "acme corp/terraform-aws-vpc", "oauth-token-id": ot })),
            vec![format!("{repo}/identifier")],
        ),
        (
            "a wrong data.type",
            json!({"data": {"type": "workspaces", "attributes": {"vcs-repo": {"identifier": VPC_REPO, "oauth-token-id": ot}}}}),
            vec!["/data/type".to_owned()],
        ),
    ];
    for (case, body, pointers) in cases {
        let reply = fx.app.post(PUBLISH, &fx.owners, body).await;
        assert_eq!(reply.status, 422, "{case}: {:?}", reply.body);
        assert!(
            pointers.iter().any(|p| p == reply.pointer()),
            "{case}: pointer {:?}, wanted one of {pointers:?}",
            reply.pointer()
        );
    }
    let listed = fx.app.get(MODULES, &fx.owners).await;
    assert_eq!(listed.body["meta"]["pagination"]["total-count"], 0, "no refused request made a module");
    assert!(fx.gh.hooks(VPC_REPO).is_empty(), "no refused request registered a webhook");
}

#[tokio::test]
async fn publishing_needs_the_manage_modules_permission_in_an_existing_organization() {
    let fx = fixture().await;
    let (_, workspaces) = fx.app.team_with_token("acme", "platform", json!({"manage-workspaces": true})).await;
    let body = publish_body(VPC_REPO, &fx.oauth_token, json!({}));
    assert_eq!(fx.app.post(PUBLISH, &workspaces, body.clone()).await.status, 404, "user not authorized");
    let elsewhere = "/api/v2/organizations/nowhere/registry-modules/vcs";
    assert_eq!(fx.app.post(elsewhere, &fx.owners, body.clone()).await.status, 404);
    let (_, modules) = fx.app.team_with_token("acme", "modules", json!({"manage-modules": true})).await;
    let reply = fx.app.post(PUBLISH, &modules, body).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
}

#[tokio::test]
async fn publishing_the_same_repository_twice_is_422() {
    let fx = fixture().await;
    let first = fx.published(VPC_REPO).await;
    let again = fx.publish(VPC_REPO, json!({})).await;
    assert_eq!(again.status, 422, "{:?}", again.body);
    assert_eq!(fx.gh.hooks(VPC_REPO).len(), 1, "the refused publish registers no second webhook");
    let shown = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(shown.body["data"]["id"], first["id"]);
    assert_eq!(shown.body["data"]["attributes"]["vcs-repo"], first["attributes"]["vcs-repo"]);
}

#[tokio::test]
async fn the_deprecated_endpoint_publishes_into_the_oauth_token_s_organization() {
    let fx = fixture().await;
    let body = publish_body(VPC_REPO, &fx.oauth_token, json!({}));
    let reply = fx.app.post("/api/v2/registry-modules", &fx.owners, body).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let data = &reply.body["data"];
    assert_eq!(data["attributes"]["status"], "pending");
    assert_eq!(data["attributes"]["version-statuses"], json!([]));
    assert_eq!(data["attributes"]["namespace"], "acme");
    assert_eq!(data["attributes"]["publishing-mechanism"], "git_tag");
    assert_eq!(data["attributes"]["vcs-repo"]["identifier"], VPC_REPO);
    assert_eq!(data["attributes"]["vcs-repo"]["oauth-token-id"], fx.oauth_token.as_str());
    let webhook = data["attributes"]["vcs-repo"]["webhook-url"].as_str().unwrap();
    assert!(webhook.starts_with(&format!("{}/webhooks/vcs/", fx.app.url)), "{webhook}");
    assert_eq!(data["relationships"]["organization"]["data"], json!({"id": "acme", "type": "organizations"}));
    assert_eq!(data["links"]["self"], VPC);
    assert_eq!(fx.gh.hooks(VPC_REPO).len(), 1);
    let settled = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    assert_eq!(settled["status"], "setup_complete");
}

#[tokio::test]
async fn the_deprecated_endpoint_checks_its_token_and_the_caller() {
    let fx = fixture().await;
    let deprecated = "/api/v2/registry-modules";
    let without = json!({"data": {"type": "registry-modules", "attributes": {"vcs-repo": {"identifier": VPC_REPO}}}});
    let reply = fx.app.post(deprecated, &fx.owners, without).await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    assert_eq!(reply.pointer(), "/data/attributes/vcs-repo/oauth-token-id");
    let unknown = fx.app.post(deprecated, &fx.owners, publish_body(VPC_REPO, "ot-doesnotexist", json!({}))).await;
    assert_eq!(unknown.status, 422, "{:?}", unknown.body);
    assert_eq!(unknown.pointer(), "/data/attributes/vcs-repo/oauth-token-id");
    // A token of an organization the caller may not publish in: that organization is not theirs.
    fx.app.create_organization("globex").await;
    let globex_owners = fx.app.owners_token("globex").await;
    let globex_token = connect(&fx.app, &globex_owners, "globex", &fx.gh).await;
    let foreign = fx.app.post(deprecated, &fx.owners, publish_body(VPC_REPO, &globex_token, json!({}))).await;
    assert_eq!(foreign.status, 404, "{:?}", foreign.body);
    assert!(fx.gh.hooks(VPC_REPO).is_empty());
}

#[tokio::test]
async fn a_repository_without_semver_tags_settles_as_no_version_tags() {
    let fx = fixture().await;
    fx.published("acme-corp/terraform-aws-notags").await;
    let path = "/api/v2/organizations/acme/registry-modules/private/acme/notags/aws";
    let settled = fx.until(path, "a settled status", |a| a["status"] != "pending").await;
    assert_eq!(settled["status"], "no_version_tags");
    assert_eq!(settled["version-statuses"], json!([]));
}

#[tokio::test]
async fn a_repository_the_token_cannot_read_settles_as_setup_failed() {
    let fx = fixture().await;
    for (repo, name) in [("terraform-aws-hidden", "hidden"), ("terraform-aws-forbidden", "forbidden")] {
        let reply = fx.publish(&format!("{OWNER}/{repo}"), json!({})).await;
        assert_eq!(reply.status, 201, "{repo}: {:?}", reply.body);
        let path = format!("/api/v2/organizations/acme/registry-modules/private/acme/{name}/aws");
        let settled = fx.until(&path, &format!("{repo} settled"), |a| a["status"] != "pending").await;
        assert_eq!(settled["status"], "setup_failed", "{repo}");
        assert_eq!(settled["version-statuses"], json!([]), "{repo}");
        let reason = settled["vcs-repo"]["error"].as_str().unwrap_or_default();
        assert!(reason.contains("terraform-aws"), "{repo}: the reason names the repository: {reason:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Webhook deliveries.

/// A tag-based `vpc` whose first versions have settled; returns its webhook URL.
async fn settled_vpc(fx: &Fixture) -> String {
    let data = fx.published(VPC_REPO).await;
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    data["attributes"]["vcs-repo"]["webhook-url"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_signed_tag_push_delivery_publishes_its_version() {
    let fx = fixture().await;
    let webhook = settled_vpc(&fx).await;
    let body = tag_push("v1.2.0", SHA_120);
    let signature = sign(&hook_secret(&fx.gh, VPC_REPO), &body);
    assert_eq!(fx.delivery(&webhook, "push", &body, Some(&signature)).await, 202);
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("1.2.0", "ok")]).await;
    assert_eq!(fx.download("vpc", "1.2.0").await["main.tf"], main_tf("v1.2.0"), "built from tag v1.2.0");
}

#[tokio::test]
async fn a_replayed_delivery_is_200_and_changes_nothing() {
    let fx = fixture().await;
    let webhook = settled_vpc(&fx).await;
    let body = tag_push("v1.2.0", SHA_120);
    let signature = sign(&hook_secret(&fx.gh, VPC_REPO), &body);
    assert_eq!(fx.delivery(&webhook, "push", &body, Some(&signature)).await, 202);
    let before = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("1.2.0", "ok")]).await;
    let fetches = || fx.gh.requests().iter().filter(|r| r.contains("/tarball/v1.2.0")).count();
    assert_eq!(fetches(), 1);

    assert_eq!(fx.delivery(&webhook, "push", &body, Some(&signature)).await, 200);
    let after = fx.app.get(VPC, &fx.owners).await.body["data"]["attributes"].clone();
    assert_eq!(after["version-statuses"], before["version-statuses"], "no version added or reset");
    assert_eq!(after["status"], before["status"]);
    // A tag this module already has, announced for the first time, adds nothing either.
    let known = tag_push("v1.1.0", SHA_110);
    let signature = sign(&hook_secret(&fx.gh, VPC_REPO), &known);
    assert_eq!(fx.delivery(&webhook, "push", &known, Some(&signature)).await, 200);
    let last = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("1.2.0", "ok")]).await;
    assert_eq!(last["version-statuses"], before["version-statuses"]);
    assert_eq!(fetches(), 1, "nothing is fetched again");
    // Checked last, so that the checks above run whatever this finds.
    assert_eq!(
        (&after["updated-at"], &last["updated-at"]),
        (&before["updated-at"], &before["updated-at"]),
        "deliveries that add nothing do not touch the module"
    );
}

#[tokio::test]
async fn a_delivery_with_a_bad_signature_is_401_and_changes_nothing() {
    let fx = fixture().await;
    let webhook = settled_vpc(&fx).await;
    let body = tag_push("v1.2.0", SHA_120);
    let secret = hook_secret(&fx.gh, VPC_REPO);
    let signed_other = sign(&secret, &tag_push("v9.9.9", SHA_120));
    let wrong_secret = sign("not-the-secret", &body);
    for (case, signature) in [
        ("the signature of another body", Some(signed_other.as_str())),
        ("a signature under another secret", Some(wrong_secret.as_str())),
        ("no signature", None),
        ("a malformed signature", Some("sha256=zz")),
        ("a SHA-1 signature", Some("sha1=0123456789abcdef0123456789abcdef01234567")),
    ] {
        assert_eq!(fx.delivery(&webhook, "push", &body, signature).await, 401, "{case}");
    }
    let after = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(
        statuses(&after.body["data"]["attributes"]),
        [("1.0.0".to_owned(), "ok".to_owned()), ("1.1.0".to_owned(), "ok".to_owned())]
    );
}

#[tokio::test]
async fn a_delivery_to_an_unknown_webhook_is_404() {
    let fx = fixture().await;
    let webhook = settled_vpc(&fx).await;
    let body = tag_push("v1.2.0", SHA_120);
    let signature = sign(&hook_secret(&fx.gh, VPC_REPO), &body);
    let unknown = format!("{}/webhooks/vcs/0123456789abcdef0123456789abcdef", fx.app.url);
    assert_ne!(unknown, webhook);
    assert_eq!(fx.delivery(&unknown, "push", &body, Some(&signature)).await, 404);
}

// ---------------------------------------------------------------------------------------------
// Branch-based publishing.

#[tokio::test]
async fn a_branch_module_has_no_versions_until_one_is_created_from_a_commit() {
    let fx = fixture().await;
    let reply = fx.publish(VPC_REPO, json!({ "branch": "main" })).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    let attributes = &reply.body["data"]["attributes"];
    assert_eq!(attributes["publishing-mechanism"], "branch");
    assert_eq!(attributes["vcs-repo"]["branch"], "main");
    assert_eq!(attributes["status"], "pending");
    assert_eq!(attributes["version-statuses"], json!([]));

    let body = version_body(json!({ "version": "2.0.0", "commit-sha": SHA_MAIN }));
    let created = fx.app.post(&format!("{VPC}/versions"), &fx.owners, body).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let data = &created.body["data"];
    assert_eq!(data["type"], "registry-module-versions");
    assert!(data["id"].as_str().unwrap().starts_with("modver-"), "{}", data["id"]);
    assert_eq!(data["attributes"]["status"], "pending");
    assert_eq!(data["attributes"]["version"], "2.0.0");
    assert_eq!(data["relationships"]["registry-module"]["data"]["id"], reply.body["data"]["id"]);

    // By the time 2.0.0 is ok the job has run everything publishing recorded: no tag became a version.
    let settled = fx.versions(VPC, &[("2.0.0", "ok")]).await;
    assert_eq!(settled["status"], "setup_complete");
    let requests = fx.gh.requests();
    assert!(!requests.iter().any(|r| r.contains("/tags")), "a branch module does not read tags: {requests:?}");
    assert_eq!(fx.download("vpc", "2.0.0").await["main.tf"], main_tf(SHA_MAIN), "built from the commit");
}

/// The seed spec's states table gave a branch-based module's new version `links.upload`; issue
/// 37 found that link a side door (an upload beat the repository's fetch and was served as the
/// commit's archive), so a version whose source is a repository gets none: its archive is the
/// commit's, fetched by the job.
#[tokio::test]
async fn a_branch_version_s_response_carries_no_upload_link_its_archive_is_the_commits() {
    let fx = fixture().await;
    assert_eq!(fx.publish(VPC_REPO, json!({ "branch": "main" })).await.status, 201);
    let body = version_body(json!({ "version": "2.0.0", "commit-sha": SHA_MAIN }));
    let created = fx.app.post(&format!("{VPC}/versions"), &fx.owners, body).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    assert_eq!(created.body["data"]["links"]["upload"], Value::Null, "{}", created.body["data"]);
    fx.versions(VPC, &[("2.0.0", "ok")]).await;
}

#[tokio::test]
async fn a_branch_version_needs_a_commit_sha_the_repository_has() {
    let fx = fixture().await;
    assert_eq!(fx.publish(VPC_REPO, json!({ "branch": "main" })).await.status, 201);
    let versions = format!("{VPC}/versions");
    let cases = [
        ("no commit-sha", json!({ "version": "2.0.0" }), "/data/attributes/commit-sha"),
        ("an empty commit-sha", json!({ "version": "2.0.0", "commit-sha": "" }), "/data/attributes/commit-sha"),
        (
            "a commit the repository does not have",
            json!({ "version": "2.0.0", "commit-sha": "fedcba9876543210fedcba9876543210fedcba98" }),
            "/data/attributes/commit-sha",
        ),
        ("no version", json!({ "commit-sha": SHA_MAIN }), "/data/attributes/version"),
        (
            "a version that is not semantic",
            json!({ "version": "2.0", "commit-sha": SHA_MAIN }),
            "/data/attributes/version",
        ),
    ];
    for (case, attributes, pointer) in cases {
        let reply = fx.app.post(&versions, &fx.owners, version_body(attributes)).await;
        assert_eq!(reply.status, 422, "{case}: {:?}", reply.body);
        assert_eq!(reply.pointer(), pointer, "{case}");
    }
    let shown = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(shown.body["data"]["attributes"]["version-statuses"], json!([]), "no refused request made a version");
}

#[tokio::test]
async fn a_tag_based_module_refuses_hand_made_versions_with_422() {
    let fx = fixture().await;
    fx.published(VPC_REPO).await;
    let before = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    for attributes in [json!({ "version": "2.0.0", "commit-sha": SHA_MAIN }), json!({ "version": "2.0.0" })] {
        let reply = fx.app.post(&format!("{VPC}/versions"), &fx.owners, version_body(attributes.clone())).await;
        assert_eq!(reply.status, 422, "{attributes}: {:?}", reply.body);
    }
    let after = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(after.body["data"]["attributes"]["version-statuses"], before["version-statuses"]);
}

// ---------------------------------------------------------------------------------------------
// Update: switching, test settings.

#[tokio::test]
async fn patching_the_branch_switches_a_tag_based_module_to_branch_publishing() {
    let fx = fixture().await;
    let published = fx.published(VPC_REPO).await;
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    let reply = fx.app.patch(&format!("{VPC}/"), &fx.owners, patch_body(json!({"vcs-repo": {"branch": "main"}}))).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let attributes = &reply.body["data"]["attributes"];
    assert_eq!(attributes["publishing-mechanism"], "branch");
    assert_eq!(attributes["vcs-repo"]["branch"], "main");
    let (before, after) = (&published["attributes"]["vcs-repo"], &attributes["vcs-repo"]);
    for key in ["identifier", "display-identifier", "oauth-token-id", "webhook-url", "repository-http-url"] {
        assert_eq!(after[key], before[key], "{key} is kept");
    }
    assert_eq!(statuses(attributes).len(), 2, "the tag versions stay");

    let body = version_body(json!({ "version": "2.0.0", "commit-sha": &SHA_MAIN[..7] }));
    let created = fx.app.post(&format!("{VPC}/versions"), &fx.owners, body).await;
    assert_eq!(created.status, 201, "a branch module takes versions by hand: {:?}", created.body);
    fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok"), ("2.0.0", "ok")]).await;
    assert_eq!(fx.download("vpc", "2.0.0").await["main.tf"], main_tf(SHA_MAIN), "an abbreviated SHA resolves");
}

#[tokio::test]
async fn patching_tags_true_switches_back_and_syncs_the_tags() {
    let fx = fixture().await;
    assert_eq!(fx.publish(VPC_REPO, json!({ "branch": "main" })).await.status, 201);
    let reply = fx.app.patch(&format!("{VPC}/"), &fx.owners, patch_body(json!({"vcs-repo": {"tags": true}}))).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let attributes = &reply.body["data"]["attributes"];
    assert_eq!(attributes["publishing-mechanism"], "git_tag");
    assert_eq!(attributes["vcs-repo"]["branch"], "");
    let settled = fx.versions(VPC, &[("1.0.0", "ok"), ("1.1.0", "ok")]).await;
    assert_eq!(settled["status"], "setup_complete");
    let refused = version_body(json!({ "version": "2.0.0", "commit-sha": SHA_MAIN }));
    assert_eq!(fx.app.post(&format!("{VPC}/versions"), &fx.owners, refused).await.status, 422, "tag-based again");
}

#[tokio::test]
async fn branch_and_tags_cannot_be_patched_together() {
    let fx = fixture().await;
    fx.published(VPC_REPO).await;
    let both = patch_body(json!({"vcs-repo": {"branch": "main", "tags": true}}));
    let reply = fx.app.patch(&format!("{VPC}/"), &fx.owners, both).await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    assert_eq!(reply.pointer(), "/data/attributes/vcs-repo");
    let shown = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(shown.body["data"]["attributes"]["publishing-mechanism"], "git_tag");
}

#[tokio::test]
async fn test_config_of_a_vcs_module_is_set_through_patch() {
    let fx = fixture().await;
    let published = fx.published(VPC_REPO).await;
    let enable = patch_body(json!({"test-config": {"tests-enabled": true}}));
    let reply = fx.app.patch(&format!("{VPC}/"), &fx.owners, enable).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let attributes = &reply.body["data"]["attributes"];
    let id = attributes["test-config"]["id"].as_str().expect("a test-config id").to_owned();
    assert!(id.starts_with("tc-"), "{id}");
    assert_eq!(attributes["test-config"]["tests-enabled"], true);
    assert_eq!(attributes["vcs-repo"], published["attributes"]["vcs-repo"], "omitted properties keep their value");
    assert_eq!(attributes["publishing-mechanism"], "git_tag");

    let shown = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(shown.body["data"]["attributes"]["test-config"], json!({"id": id, "tests-enabled": true}));
    let disable = patch_body(json!({"test-config": {"tests-enabled": false}}));
    let reply = fx.app.patch(&format!("{VPC}/"), &fx.owners, disable).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["data"]["attributes"]["test-config"], json!({"id": id, "tests-enabled": false}));
}

// ---------------------------------------------------------------------------------------------
// What VCS calls may reach, and what callers learn of the provider.

/// A branch-based module published from `identifier`, then a version of it from `SHA_MAIN`:
/// the provider is asked for the commit while the request waits.
async fn branch_version_of(fx: &Fixture, identifier: &str, name: &str) -> Reply {
    let published = fx.publish(identifier, json!({ "branch": "main" })).await;
    assert_eq!(published.status, 201, "publishing {identifier}: {:?}", published.body);
    let path = format!("/api/v2/organizations/acme/registry-modules/private/acme/{name}/aws/versions");
    fx.app.post(&path, &fx.owners, version_body(json!({ "version": "2.0.0", "commit-sha": SHA_MAIN }))).await
}

#[tokio::test]
async fn a_host_name_that_resolves_to_a_loopback_address_is_refused_when_used() {
    let gh = github_stand_in().await;
    // No allowed networks: loopback is refused, and `localhost` names the stand-in.
    let (app, owners) = TestApp::with_organization("acme").await;
    let local = GitHub { url: gh.url.replace("127.0.0.1", "localhost"), seen: gh.seen.clone() };
    // A host name is accepted when the connection is made: what it resolves to may change.
    let oauth_token = connect(&app, &owners, "acme", &local).await;
    let fx = Fixture { app, owners, gh, oauth_token };

    let reply = branch_version_of(&fx, VPC_REPO, "vpc").await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    assert_eq!(reply.pointer(), "/data/attributes/commit-sha");
    let detail = reply.body["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the VCS provider could not be reached"), "{detail}");
    assert_eq!(fx.gh.requests(), Vec::<String>::new(), "nothing reached the loopback stand-in");
}

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    let fx = fixture().await;
    let reply = branch_version_of(&fx, "acme-corp/terraform-aws-moved", "moved").await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    let detail = reply.body["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(!detail.contains("localhost"), "the redirect's target is not shown: {detail}");
    let requests = fx.gh.requests();
    assert!(requests.iter().any(|r| r.contains("terraform-aws-moved/commits/")), "{requests:?}");
    assert!(!requests.iter().any(|r| r.contains("terraform-aws-vpc/commits/")), "redirect followed: {requests:?}");
}

#[tokio::test]
async fn an_upstream_error_text_is_not_echoed_to_the_caller() {
    let fx = fixture().await;
    let reply = branch_version_of(&fx, "acme-corp/terraform-aws-leaky", "leaky").await;
    assert_eq!(reply.status, 422, "{:?}", reply.body);
    let detail = reply.body["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("the VCS provider answered with an error"), "{detail}");
    assert!(!detail.contains("hunter2") && !detail.contains("10.0.0.7") && !detail.contains("500"), "{detail}");

    // Nor in the reason a module that could not be set up shows.
    fx.published("acme-corp/terraform-aws-forbidden").await;
    let path = "/api/v2/organizations/acme/registry-modules/private/acme/forbidden/aws";
    let settled = fx.until(path, "a settled status", |a| a["status"] != "pending").await;
    let reason = settled["vcs-repo"]["error"].as_str().unwrap_or_default();
    assert!(reason.contains("the VCS provider answered with an error"), "{reason}");
    assert!(!reason.contains("Resource not accessible") && !reason.contains("403"), "{reason}");
}

#[tokio::test]
async fn a_webhook_delivery_larger_than_a_mebibyte_is_413_and_changes_nothing() {
    let fx = fixture().await;
    let webhook = settled_vpc(&fx).await;
    let mut push: Value = serde_json::from_slice(&tag_push("v1.2.0", SHA_120)).unwrap();
    push["padding"] = json!("x".repeat(1024 * 1024));
    let body = push.to_string().into_bytes();
    let signature = sign(&hook_secret(&fx.gh, VPC_REPO), &body);
    assert_eq!(fx.delivery(&webhook, "push", &body, Some(&signature)).await, 413);
    let after = fx.app.get(VPC, &fx.owners).await;
    assert_eq!(statuses(&after.body["data"]["attributes"]).len(), 2, "no version added");
}

// ---------------------------------------------------------------------------------------------
// The job's bounds: retries that back off and end, fairness between organizations, and archives
// whose headers claim more than they hold room for.

const DOWN: &str = "/api/v2/organizations/acme/registry-modules/private/acme/down/aws";

/// How often the stand-in was asked for `repo`'s `call` (`tags`, `tarball`).
fn asked(gh: &GitHub, repo: &str, call: &str) -> usize {
    gh.requests().iter().filter(|r| r.contains(&format!("/{repo}/{call}"))).count()
}

/// (version, status) pairs as `statuses` returns them.
fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(v, s)| ((*v).to_owned(), (*s).to_owned())).collect()
}

/// The test process's peak resident memory from `start` on (dev-server runs inside it): Linux's
/// `VmHWM`, which writing 5 to `clear_refs` sets back to the current size. `None` elsewhere.
struct PeakMemory {
    start: u64,
}

impl PeakMemory {
    fn start() -> Option<Self> {
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
        Some(Self { start: status_kib("VmRSS:")? })
    }

    /// How far the peak rose above the size at `start`, in bytes.
    fn grown(&self) -> Option<u64> {
        Some(status_kib("VmHWM:")?.saturating_sub(self.start) * 1024)
    }
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

const FLAKY_REPO: &str = "acme-corp/terraform-aws-flaky";

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

#[tokio::test]
async fn a_failing_repository_shows_its_reason_from_the_first_failure_on() {
    let fx = fixture().await;
    fx.published("acme-corp/terraform-aws-down").await;
    let failing = fx.until(DOWN, "the first failure's reason", |a| a["vcs-repo"]["error"].is_string()).await;
    assert_eq!(failing["status"], "pending", "it is retried, so not failed yet");
    let reason = failing["vcs-repo"]["error"].as_str().unwrap();
    assert!(reason.contains("tags") && reason.contains("attempt 1 of 8"), "{reason}");
    assert_eq!(asked(&fx.gh, "terraform-aws-down", "tags"), 1, "one attempt so far");
}

#[tokio::test]
async fn one_organizations_failing_modules_do_not_stall_another_organization() {
    let fx = fixture().await;
    // As many failing modules as the job once took in a run, all of acme's.
    for i in 0..100 {
        fx.published(&format!("acme-corp/terraform-aws-down-{i:03}")).await;
    }
    fx.app.create_organization("globex").await;
    let globex = fx.app.owners_token("globex").await;
    let globex_token = connect(&fx.app, &globex, "globex", &fx.gh).await;
    let publish = "/api/v2/organizations/globex/registry-modules/vcs";
    let reply = fx.app.post(publish, &globex, publish_body(VPC_REPO, &globex_token, json!({}))).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);

    let vpc = "/api/v2/organizations/globex/registry-modules/private/globex/vpc/aws";
    let ok = pairs(&[("1.0.0", "ok"), ("1.1.0", "ok")]);
    let settled = fx.until_as(&globex, SETTLE, vpc, "globex's versions", |a| statuses(a) == ok).await;
    assert_eq!(settled["status"], "setup_complete");

    // Later, with acme's hundred all due again and globex's one sync due too, a run that takes
    // only three pieces of work gives globex its turn: acme's older work does not come first.
    let flaky = "/api/v2/organizations/globex/registry-modules/private/globex/flaky/aws";
    let reply = fx.app.post(publish, &globex, publish_body(FLAKY_REPO, &globex_token, json!({}))).await;
    assert_eq!(reply.status, 201, "{:?}", reply.body);
    fx.until_as(&globex, SETTLE, flaky, "flaky's first failure", |a| a["vcs-repo"]["error"].is_string()).await;
    let acme_tries = || (0..100).map(|i| asked(&fx.gh, &format!("terraform-aws-down-{i:03}"), "tags")).sum::<usize>();
    let before = acme_tries();

    let state = fx.app.second_state().await;
    let three = RunBounds { max_items: 3, deadline: Duration::from_secs(60) };
    run_pending_at(&state, unix_now() + 7200, three).await.expect("a run");

    assert_eq!(asked(&fx.gh, "terraform-aws-flaky", "tags"), 2, "globex's sync was retried in that run");
    assert_eq!(acme_tries() - before, 2, "acme had its share of the run, no more");
    let synced = fx.until_as(&globex, SETTLE, flaky, "flaky's versions", |a| statuses(a).len() == 2).await;
    assert!(synced["vcs-repo"]["error"].is_null(), "the reason went with the failure: {synced}");
}

#[tokio::test]
async fn a_long_name_header_claiming_a_gigabyte_fails_the_version_without_the_memory() {
    let fx = fixture().await;
    // Built before memory is watched: the stand-in is not what is measured.
    long_name_bomb("acme-corp", "terraform-aws-longname");
    let peak = PeakMemory::start();
    fx.published("acme-corp/terraform-aws-longname").await;

    let path = "/api/v2/organizations/acme/registry-modules/private/acme/longname/aws";
    let settled = fx
        .until_as(&fx.owners, Duration::from_secs(120), path, "version 1.0.0 settled", |a| {
            statuses(a).iter().any(|(_, status)| status != "pending")
        })
        .await;
    assert_eq!(statuses(&settled), pairs(&[("1.0.0", "reg_ingress_failed")]));
    let error = settled["version-statuses"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("tar headers of one entry exceed 1 MiB"), "{error}");
    if let Some(grown) = peak.as_ref().and_then(PeakMemory::grown) {
        assert!(grown < 256 << 20, "the fetch took the process up by {} MiB", grown >> 20);
    }
}

#[tokio::test]
async fn a_failing_repository_backs_off_and_ends_in_setup_failed_with_its_reason() {
    let fx = fixture().await;
    fx.published("acme-corp/terraform-aws-down").await;
    let tries = || asked(&fx.gh, "terraform-aws-down", "tags");
    // dev-server makes the first attempt at once; the test's clock starts after it.
    fx.until(DOWN, "the first failure", |a| a["vcs-repo"]["error"].is_string()).await;
    let state = fx.app.second_state().await;
    let run = |at: i64| {
        let state = &state;
        async move { run_pending_at(state, at, RunBounds::default()).await.expect("a run") }
    };
    let start = unix_now();
    run(start + 20).await;
    assert_eq!(tries(), 1, "not retried within 30 s");

    // Then at 30 s, and after each further failure twice as long a wait.
    let mut at = start + 31;
    for (attempt, wait) in (2..=8).zip([60, 120, 240, 480, 960, 1920, 0]) {
        run(at).await;
        assert_eq!(tries(), attempt, "attempt {attempt}");
        let module = fx.app.get(DOWN, &fx.owners).await.body["data"]["attributes"].clone();
        let reason = module["vcs-repo"]["error"].as_str().unwrap_or_default().to_owned();
        if attempt < 8 {
            assert_eq!(module["status"], "pending", "attempt {attempt}");
            assert!(reason.contains(&format!("attempt {attempt} of 8")), "{reason}");
            run(at + wait - 1).await;
            assert_eq!(tries(), attempt, "no attempt within {wait} s of attempt {attempt}");
            at += wait;
        } else {
            assert_eq!(module["status"], "setup_failed");
            assert!(reason.contains("tags") && reason.contains("gave up after 8 attempts"), "{reason}");
        }
    }
    run(at + 86_400).await;
    assert_eq!(tries(), 8, "nothing is retried after the last attempt");
}

#[tokio::test]
async fn an_archive_that_keeps_failing_to_download_fails_its_version_after_the_last_attempt() {
    let fx = fixture().await;
    fx.published("acme-corp/terraform-aws-archivedown").await;
    let path = "/api/v2/organizations/acme/registry-modules/private/acme/archivedown/aws";
    let failing = fx.until(path, "the first failed download", |a| a["vcs-repo"]["error"].is_string()).await;
    assert_eq!(statuses(&failing), pairs(&[("1.0.0", "pending")]));
    let reason = failing["vcs-repo"]["error"].as_str().unwrap();
    assert!(reason.contains("v1.0.0") && reason.contains("attempt 1 of 8"), "{reason}");

    let state = fx.app.second_state().await;
    let mut at = unix_now();
    for _ in 2..=8 {
        at += 3601;
        run_pending_at(&state, at, RunBounds::default()).await.expect("a run");
    }
    assert_eq!(asked(&fx.gh, "terraform-aws-archivedown", "tarball"), 8);
    let failed = fx.app.get(path, &fx.owners).await.body["data"]["attributes"].clone();
    assert_eq!(statuses(&failed), pairs(&[("1.0.0", "reg_ingress_failed")]));
    let reason = failed["vcs-repo"]["error"].as_str().unwrap_or_default();
    assert!(reason.contains("gave up after 8 attempts"), "{reason}");
    assert_eq!(failed["version-statuses"][0]["error"].as_str(), Some(reason), "the version says why too");
}

/// A connection's credential is sealed bound to its OAuth token: copied into another token's
/// record (a tampered table, a restored item), it does not open there, so publishing through
/// that token is refused with a generic error and the provider hears nothing.
#[tokio::test]
async fn a_sealed_credential_moved_to_another_oauth_token_does_not_open() {
    use hangar::store::{keys, Condition, ItemStore};
    let fx = fixture().await;
    let body = json!({"data": {"type": "oauth-clients", "attributes": {
        "service-provider": "github_enterprise",
        "http-url": fx.gh.url,
        "api-url": fx.gh.url,
        "oauth-token-string": "gh-other-token",
    }}});
    let created = fx.app.post("/api/v2/organizations/acme/oauth-clients", &fx.owners, body).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let other = created.body["data"]["relationships"]["oauth-tokens"]["data"][0]["id"].as_str().unwrap().to_owned();
    let org = fx.app.get("/api/v2/organizations/acme", &fx.owners).await;
    let org_id = org.body["data"]["attributes"]["external-id"].as_str().unwrap().to_owned();

    let store = fx.app.store();
    let from = store.get(&keys::oauth_token(&org_id, &fx.oauth_token)).await.unwrap().expect("the first token");
    let mut to = store.get(&keys::oauth_token(&org_id, &other)).await.unwrap().expect("the second token");
    to.attrs_mut().unwrap().insert("sealed_token".into(), from.attrs().unwrap()["sealed_token"].clone());
    store.put(to, Condition::Always).await.unwrap();

    let reply =
        fx.app.post(PUBLISH, &fx.owners, publish_body("acme-corp/terraform-aws-moved", &other, json!({}))).await;
    assert_eq!(reply.status, 500, "{:?}", reply.body);
    let text = reply.body.to_string();
    assert!(!text.contains(GH_TOKEN) && !text.contains("gh-other-token"), "{text}");
    assert_eq!(asked(&fx.gh, "terraform-aws-moved", "hooks"), 0, "the provider heard nothing");
    let module = "/api/v2/organizations/acme/registry-modules/private/acme/moved/aws";
    assert_eq!(fx.app.get(module, &fx.owners).await.status, 404);

    let state = fx.app.second_state().await;
    assert!(hangar::accounts::oauth::token_for(&state, &org_id, &other).await.is_err());
    let own = hangar::accounts::oauth::token_for(&state, &org_id, &fx.oauth_token).await.unwrap();
    assert_eq!(own.expect("the first connection").token, GH_TOKEN, "it still opens where it was sealed");
}
