//! Publishing modules from a VCS repository: Hangar reads repository data and downloads archives
//! through the providers' REST APIs, because Lambda has no git binary. [`VcsProvider`] is the
//! one interface the registry uses; [`provider`] picks the GitHub (github.com and Enterprise
//! Server) or GitLab (hosted and self-managed) implementation for a connection.
//! [`verify_github_signature`], [`verify_gitlab_token`] and [`tag_from_delivery`] check and read
//! the webhook deliveries that announce new tags. Every call goes through one [`Client`], which
//! reaches the public Internet and the networks the operator allows
//! (`HANGAR_VCS_ALLOWED_NETWORKS`), nothing else; [`check_url`] holds a connection's URLs to
//! the same rule when they are given.

mod client;
mod github;
mod gitlab;
mod http;
mod networks;
mod webhooks;

use std::fmt;
use std::pin::Pin;

use async_trait::async_trait;
use tokio::io::AsyncRead;

pub use client::{check_url, Client, UrlProblem};
pub use networks::{AllowedNetworks, Network, Refused};
pub use webhooks::{tag_from_delivery, verify_github_signature, verify_gitlab_token};

/// A VCS provider kind, spelled as HCP Terraform's `service-provider` attribute spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceProvider {
    /// github.com.
    GitHub,
    /// GitHub Enterprise Server, whose API lives under `/api/v3`.
    GitHubEnterprise,
    /// gitlab.com.
    GitLabHosted,
    /// Self-managed GitLab, Community Edition.
    GitLabCommunityEdition,
    /// Self-managed GitLab, Enterprise Edition.
    GitLabEnterpriseEdition,
}

impl ServiceProvider {
    const ALL: [Self; 5] = [
        Self::GitHub,
        Self::GitHubEnterprise,
        Self::GitLabHosted,
        Self::GitLabCommunityEdition,
        Self::GitLabEnterpriseEdition,
    ];

    /// The provider named by HCP Terraform's spelling (`github`, `gitlab_hosted`, …).
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|provider| provider.as_str() == raw)
    }

    /// HCP Terraform's spelling of the provider.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::GitHub => "github",
            Self::GitHubEnterprise => "github_enterprise",
            Self::GitLabHosted => "gitlab_hosted",
            Self::GitLabCommunityEdition => "gitlab_community_edition",
            Self::GitLabEnterpriseEdition => "gitlab_enterprise_edition",
        }
    }

    /// Whether the provider speaks GitLab's API (otherwise GitHub's).
    pub fn is_gitlab(&self) -> bool {
        matches!(self, Self::GitLabHosted | Self::GitLabCommunityEdition | Self::GitLabEnterpriseEdition)
    }

    /// The product's name, for error messages.
    fn vendor(&self) -> &'static str {
        match self {
            Self::GitHub => "GitHub",
            Self::GitHubEnterprise => "GitHub Enterprise",
            _ => "GitLab",
        }
    }
}

/// A repository reference as HCP Terraform's `vcs-repo.identifier` spells it: `:org/:repo` for
/// GitHub; for GitLab `:namespace/:project` where the namespace may hold subgroups
/// (`group/sub/project`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepoId {
    /// The GitHub organization or user, or the GitLab namespace (`group/sub`).
    pub owner: String,
    /// The repository or project name.
    pub name: String,
}

impl RepoId {
    /// Reads an identifier in the form the provider uses; the error says which form was expected.
    pub fn parse(provider: &ServiceProvider, identifier: &str) -> Result<Self, String> {
        let segments: Vec<&str> = identifier.split('/').collect();
        let (fits, form) = if provider.is_gitlab() {
            (segments.len() >= 2, "a GitLab project is :namespace/:project, the namespace possibly with subgroups")
        } else {
            (segments.len() == 2, "a GitHub repository is :org/:repo")
        };
        if !fits || !segments.iter().all(|segment| valid_segment(segment)) {
            return Err(format!(
                "{identifier:?} is not a valid repository identifier: {form} (letters, digits, -, _ and .)"
            ));
        }
        let (name, owner) = segments.split_last().expect("at least two segments");
        Ok(Self { owner: owner.join("/"), name: (*name).to_owned() })
    }

    /// `owner/name`, the identifier as parsed.
    pub fn full(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

/// Letters, digits, `-`, `_` and `.`, which both providers allow in names; never `.` or `..`.
fn valid_segment(segment: &str) -> bool {
    !matches!(segment, "" | "." | "..")
        && segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A tag and the commit it points at (peeled: for annotated tags, the commit, not the tag object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tag {
    /// The tag's name, e.g. `v1.2.0`.
    pub name: String,
    /// The full SHA of the commit.
    pub commit_sha: String,
}

/// What the registry records about a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The repository's web page, HCP Terraform's `repository-http-url`.
    pub http_url: String,
    /// The branch the repository's page shows.
    pub default_branch: String,
}

/// Why a provider call failed, by what the caller can do about it. Messages name the call and
/// repository, never the token nor what the provider said.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    /// The repository, ref or commit is missing, or the token cannot see it (GitHub answers 404
    /// for both).
    #[error("{0}")]
    NotFound(String),
    /// The token is invalid or lacks access (401/403).
    #[error("{0}")]
    Unauthorized(String),
    /// Any other status, a network failure, a timeout, an unexpected payload, or a call Hangar
    /// refused to make (an address outside the allowed networks, a redirect off the provider's
    /// host). The message says only that the provider could not be reached or answered with an
    /// error: the detail is logged.
    #[error("{0}")]
    Upstream(String),
}

/// What a connection needs to reach a provider.
#[derive(Clone)]
pub struct Connection {
    /// Which API the connection speaks.
    pub provider: ServiceProvider,
    /// The API's base URL: `https://api.github.com`, `https://ghe.example/api/v3`,
    /// `https://gitlab.com/api/v4`.
    pub api_url: String,
    /// The web base URL (`https://github.com`), used for a repository's web URL when the API
    /// omits it.
    pub http_url: String,
    /// The OAuth or personal access token, sent as a bearer token.
    pub token: String,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("provider", &self.provider)
            .field("api_url", &self.api_url)
            .field("http_url", &self.http_url)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A streamed archive body.
pub type ArchiveReader = Pin<Box<dyn AsyncRead + Send>>;

/// The repository operations module publishing needs, the same for every provider.
#[async_trait]
pub trait VcsProvider: Send + Sync {
    /// The repository's web URL (for `repository-http-url`) and default branch.
    async fn repository(&self, repo: &RepoId) -> Result<Repository, VcsError>;

    /// Every tag (all pages) with its commit.
    async fn tags(&self, repo: &RepoId) -> Result<Vec<Tag>, VcsError>;

    /// The commit a branch points at.
    async fn branch_head(&self, repo: &RepoId, branch: &str) -> Result<String, VcsError>;

    /// Checks a commit exists and returns its full SHA; `sha` may be abbreviated, but must be
    /// hexadecimal (a branch or tag name is [`VcsError::NotFound`]).
    async fn commit(&self, repo: &RepoId, sha: &str) -> Result<String, VcsError>;

    /// Streams the gzip tarball of a ref (tag name or commit SHA). Archives from both providers
    /// hold one top-level directory.
    async fn archive(&self, repo: &RepoId, git_ref: &str) -> Result<ArchiveReader, VcsError>;

    /// Registers a push/tag webhook delivering to `url`, signed with `secret`; returns the
    /// provider's hook id.
    async fn create_webhook(&self, repo: &RepoId, url: &str, secret: &str) -> Result<String, VcsError>;
}

/// The provider client for a connection; `client` is built once per process and shared.
pub fn provider(connection: Connection, client: Client) -> Box<dyn VcsProvider> {
    if connection.provider.is_gitlab() {
        Box::new(gitlab::GitLab::new(connection, client))
    } else {
        Box::new(github::GitHub::new(connection, client))
    }
}

/// Whether `sha` can be a (possibly abbreviated) commit SHA, SHA-1 or SHA-256.
fn looks_like_sha(sha: &str) -> bool {
    (4..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `sha` is a full commit SHA, SHA-1 or SHA-256.
fn is_full_sha(sha: &str) -> bool {
    matches!(sha.len(), 40 | 64) && sha.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A commit SHA the provider answered, if it is one: what else a field holds is the provider's
/// text, for the log only.
fn answered_sha(call: &str, sha: String) -> Result<String, VcsError> {
    if is_full_sha(&sha) {
        return Ok(sha);
    }
    tracing::warn!(call, "the VCS provider answered something else where a commit SHA belongs");
    Err(VcsError::Upstream(format!("{call}: {}", http::ANSWERED_ERROR)))
}

/// The provider's answer to [`VcsProvider::commit`] if it names the commit asked for.
fn matching_commit(call: &str, asked: &str, full: String) -> Result<String, VcsError> {
    let full = answered_sha(call, full)?;
    if full.to_ascii_lowercase().starts_with(&asked.to_ascii_lowercase()) {
        Ok(full)
    } else {
        Err(VcsError::NotFound(format!("{call}: the provider resolved it to {full}, which is another commit")))
    }
}

/// Longest tag name read: git allows longer, but no semantic version needs it.
const MAX_TAG_NAME: usize = 255;

/// The listed tags worth a version: each name at most [`MAX_TAG_NAME`] bytes, each commit a
/// full SHA. Others are skipped (and logged), not reported: one odd tag should not stop the rest.
fn listed_tags(call: &str, tags: impl IntoIterator<Item = (String, String)>) -> Vec<Tag> {
    let (mut kept, mut skipped) = (Vec::new(), 0usize);
    for (name, commit_sha) in tags {
        if name.len() <= MAX_TAG_NAME && is_full_sha(&commit_sha) {
            kept.push(Tag { name, commit_sha });
        } else {
            skipped += 1;
        }
    }
    if skipped > 0 {
        tracing::warn!(
            call,
            skipped,
            "tags skipped: a name longer than {MAX_TAG_NAME} bytes or a commit that is no SHA"
        );
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_parses_back_from_its_spelling() {
        for provider in ServiceProvider::ALL {
            assert_eq!(ServiceProvider::parse(provider.as_str()), Some(provider));
        }
        assert_eq!(ServiceProvider::parse("bitbucket_hosted"), None);
    }

    #[test]
    fn commit_shas_are_hexadecimal_and_of_plausible_length() {
        assert!(looks_like_sha("abc1234") && looks_like_sha(&"a".repeat(40)));
        assert!(!looks_like_sha("main") && !looks_like_sha("abc") && !looks_like_sha(&"a".repeat(65)));
    }
}
