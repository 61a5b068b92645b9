//! GitLab, hosted and self-managed, over REST API v4. Projects are addressed by their full path,
//! URL-encoded into one segment (`group%2Fsub%2Fproject`), as are branch names.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::http::{segment, Api, Created};
use super::{
    answered_sha, listed_tags, looks_like_sha, matching_commit, ArchiveReader, Client, Connection, RepoId, Repository,
    Tag, VcsError, VcsProvider,
};

pub(super) struct GitLab {
    api: Api,
    http_url: String,
}

#[derive(Deserialize)]
struct ProjectBody {
    web_url: Option<String>,
    default_branch: Option<String>,
}

#[derive(Deserialize)]
struct CommitBody {
    id: String,
}

#[derive(Deserialize)]
struct TagBody {
    name: String,
    commit: CommitBody,
}

#[derive(Deserialize)]
struct BranchBody {
    commit: CommitBody,
}

impl GitLab {
    pub(super) fn new(connection: Connection, client: Client) -> Self {
        let api = Api::new(client, connection.provider, &connection.api_url, connection.token, &[]);
        Self { api, http_url: connection.http_url.trim_end_matches('/').to_owned() }
    }
}

/// `/projects/:id`, the id being the project's encoded full path.
fn project_path(repo: &RepoId) -> Result<String, VcsError> {
    Ok(format!("/projects/{}", segment(&repo.full())?))
}

#[async_trait]
impl VcsProvider for GitLab {
    async fn repository(&self, repo: &RepoId) -> Result<Repository, VcsError> {
        let call = format!("reading project {}", repo.full());
        let body: ProjectBody = self.api.get(&call, &project_path(repo)?).await?;
        let default_branch = body.default_branch.ok_or_else(|| {
            VcsError::NotFound(format!("{call}: GitLab names no default branch, so the repository is empty"))
        })?;
        let http_url = body.web_url.unwrap_or_else(|| format!("{}/{}", self.http_url, repo.full()));
        Ok(Repository { http_url, default_branch })
    }

    async fn tags(&self, repo: &RepoId) -> Result<Vec<Tag>, VcsError> {
        let call = format!("listing tags of {}", repo.full());
        let path = format!("{}/repository/tags?", project_path(repo)?);
        let tags: Vec<TagBody> = self.api.all_pages(&call, &path).await?;
        Ok(listed_tags(&call, tags.into_iter().map(|tag| (tag.name, tag.commit.id))))
    }

    async fn branch_head(&self, repo: &RepoId, branch: &str) -> Result<String, VcsError> {
        let call = format!("reading branch {branch} of {}", repo.full());
        let path = format!("{}/repository/branches/{}", project_path(repo)?, segment(branch)?);
        let body: BranchBody = self.api.get(&call, &path).await?;
        answered_sha(&call, body.commit.id)
    }

    async fn commit(&self, repo: &RepoId, sha: &str) -> Result<String, VcsError> {
        let call = format!("reading commit {sha} of {}", repo.full());
        if !looks_like_sha(sha) {
            return Err(VcsError::NotFound(format!("{call}: not a commit SHA")));
        }
        let body: CommitBody =
            self.api.get(&call, &format!("{}/repository/commits/{sha}", project_path(repo)?)).await?;
        matching_commit(&call, sha, body.id)
    }

    async fn archive(&self, repo: &RepoId, git_ref: &str) -> Result<ArchiveReader, VcsError> {
        let call = format!("downloading the archive of {} at {git_ref}", repo.full());
        let path = format!("{}/repository/archive.tar.gz?sha={}", project_path(repo)?, segment(git_ref)?);
        self.api.stream(&call, &path).await
    }

    async fn create_webhook(&self, repo: &RepoId, url: &str, secret: &str) -> Result<String, VcsError> {
        let call = format!("creating a webhook on {}", repo.full());
        let body = json!({ "url": url, "token": secret, "push_events": true, "tag_push_events": true });
        let created: Created = self.api.post(&call, &format!("{}/hooks", project_path(repo)?), &body).await?;
        Ok(created.id())
    }
}
