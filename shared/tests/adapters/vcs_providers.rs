//! `hangar::vcs` against local stand-ins of GitHub's and GitLab's REST APIs. Publishing from a
//! repository depends on the exact calls (paths, encoding, headers, pagination, the tarball
//! redirect) and on how failures are classified, so each stand-in answers canned JSON, serves a
//! tarball built here, and records what reached it. Webhook checks need no server.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::extract::{FromRequestParts, OriginalUri, Path, Query};
use axum::http::{header, request::Parts, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hangar::vcs::{
    provider, tag_from_delivery, verify_github_signature, verify_gitlab_token, AllowedNetworks, Client, Connection,
    RepoId, ServiceProvider, VcsError, VcsProvider,
};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

const TOKEN: &str = "hangar-test-token-7f3a9c";
const SHA: &str = "abc1234def5678abc1234def5678abc1234def56";
const ZERO: &str = "0000000000000000000000000000000000000000";
/// An error text only the log may hold.
const LEAK: &str = "internal host 10.1.2.3 said: password hunter2";

/// What reached a stand-in.
#[derive(Default)]
struct Seen {
    paths: Vec<String>,
    headers: Vec<HeaderMap>,
    hooks: Vec<Value>,
}

#[derive(Clone)]
struct Stand {
    seen: Arc<Mutex<Seen>>,
    tarball: Arc<Vec<u8>>,
}

impl Stand {
    fn new() -> Self {
        Self { seen: Arc::default(), tarball: Arc::new(tarball()) }
    }

    fn paths(&self) -> Vec<String> {
        self.seen.lock().unwrap().paths.clone()
    }
}

/// A request as it reached the stand-in: its full path (before nesting) and headers.
struct Caller {
    stand: Stand,
    headers: HeaderMap,
    uri: Uri,
}

impl FromRequestParts<Stand> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, stand: &Stand) -> Result<Self, Infallible> {
        let uri = parts.extensions.get::<OriginalUri>().map_or_else(|| parts.uri.clone(), |o| o.0.clone());
        Ok(Self { stand: stand.clone(), headers: parts.headers.clone(), uri })
    }
}

type Refusal = (StatusCode, Json<Value>);
type Answer = Result<Response, Refusal>;

impl Caller {
    /// Records the request, then answers as the provider would for a bad token or for the
    /// repositories named `absent` and `broken` (whose error echoes the caller's credentials).
    fn gate(&self, repo: &str) -> Result<(), Refusal> {
        let mut seen = self.stand.seen.lock().unwrap();
        seen.paths.push(self.uri.to_string());
        seen.headers.push(self.headers.clone());
        let authorization = self.headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if authorization != format!("Bearer {TOKEN}") {
            return Err(error(StatusCode::UNAUTHORIZED, "Bad credentials"));
        }
        match repo.rsplit('/').next() {
            Some("absent") => Err(error(StatusCode::NOT_FOUND, "Not Found")),
            Some("leaky") => Err(error(StatusCode::BAD_GATEWAY, LEAK)),
            Some("broken") => Err(error(StatusCode::INTERNAL_SERVER_ERROR, &format!("boom for {authorization}"))),
            _ => Ok(()),
        }
    }

    fn hook(&self, body: Value) {
        self.stand.seen.lock().unwrap().hooks.push(body);
    }
}

fn error(status: StatusCode, message: &str) -> Refusal {
    (status, Json(json!({ "message": message })))
}

/// A gzip tarball with one top-level directory, as both providers serve.
fn tarball() -> Vec<u8> {
    let gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gzip);
    let main = b"variable \"cidr\" {}\n";
    let mut entry = tar::Header::new_gnu();
    entry.set_size(main.len() as u64);
    entry.set_mode(0o644);
    tar.append_data(&mut entry, "acme-network-abc1234/main.tf", &main[..]).unwrap();
    let mut gzip = tar.into_inner().unwrap();
    gzip.flush().unwrap();
    gzip.finish().unwrap()
}

type Page = Query<HashMap<String, String>>;

/// Page 1 is full (100 tags), page 2 holds the rest, later pages are empty.
fn tag_page(query: &HashMap<String, String>, tag: impl Fn(String, String) -> Value) -> Response {
    assert_eq!(query["per_page"], "100");
    let tags: Vec<Value> = match query["page"].as_str() {
        "1" => (0..100).map(|i| tag(format!("v0.1.{i}"), format!("{i:040x}"))).collect(),
        "2" => vec![tag("v1.0.0".into(), SHA.into()), tag("v1.1.0".into(), SHA.into())],
        _ => vec![],
    };
    Json(tags).into_response()
}

mod github {
    use super::*;

    type Repo = Path<(String, String)>;
    type RepoAnd = Path<(String, String, String)>;

    pub async fn repository(caller: Caller, Path((owner, repo)): Repo) -> Answer {
        caller.gate(&repo)?;
        if repo == "huge" {
            let padding = "x".repeat(5 * 1024 * 1024);
            return Ok(Json(json!({ "html_url": padding, "default_branch": "main" })).into_response());
        }
        let html_url = format!("https://github.com/{owner}/{repo}");
        Ok(Json(json!({ "html_url": html_url, "default_branch": "main" })).into_response())
    }

    pub async fn tags(caller: Caller, Path((_, repo)): Repo, Query(query): Page) -> Answer {
        caller.gate(&repo)?;
        Ok(tag_page(&query, |name, sha| json!({ "name": name, "commit": { "sha": sha } })))
    }

    pub async fn branch(caller: Caller, Path((_, repo, branch)): RepoAnd) -> Answer {
        caller.gate(&repo)?;
        match branch.as_str() {
            "main" | "feature/x" => Ok(Json(json!({ "name": branch, "commit": { "sha": SHA } })).into_response()),
            _ => Err(error(StatusCode::NOT_FOUND, "Branch not found")),
        }
    }

    pub async fn commit(caller: Caller, Path((_, repo, sha)): RepoAnd) -> Answer {
        caller.gate(&repo)?;
        match SHA.starts_with(&sha) {
            true if repo == "liar" => Ok(Json(json!({ "sha": format!("{sha} {LEAK}") })).into_response()),
            true => Ok(Json(json!({ "sha": SHA })).into_response()),
            false => Err(error(StatusCode::UNPROCESSABLE_ENTITY, &format!("No commit found for SHA: {sha}"))),
        }
    }

    /// Like github.com, a redirect to the download host (here another path at the root).
    pub async fn tarball(caller: Caller, Path((owner, repo, git_ref)): RepoAnd) -> Answer {
        caller.gate(&repo)?;
        let mut location = format!("/codeload/{owner}/{repo}/legacy.tar.gz/{git_ref}");
        if repo == "moved" {
            // The same server under another host name.
            let host = caller.headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
            location = format!("http://{}{location}", host.replace("127.0.0.1", "localhost"));
        }
        Ok((StatusCode::FOUND, [(header::LOCATION, location)]).into_response())
    }

    /// Streamed in two chunks, with no `Content-Length`, as a large download arrives.
    pub async fn codeload(caller: Caller) -> axum::body::Body {
        caller.stand.seen.lock().unwrap().paths.push(caller.uri.to_string());
        let tarball = caller.stand.tarball.as_ref().clone();
        let (first, second) = tarball.split_at(tarball.len() / 2);
        let chunks = [Ok::<_, Infallible>(first.to_vec()), Ok(second.to_vec())];
        axum::body::Body::from_stream(futures::stream::iter(chunks))
    }

    pub async fn create_hook(caller: Caller, Path((_, repo)): Repo, Json(body): Json<Value>) -> Answer {
        caller.gate(&repo)?;
        caller.hook(body);
        Ok((StatusCode::CREATED, Json(json!({ "id": 12345678, "type": "Repository" }))).into_response())
    }
}

/// github.com's API at the root and an Enterprise Server's under `/api/v3`; codeload at the root.
async fn github_stand_in() -> (String, Stand) {
    let api = || {
        Router::new()
            .route("/repos/{owner}/{repo}", get(github::repository))
            .route("/repos/{owner}/{repo}/tags", get(github::tags))
            .route("/repos/{owner}/{repo}/branches/{*branch}", get(github::branch))
            .route("/repos/{owner}/{repo}/commits/{sha}", get(github::commit))
            .route("/repos/{owner}/{repo}/tarball/{*ref}", get(github::tarball))
            .route("/repos/{owner}/{repo}/hooks", post(github::create_hook))
    };
    let stand = Stand::new();
    let router = Router::new()
        .merge(api())
        .nest("/api/v3", api())
        .route("/codeload/{owner}/{repo}/legacy.tar.gz/{*ref}", get(github::codeload))
        .with_state(stand.clone());
    (serve(router).await, stand)
}

/// `Path` hands these the decoded project path (`infra/modules/network`).
mod gitlab {
    use super::*;

    type Project = Path<String>;
    type ProjectAnd = Path<(String, String)>;

    pub async fn project(caller: Caller, Path(id): Project) -> Answer {
        caller.gate(&id)?;
        let web_url = format!("https://gitlab.com/{id}");
        Ok(Json(json!({ "web_url": web_url, "default_branch": "main" })).into_response())
    }

    pub async fn tags(caller: Caller, Path(id): Project, Query(query): Page) -> Answer {
        caller.gate(&id)?;
        Ok(tag_page(&query, |name, sha| json!({ "name": name, "commit": { "id": sha } })))
    }

    pub async fn branch(caller: Caller, Path((id, branch)): ProjectAnd) -> Answer {
        caller.gate(&id)?;
        match branch.as_str() {
            "main" | "feature/x" => Ok(Json(json!({ "name": branch, "commit": { "id": SHA } })).into_response()),
            _ => Err(error(StatusCode::NOT_FOUND, "404 Branch Not Found")),
        }
    }

    pub async fn commit(caller: Caller, Path((id, sha)): ProjectAnd) -> Answer {
        caller.gate(&id)?;
        match SHA.starts_with(&sha) {
            true => Ok(Json(json!({ "id": SHA })).into_response()),
            false => Err(error(StatusCode::NOT_FOUND, "404 Commit Not Found")),
        }
    }

    pub async fn archive(caller: Caller, Path(id): Project, Query(query): Page) -> Answer {
        caller.gate(&id)?;
        match query.get("sha").map(String::as_str) {
            Some("v1.0.0") => Ok(caller.stand.tarball.as_ref().clone().into_response()),
            _ => Err(error(StatusCode::NOT_FOUND, "404 File Not Found")),
        }
    }

    pub async fn create_hook(caller: Caller, Path(id): Project, Json(body): Json<Value>) -> Answer {
        caller.gate(&id)?;
        caller.hook(body);
        Ok((StatusCode::CREATED, Json(json!({ "id": 42, "url": "ignored" }))).into_response())
    }
}

/// GitLab's API under `/api/v4`.
async fn gitlab_stand_in() -> (String, Stand) {
    let api = Router::new()
        .route("/projects/{id}", get(gitlab::project))
        .route("/projects/{id}/repository/tags", get(gitlab::tags))
        .route("/projects/{id}/repository/branches/{branch}", get(gitlab::branch))
        .route("/projects/{id}/repository/commits/{sha}", get(gitlab::commit))
        .route("/projects/{id}/repository/archive.tar.gz", get(gitlab::archive))
        .route("/projects/{id}/hooks", post(gitlab::create_hook));
    let stand = Stand::new();
    let router = Router::new().nest("/api/v4", api).with_state(stand.clone());
    (serve(router).await, stand)
}

async fn serve(router: Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

/// The stand-ins listen on 127.0.0.1, which VCS calls reach only when it is allowed.
fn loopback() -> AllowedNetworks {
    AllowedNetworks::parse("127.0.0.0/8").unwrap()
}

fn client(kind: ServiceProvider, api_url: String, token: &str) -> Box<dyn VcsProvider> {
    client_with(kind, api_url, token, Client::new(loopback(), 100 << 20))
}

fn client_with(kind: ServiceProvider, api_url: String, token: &str, checked: Client) -> Box<dyn VcsProvider> {
    let connection =
        Connection { provider: kind, api_url, http_url: "https://vcs.example".into(), token: token.into() };
    provider(connection, checked)
}

/// A client that allows no network beyond the public Internet.
fn refusing_client(kind: ServiceProvider, api_url: String) -> Box<dyn VcsProvider> {
    client_with(kind, api_url, TOKEN, Client::new(AllowedNetworks::default(), 100 << 20))
}

fn repo(kind: ServiceProvider, identifier: &str) -> RepoId {
    RepoId::parse(&kind, identifier).unwrap()
}

async fn read_all(provider: &dyn VcsProvider, repo: &RepoId, git_ref: &str) -> Vec<u8> {
    let mut reader = provider.archive(repo, git_ref).await.unwrap();
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).await.unwrap();
    bytes
}

/// Whether `error` is of the expected kind and leaks neither token.
fn assert_kind(error: VcsError, expected: fn(&VcsError) -> bool) {
    let message = error.to_string();
    assert!(expected(&error), "unexpected kind: {error:?}");
    assert!(!message.contains(TOKEN) && !message.contains("wrong-token"), "the token leaked: {message}");
}

#[test]
fn github_identifiers_are_an_org_and_a_repository() {
    let kind = ServiceProvider::parse("github").unwrap();
    let parsed = RepoId::parse(&kind, "acme/terraform-aws_net.work").unwrap();
    assert_eq!((parsed.owner.as_str(), parsed.name.as_str()), ("acme", "terraform-aws_net.work"));
    assert_eq!(parsed.full(), "acme/terraform-aws_net.work");
    for bad in ["", "acme", "acme/", "/network", "acme/network/extra", "acme/..", "ac me/network", "acme/net?work"] {
        let message = RepoId::parse(&kind, bad).unwrap_err();
        assert!(message.contains(":org/:repo"), "{bad:?}: {message}");
    }
}

#[test]
fn gitlab_identifiers_may_nest_the_project_in_subgroups() {
    for spelling in ["gitlab_hosted", "gitlab_community_edition", "gitlab_enterprise_edition"] {
        let kind = ServiceProvider::parse(spelling).unwrap();
        assert!(kind.is_gitlab() && kind.as_str() == spelling);
        let nested = RepoId::parse(&kind, "infra/modules/network").unwrap();
        assert_eq!((nested.owner.as_str(), nested.name.as_str()), ("infra/modules", "network"));
        assert_eq!(RepoId::parse(&kind, "infra/network").unwrap().owner, "infra");
        for bad in ["network", "infra//network", "infra/network/", "infra/../network", "infra/net work"] {
            let message = RepoId::parse(&kind, bad).unwrap_err();
            assert!(message.contains(":namespace/:project"), "{bad:?}: {message}");
        }
    }
    assert!(!ServiceProvider::GitHubEnterprise.is_gitlab());
}

#[tokio::test]
async fn github_reads_the_repository_every_tag_page_a_branch_and_a_commit() {
    let (base, stand) = github_stand_in().await;
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    let acme = repo(ServiceProvider::GitHub, "acme/network");

    let repository = github.repository(&acme).await.unwrap();
    assert_eq!(
        (repository.http_url.as_str(), repository.default_branch.as_str()),
        ("https://github.com/acme/network", "main")
    );
    let tags = github.tags(&acme).await.unwrap();
    assert_eq!(tags.len(), 102);
    assert_eq!((tags[0].name.as_str(), tags[0].commit_sha.as_str()), ("v0.1.0", ZERO));
    assert_eq!((tags[101].name.as_str(), tags[101].commit_sha.as_str()), ("v1.1.0", SHA));
    assert_eq!(github.branch_head(&acme, "main").await.unwrap(), SHA);
    assert_eq!(github.branch_head(&acme, "feature/x").await.unwrap(), SHA);
    assert_eq!(github.commit(&acme, &SHA[..7]).await.unwrap(), SHA);

    let paths = stand.paths();
    assert!(paths.contains(&"/repos/acme/network/tags?per_page=100&page=2".to_owned()), "{paths:?}");
    assert!(paths.contains(&"/repos/acme/network/branches/feature/x".to_owned()), "{paths:?}");
    for headers in &stand.seen.lock().unwrap().headers {
        assert_eq!(headers[header::AUTHORIZATION], format!("Bearer {TOKEN}").as_str());
        assert_eq!(headers[header::ACCEPT], "application/vnd.github+json");
        assert_eq!(headers["x-github-api-version"], "2022-11-28");
        assert_eq!(headers[header::USER_AGENT], "hangar");
    }
}

#[tokio::test]
async fn github_enterprise_makes_the_same_calls_under_its_api_path() {
    let (base, stand) = github_stand_in().await;
    let enterprise = client(ServiceProvider::GitHubEnterprise, format!("{base}/api/v3/"), TOKEN);
    let acme = repo(ServiceProvider::GitHubEnterprise, "acme/network");
    assert_eq!(enterprise.repository(&acme).await.unwrap().default_branch, "main");
    assert_eq!(read_all(enterprise.as_ref(), &acme, "v1.0.0").await, *stand.tarball);
    assert_eq!(stand.paths()[0], "/api/v3/repos/acme/network");
}

#[tokio::test]
async fn github_archives_follow_the_redirect_to_the_download_host() {
    let (base, stand) = github_stand_in().await;
    let acme = repo(ServiceProvider::GitHub, "acme/network");
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    assert_eq!(read_all(github.as_ref(), &acme, "v1.0.0").await, *stand.tarball);
    assert_eq!(read_all(github.as_ref(), &acme, SHA).await, *stand.tarball);
    let paths = stand.paths();
    assert!(paths.contains(&format!("/codeload/acme/network/legacy.tar.gz/{SHA}")), "{paths:?}");
}

#[tokio::test]
async fn an_archive_larger_than_the_limit_is_cut_off() {
    let small = || Client::new(loopback(), 64);
    // GitHub's download arrives in chunks, without a length; GitLab's says how long it is.
    let (base, _) = github_stand_in().await;
    let github = client_with(ServiceProvider::GitHub, base, TOKEN, small());
    let mut reader = github.archive(&repo(ServiceProvider::GitHub, "acme/network"), "v1.0.0").await.unwrap();
    let error = reader.read_to_end(&mut Vec::new()).await.unwrap_err();
    assert!(error.to_string().contains("the archive is larger than 64 bytes"), "{error}");

    let (base, _) = gitlab_stand_in().await;
    let gitlab = client_with(ServiceProvider::GitLabHosted, format!("{base}/api/v4"), TOKEN, small());
    let mut reader = gitlab.archive(&repo(ServiceProvider::GitLabHosted, "infra/network"), "v1.0.0").await.unwrap();
    let error = reader.read_to_end(&mut Vec::new()).await.unwrap_err();
    assert!(error.to_string().contains("the archive is larger than 64 bytes"), "{error}");
}

#[tokio::test]
async fn github_webhooks_deliver_pushes_and_creations_signed_with_the_secret() {
    let (base, stand) = github_stand_in().await;
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    let acme = repo(ServiceProvider::GitHub, "acme/network");
    let id = github.create_webhook(&acme, "https://hangar.example/webhooks/vcs-1", "s3cret").await.unwrap();
    assert_eq!(id, "12345678");
    let hook = stand.seen.lock().unwrap().hooks[0].clone();
    assert_eq!((hook["name"].as_str(), hook["active"].as_bool()), (Some("web"), Some(true)));
    assert_eq!(hook["events"], json!(["push", "create"]));
    assert_eq!(hook["config"]["url"], "https://hangar.example/webhooks/vcs-1");
    assert_eq!(hook["config"]["secret"], "s3cret");
    assert_eq!(
        (hook["config"]["content_type"].as_str(), hook["config"]["insecure_ssl"].as_str()),
        (Some("json"), Some("0"))
    );
}

#[tokio::test]
async fn github_failures_are_classified_and_never_show_the_token() {
    let (base, _) = github_stand_in().await;
    let (github, rejected) =
        (client(ServiceProvider::GitHub, base.clone(), TOKEN), client(ServiceProvider::GitHub, base, "wrong-token"));
    let repo = |name: &str| repo(ServiceProvider::GitHub, &format!("acme/{name}"));

    assert_kind(rejected.repository(&repo("network")).await.unwrap_err(), |e| matches!(e, VcsError::Unauthorized(_)));
    assert_kind(github.repository(&repo("absent")).await.unwrap_err(), |e| matches!(e, VcsError::NotFound(_)));
    assert_kind(github.tags(&repo("absent")).await.unwrap_err(), |e| matches!(e, VcsError::NotFound(_)));
    assert_kind(github.branch_head(&repo("network"), "gone").await.unwrap_err(), |e| {
        matches!(e, VcsError::NotFound(_))
    });
    assert_kind(github.commit(&repo("network"), "fff0000").await.unwrap_err(), |e| matches!(e, VcsError::NotFound(_)));
    assert_kind(github.commit(&repo("network"), "main").await.unwrap_err(), |e| matches!(e, VcsError::NotFound(_)));
    assert_kind(github.archive(&repo("absent"), "v1.0.0").await.err().unwrap(), |e| matches!(e, VcsError::NotFound(_)));
    let broken = github.repository(&repo("broken")).await.unwrap_err();
    assert!(broken.to_string().contains("reading repository acme/broken"), "{broken}");
    assert_kind(broken, |e| matches!(e, VcsError::Upstream(_)));
}

#[tokio::test]
async fn gitlab_reads_a_subgroup_project_by_its_encoded_path() {
    let (base, stand) = gitlab_stand_in().await;
    let gitlab = client(ServiceProvider::GitLabCommunityEdition, format!("{base}/api/v4"), TOKEN);
    let project = repo(ServiceProvider::GitLabHosted, "infra/modules/network");

    let repository = gitlab.repository(&project).await.unwrap();
    assert_eq!(repository.http_url, "https://gitlab.com/infra/modules/network");
    assert_eq!(repository.default_branch, "main");
    let tags = gitlab.tags(&project).await.unwrap();
    assert_eq!(tags.len(), 102);
    assert_eq!((tags[101].name.as_str(), tags[101].commit_sha.as_str()), ("v1.1.0", SHA));
    assert_eq!(gitlab.branch_head(&project, "feature/x").await.unwrap(), SHA);
    assert_eq!(gitlab.commit(&project, &SHA[..12]).await.unwrap(), SHA);

    let paths = stand.paths();
    assert_eq!(paths[0], "/api/v4/projects/infra%2Fmodules%2Fnetwork");
    assert!(
        paths.contains(&"/api/v4/projects/infra%2Fmodules%2Fnetwork/repository/tags?per_page=100&page=2".to_owned())
    );
    assert!(paths.contains(&"/api/v4/projects/infra%2Fmodules%2Fnetwork/repository/branches/feature%2Fx".to_owned()));
    for headers in &stand.seen.lock().unwrap().headers {
        assert_eq!(headers[header::AUTHORIZATION], format!("Bearer {TOKEN}").as_str());
    }
}

#[tokio::test]
async fn gitlab_archives_stream_the_tarball_of_a_ref() {
    let (base, stand) = gitlab_stand_in().await;
    let gitlab = client(ServiceProvider::GitLabHosted, format!("{base}/api/v4"), TOKEN);
    let project = repo(ServiceProvider::GitLabHosted, "infra/modules/network");
    assert_eq!(read_all(gitlab.as_ref(), &project, "v1.0.0").await, *stand.tarball);
    assert_kind(gitlab.archive(&project, "v9.9.9").await.err().unwrap(), |e| matches!(e, VcsError::NotFound(_)));
}

#[tokio::test]
async fn gitlab_webhooks_deliver_pushes_and_tag_pushes_with_the_secret_as_token() {
    let (base, stand) = gitlab_stand_in().await;
    let gitlab = client(ServiceProvider::GitLabEnterpriseEdition, format!("{base}/api/v4"), TOKEN);
    let project = repo(ServiceProvider::GitLabEnterpriseEdition, "infra/network");
    let id = gitlab.create_webhook(&project, "https://hangar.example/webhooks/vcs-2", "s3cret").await.unwrap();
    assert_eq!(id, "42");
    let hook = stand.seen.lock().unwrap().hooks[0].clone();
    assert_eq!(
        hook,
        json!({
            "url": "https://hangar.example/webhooks/vcs-2",
            "token": "s3cret",
            "push_events": true,
            "tag_push_events": true,
        })
    );
}

#[tokio::test]
async fn gitlab_failures_are_classified_and_never_show_the_token() {
    let (base, _) = gitlab_stand_in().await;
    let api = format!("{base}/api/v4");
    let (gitlab, rejected) = (
        client(ServiceProvider::GitLabHosted, api.clone(), TOKEN),
        client(ServiceProvider::GitLabHosted, api, "wrong-token"),
    );
    let project = |path: &str| repo(ServiceProvider::GitLabHosted, path);

    assert_kind(rejected.tags(&project("infra/network")).await.unwrap_err(), |e| {
        matches!(e, VcsError::Unauthorized(_))
    });
    assert_kind(gitlab.repository(&project("infra/absent")).await.unwrap_err(), |e| matches!(e, VcsError::NotFound(_)));
    assert_kind(gitlab.commit(&project("infra/network"), "fff0000").await.unwrap_err(), |e| {
        matches!(e, VcsError::NotFound(_))
    });
    let broken = gitlab.create_webhook(&project("infra/broken"), "https://h.example", "s").await.unwrap_err();
    assert!(broken.to_string().contains("creating a webhook on infra/broken"), "{broken}");
    assert_kind(broken, |e| matches!(e, VcsError::Upstream(_)));
}

#[tokio::test]
async fn an_unreachable_provider_is_an_upstream_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let github = client(ServiceProvider::GitHub, format!("http://{address}"), TOKEN);
    let error = github.repository(&repo(ServiceProvider::GitHub, "acme/network")).await.unwrap_err();
    assert!(error.to_string().contains("could not be reached"), "{error}");
    assert_kind(error, |e| matches!(e, VcsError::Upstream(_)));
}

#[tokio::test]
async fn an_upstream_error_text_is_not_echoed_to_the_caller() {
    let (base, _) = github_stand_in().await;
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    let error = github.repository(&repo(ServiceProvider::GitHub, "acme/leaky")).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("reading repository acme/leaky: the VCS provider answered with an error"), "{message}");
    assert!(!message.contains("hunter2") && !message.contains("10.1.2.3") && !message.contains("502"), "{message}");
    assert_kind(error, |e| matches!(e, VcsError::Upstream(_)));
    // Nor what a successful answer holds where a commit SHA belongs.
    let error = github.commit(&repo(ServiceProvider::GitHub, "acme/liar"), "abc1234").await.unwrap_err();
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

#[tokio::test]
async fn an_api_answer_larger_than_its_cap_is_refused() {
    let (base, _) = github_stand_in().await;
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    let Err(error) = github.repository(&repo(ServiceProvider::GitHub, "acme/huge")).await else {
        panic!("a 5 MiB answer was read");
    };
    assert!(error.to_string().contains("the VCS provider answered with an error"), "{error}");
    assert_kind(error, |e| matches!(e, VcsError::Upstream(_)));
}

#[tokio::test]
async fn an_archive_redirect_to_another_host_is_not_followed() {
    let (base, stand) = github_stand_in().await;
    let github = client(ServiceProvider::GitHub, base, TOKEN);
    let error = github.archive(&repo(ServiceProvider::GitHub, "acme/moved"), "v1.0.0").await.err().unwrap();
    assert!(!error.to_string().contains("localhost"), "the target is not shown: {error}");
    assert_kind(error, |e| matches!(e, VcsError::Upstream(_)));
    assert_eq!(stand.paths(), ["/repos/acme/moved/tarball/v1.0.0"], "the download host was not asked");
}

#[tokio::test]
async fn a_provider_at_a_refused_address_is_never_called() {
    let (base, stand) = github_stand_in().await;
    let github = refusing_client(ServiceProvider::GitHub, base.clone());
    let Err(error) = github.repository(&repo(ServiceProvider::GitHub, "acme/network")).await else {
        panic!("a loopback provider was called");
    };
    assert!(error.to_string().contains("the VCS provider could not be reached"), "{error}");
    assert_kind(error, |e| matches!(e, VcsError::Upstream(_)));
    // A host name is resolved, then refused for what it resolves to.
    let by_name = refusing_client(ServiceProvider::GitHub, base.replace("127.0.0.1", "localhost"));
    let error = by_name.tags(&repo(ServiceProvider::GitHub, "acme/network")).await.unwrap_err();
    assert!(error.to_string().contains("the VCS provider could not be reached"), "{error}");
    assert_eq!(stand.paths(), Vec::<String>::new(), "nothing reached the stand-in");
}

fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[test]
fn github_signatures_verify_only_the_signed_body_under_the_secret() {
    let body = br#"{"ref":"refs/tags/v1.0.0"}"#;
    let signature = github_signature("s3cret", body);
    assert!(verify_github_signature("s3cret", body, Some(&signature)));
    assert!(!verify_github_signature("s3cret", br#"{"ref":"refs/tags/v6.6.6"}"#, Some(&signature)));
    assert!(!verify_github_signature("other", body, Some(&signature)));
    assert!(!verify_github_signature("s3cret", body, None));
    assert!(!verify_github_signature("s3cret", body, Some(signature.trim_start_matches("sha256="))));
    assert!(!verify_github_signature("", body, Some(&github_signature("", body))));
}

#[test]
fn gitlab_tokens_verify_only_the_secret() {
    assert!(verify_gitlab_token("s3cret", Some("s3cret")));
    assert!(!verify_gitlab_token("s3cret", Some("s3cret ")));
    assert!(!verify_gitlab_token("other", Some("s3cret")));
    assert!(!verify_gitlab_token("s3cret", None));
    assert!(!verify_gitlab_token("", Some("")));
}

#[test]
fn a_github_push_creating_a_tag_announces_it_with_the_tagged_commit() {
    let push = json!({
        "ref": "refs/tags/v1.2.0", "created": true, "deleted": false, "after": "f00d", "head_commit": { "id": SHA },
    });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitHub, Some("push"), &push), Some(("v1.2.0".into(), SHA.into())));
    let lightweight = json!({ "ref": "refs/tags/v1.3.0", "created": true, "deleted": false, "after": SHA });
    assert_eq!(
        tag_from_delivery(&ServiceProvider::GitHubEnterprise, None, &lightweight),
        Some(("v1.3.0".into(), SHA.into()))
    );
}

#[test]
fn a_github_push_to_a_branch_or_deleting_a_tag_announces_nothing() {
    let branch = json!({
        "ref": "refs/heads/main", "created": true, "deleted": false, "after": SHA, "head_commit": { "id": SHA },
    });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitHub, Some("push"), &branch), None);
    let deleted =
        json!({ "ref": "refs/tags/v1.2.0", "created": false, "deleted": true, "after": ZERO, "head_commit": null });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitHub, Some("push"), &deleted), None);
    assert_eq!(tag_from_delivery(&ServiceProvider::GitHub, Some("ping"), &json!({ "zen": "Keep it simple." })), None);
}

#[test]
fn a_github_create_event_announces_a_tag_without_its_commit() {
    let tag = json!({ "ref": "v2.0.0", "ref_type": "tag" });
    assert_eq!(
        tag_from_delivery(&ServiceProvider::GitHub, Some("create"), &tag),
        Some(("v2.0.0".into(), String::new()))
    );
    let branch = json!({ "ref": "main", "ref_type": "branch" });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitHub, Some("create"), &branch), None);
}

#[test]
fn a_gitlab_tag_push_hook_announces_the_tag_unless_it_deletes_it() {
    let pushed = json!({
        "object_kind": "tag_push", "ref": "refs/tags/v1.0.0", "before": ZERO, "after": "7a9c", "checkout_sha": SHA,
    });
    let announced = Some(("v1.0.0".to_owned(), SHA.to_owned()));
    assert_eq!(tag_from_delivery(&ServiceProvider::GitLabHosted, Some("Tag Push Hook"), &pushed), announced);
    assert_eq!(tag_from_delivery(&ServiceProvider::GitLabCommunityEdition, None, &pushed), announced);
    let deleted = json!({
        "object_kind": "tag_push", "ref": "refs/tags/v1.0.0", "before": SHA, "after": ZERO, "checkout_sha": null,
    });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitLabHosted, Some("Tag Push Hook"), &deleted), None);
    let branch = json!({ "object_kind": "push", "ref": "refs/heads/main", "after": SHA, "checkout_sha": SHA });
    assert_eq!(tag_from_delivery(&ServiceProvider::GitLabHosted, Some("Push Hook"), &branch), None);
}
