//! Publishing modules from a VCS repository, on top of the registry's core (modules, versions,
//! ingest), which knows nothing of repositories. Publishing and webhook deliveries only record
//! work; the scheduled job (dev-server's timer, or EventBridge's key-rotation schedule in AWS)
//! does it off the request path: a *sync* lists the repository's tags and creates a version for
//! each semantic-version tag, a *fetch* downloads a version's archive through the provider's API,
//! strips its top-level directory (keeping only the module's `source-directory` of a monorepo)
//! and hands it to the same ingest as an upload. The modules of one repository are indexed
//! together and share its webhook, so one delivery feeds them all.

mod actions;
mod monorepo;
mod publish;
mod reseal;
mod sync;
mod webhook;

pub use actions::{resync, retry};
pub use monorepo::{MAX_SOURCE_DIRECTORY, MAX_TAG_PREFIX};
pub use publish::{
    organization_of_token, publish, repo_update, switch, PublishRequest, RepoUpdate, Switch, MAX_MODULES_PER_REPOSITORY,
};
pub use reseal::reseal;
pub use sync::{create_branch_version, run_pending, run_pending_at, RunBounds, MAX_ATTEMPTS};
pub use webhook::{delivery, MAX_DELIVERY_BYTES};
