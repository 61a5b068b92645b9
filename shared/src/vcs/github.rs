//! GitHub and GitHub Enterprise Server over REST API version 2022-11-28: the same calls under
//! `https://api.github.com` or an Enterprise host's `/api/v3`.

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::http::{segment, Api, Created};
use super::{
    answered_sha, listed_tags, looks_like_sha, matching_commit, ArchiveReader, Client, Connection, RepoId, Repository,
    Tag, VcsError, VcsProvider,
};

const HEADERS: &[(&str, &str)] = &[("accept", "application/vnd.github+json"), ("x-github-api-version", "2022-11-28")];

pub(super) struct GitHub {
    api: Api,
    http_url: String,
}

#[derive(Deserialize)]
struct RepoBody {
    html_url: Option<String>,
    default_branch: Option<String>,
}

#[derive(Deserialize)]
struct CommitRef {
    sha: String,
}

#[derive(Deserialize)]
struct TagBody {
    name: String,
    commit: CommitRef,
}

#[derive(Deserialize)]
struct BranchBody {
    commit: CommitRef,
}

impl GitHub {
    pub(super) fn new(connection: Connection, client: Client) -> Self {
        let api = Api::new(client, connection.provider, &connection.api_url, connection.token, HEADERS);
        Self { api, http_url: connection.http_url.trim_end_matches('/').to_owned() }
    }
}

/// `/repos/:owner/:repo`.
fn repo_path(repo: &RepoId) -> Result<String, VcsError> {
    Ok(format!("/repos/{}/{}", segment(&repo.owner)?, segment(&repo.name)?))
}

/// A ref in a path: GitHub takes its slashes (`feature/x`) as they are.
fn ref_path(git_ref: &str) -> Result<String, VcsError> {
    Ok(git_ref.split('/').map(segment).collect::<Result<Vec<_>, _>>()?.join("/"))
}

#[async_trait]
impl VcsProvider for GitHub {
    async fn repository(&self, repo: &RepoId) -> Result<Repository, VcsError> {
        let call = format!("reading repository {}", repo.full());
        let body: RepoBody = self.api.get(&call, &repo_path(repo)?).await?;
        let default_branch = body.default_branch.ok_or_else(|| {
            VcsError::NotFound(format!("{call}: GitHub names no default branch, so the repository is empty"))
        })?;
        let http_url = body.html_url.unwrap_or_else(|| format!("{}/{}", self.http_url, repo.full()));
        Ok(Repository { http_url, default_branch })
    }

    async fn tags(&self, repo: &RepoId) -> Result<Vec<Tag>, VcsError> {
        let call = format!("listing tags of {}", repo.full());
        let tags: Vec<TagBody> = self.api.all_pages(&call, &format!("{}/tags?", repo_path(repo)?)).await?;
        Ok(listed_tags(&call, tags.into_iter().map(|tag| (tag.name, tag.commit.sha))))
    }

    async fn branch_head(&self, repo: &RepoId, branch: &str) -> Result<String, VcsError> {
        let call = format!("reading branch {branch} of {}", repo.full());
        let path = format!("{}/branches/{}", repo_path(repo)?, ref_path(branch)?);
        let body: BranchBody = self.api.get(&call, &path).await?;
        answered_sha(&call, body.commit.sha)
    }

    async fn commit(&self, repo: &RepoId, sha: &str) -> Result<String, VcsError> {
        let call = format!("reading commit {sha} of {}", repo.full());
        if !looks_like_sha(sha) {
            return Err(VcsError::NotFound(format!("{call}: not a commit SHA")));
        }
        let path = format!("{}/commits/{sha}", repo_path(repo)?);
        // An unknown SHA is 422 ("No commit found"), and any SHA of an empty repository 409.
        let missing = [StatusCode::UNPROCESSABLE_ENTITY, StatusCode::CONFLICT];
        let body: CommitRef = self.api.get_where(&call, &path, &missing).await?;
        matching_commit(&call, sha, body.sha)
    }

    async fn archive(&self, repo: &RepoId, git_ref: &str) -> Result<ArchiveReader, VcsError> {
        let call = format!("downloading the archive of {} at {git_ref}", repo.full());
        self.api.stream(&call, &format!("{}/tarball/{}", repo_path(repo)?, ref_path(git_ref)?)).await
    }

    async fn create_webhook(&self, repo: &RepoId, url: &str, secret: &str) -> Result<String, VcsError> {
        let call = format!("creating a webhook on {}", repo.full());
        let body = json!({
            "name": "web",
            "active": true,
            "events": ["push", "create"],
            "config": { "url": url, "content_type": "json", "secret": secret, "insecure_ssl": "0" },
        });
        let created: Created = self.api.post(&call, &format!("{}/hooks", repo_path(repo)?), &body).await?;
        Ok(created.id())
    }
}
