//! Every key string of the single-table layout, and nothing else.
//!
//! | item | PK | SK | GSI1 |
//! |---|---|---|---|
//! | organization | `ORG#<org-id>` | `ORG` | `ORGS` / `<name>` |
//! | organization name | `ORGNAME#<name>` | `ORGNAME` | |
//! | team | `ORG#<org-id>` | `TEAM#<name>` | |
//! | workspace | `ORG#<org-id>` | `WS#<name>` | |
//! | a workspace's state version | `ORG#<org-id>` | `WSD#<workspace-id>#SV#<sequence>` | |
//! | a team's access to a workspace, the team's index entry | `ORG#<org-id>` | `WSD#<workspace-id>#ACCESS#<team-id>`, `TEAMWS#<team-id>#<workspace-id>` | |
//! | a workspace's variable, its key's claim | `ORG#<org-id>` | `WSD#<workspace-id>#VAR#<var-id>`, `WSD#<workspace-id>#VARKEY#<category>#<key>` | |
//! | registry module (one provider) | `ORG#<org-id>` | `MOD#private#<name>#<provider>`, `MOD#public#<namespace>#<name>#<provider>` | |
//! | module version (private only) | `ORG#<org-id>` | `VER#<name>#<provider>#<version>` | |
//! | its parsed metadata | `ORG#<org-id>` | `VMETA#<name>#<provider>#<version>` | |
//! | a version's status entry (private only) | `ORG#<org-id>` | `VST#<name>#<provider>#<precedence>` | |
//! | the module's version index: every entry again, one attribute each | `ORG#<org-id>` | `VIDX#<name>#<provider>` | |
//! | pending upload | `UPLOAD#<object-id>` | `UPLOAD` | |
//! | registry provider | `ORG#<org-id>` | `PROV#private#<name>`, `PROV#public#<namespace>#<name>` | |
//! | provider version (private only; its platforms inside) | `ORG#<org-id>` | `PROVV#<name>#<version>` | |
//! | a provider's version index: what the protocol lists, one attribute per version | `ORG#<org-id>` | `PROVIDX#<name>` | |
//! | GPG key | `ORG#<org-id>` | `GPGKEY#<key-id>` | |
//! | pending provider upload (SHA256SUMS, its signature, a binary) | `PROVUPLOAD#<object-id>` | `PROVUPLOAD` | |
//! | agent pool | `ORG#<org-id>` | `POOL#<pool-id>` | |
//! | agent pool name | `ORG#<org-id>` | `POOLNAME#<name>` | |
//! | agent token | `ORG#<org-id>` | `AGENTTOKEN#<pool-id>#<token-id>` | |
//! | agent | `ORG#<org-id>` | `AGENT#<pool-id>#<agent-id>` | `AGENTDUE` / `<due>#<agent-id>`; GSI2 `AGENTLIVE#<org-id>` / `<errored-at>#<agent-id>` while it holds a slot |
//! | live-agent counter | `ORG#<org-id>` | `AGENTS#LIVE` | |
//! | a pool's index of its live agents: one attribute each | `ORG#<org-id>` | `POOLLIVE#<pool-id>` | |
//! | VCS connection (OAuth client), its OAuth token | `ORG#<org-id>` | `OAUTHCLIENT#<id>`, `OAUTHTOKEN#<id>` | |
//! | broker service token (TTL) | `VTOKEN#<sha256-hex>` | `VTOKEN` | |
//! | broker ACL policy, mount | `BROKER` | `POLICY#<name>`, `MOUNT#<path>` | |
//! | bootstrap record of the root service token | `BROKER` | `ROOT_TOKEN` | |
//! | the broker's reseal pass finished | `BROKER` | `RESEALED` | |
//! | a mount's configuration, roles, static roles, leases | `BMOUNT#<mount-uuid>` | `CONFIG#<name>`, `ROLE#<name>`, `STATIC#<name>`, `LEASE#<id>` | static roles `BSTATIC` / `<next rotation>#…`, leases `BLEASES` / `<expiry>#<id>` |
//! | a write-ahead record of an IAM user being created | `BMOUNT#<mount-uuid>` | `USERWAL#<user>` | `BUSERWAL` / `<written at>#<mount>/<user>` |
//! | a workspace's configuration version, run, run waiting for the lock, log chunk | `ORG#<org-id>` | `WSD#<workspace-id>#CV#<ms>#<cv-id>`, `…#RUN#<ms>#<run-id>`, `…#RUNWAIT#<ms>#<run-id>`, `…#LOG#<run-id>#<phase>#<offset>` | a claimed run: `JOBLEASE` / `<lease end>#<run-id>`; GSI2 a queued or running run: `RUNQ#<org-id>` / `<ms>#<run-id>` |
//! | a job waiting for an agent | `JOBQ#<pool-id or remote>` | `<ms>#<run-id>` | |
//! | id pointer (team, workspace, …) | `ID#<id>` | `ID` | |
//! | token | `TOKEN#<sha256-hex>` | `TOKEN` | |
//! | web console session (TTL) | `WEBSESSION#<sha256-hex of the session id>` | `WEBSESSION` | |
//! | bootstrap record of the site-admin token, of the runners' token | `SITE` | `ADMIN_TOKEN`, `RUNNER_TOKEN` | |
//! | the registry's reseal pass finished | `SITE` | `REGISTRY_RESEALED` | |
//!
//! Everything an organization owns lives in its partition, so deleting the organization is a
//! strongly consistent query of one partition; items outside it (id pointers, tokens) are
//! named by the owning item (see `accounts::cascade`).

use super::{Index, Key, Query};
use crate::ids::Kind;

const ORG_SK: &str = "ORG";

pub fn organization(org_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), ORG_SK)
}

/// The id of the organization whose partition holds `key`, if an organization's does.
pub fn organization_of(key: &Key) -> Option<&str> {
    key.pk.strip_prefix("ORG#")
}

pub fn organization_name(name: &str) -> Key {
    Key::new(format!("ORGNAME#{name}"), "ORGNAME")
}

/// Where organizations are listed, by name.
pub fn organizations_by_name() -> (Index, String, String) {
    (Index::Gsi1, "ORGS".to_owned(), String::new())
}

pub fn organization_index_key(name: &str) -> (Index, String, String) {
    (Index::Gsi1, "ORGS".to_owned(), name.to_owned())
}

/// Every item an organization owns, the organization item included.
pub fn organization_partition(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "")
}

pub fn team(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("TEAM#{name}"))
}

pub fn teams(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "TEAM#")
}

pub fn workspace(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WS#{name}"))
}

pub fn workspaces(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "WS#")
}

/// A workspace's state version, by its place in the workspace's sequence of versions (zero
/// padded, so the newest sorts last).
pub fn state_version(org_id: &str, workspace_id: &str, sequence: u64) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#SV#{sequence:012}"))
}

/// A state version still waiting for its state (or discarded on arrival): apart from the
/// finalized ones, so that listing those never reads it.
pub fn pending_state_version(org_id: &str, workspace_id: &str, version_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#SVPENDING#{version_id}"))
}

/// What an upload link of a pending state version leads to: the version and which body it takes.
pub fn pending_state_upload(object_id: &str) -> Key {
    Key::new(format!("STATEUPLOAD#{object_id}"), "STATEUPLOAD")
}

/// A workspace's state versions, oldest first.
pub fn state_versions(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#SV#"))
}

/// A workspace's variable.
pub fn variable(org_id: &str, workspace_id: &str, variable_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#VAR#{variable_id}"))
}

/// How many variables a workspace has (`count`), bounding them.
pub fn variable_count(org_id: &str, workspace_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#VARCOUNT"))
}

/// A workspace's variables.
pub fn variables(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#VAR#"))
}

/// Claimed by a variable's key in its category, so a workspace has one variable of each. Keys
/// hold no `#` (`accounts::variables` checks them).
pub fn variable_key_claim(org_id: &str, workspace_id: &str, category: &str, key: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#VARKEY#{category}#{key}"))
}

/// A team's access to a workspace: one per team and workspace.
pub fn team_access(org_id: &str, workspace_id: &str, team_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#ACCESS#{team_id}"))
}

/// The teams' accesses to a workspace.
pub fn team_accesses(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#ACCESS#"))
}

/// A team's index entry for a workspace it has access to.
pub fn team_workspace(org_id: &str, team_id: &str, workspace_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("TEAMWS#{team_id}#{workspace_id}"))
}

/// The workspaces a team has access to.
pub fn team_workspaces(org_id: &str, team_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("TEAMWS#{team_id}#"))
}

/// Everything a workspace owns (its state versions, variables and teams' accesses), which its
/// deletion removes.
pub fn workspace_data(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#"))
}

/// A workspace's configuration version, by when it was made (milliseconds, zero padded: the
/// newest sorts last).
pub fn configuration_version(org_id: &str, workspace_id: &str, at_ms: i64, id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#CV#{at_ms:015}#{id}"))
}

pub fn configuration_versions(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#CV#"))
}

/// A workspace's run, by when it was made.
pub fn run(org_id: &str, workspace_id: &str, at_ms: i64, id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUN#{at_ms:015}#{id}"))
}

/// How many runs and configuration versions a workspace has had (`runs`, `configurations`):
/// the totals its lists answer with, counted in each one's own creation.
pub fn run_counts(org_id: &str, workspace_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUNCOUNTS"))
}

pub fn runs(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUN#"))
}

/// A run waiting for its turn at the workspace's lock, oldest first: one per pending run that
/// needs the lock, removed when it starts or ends.
pub fn run_waiting(org_id: &str, workspace_id: &str, at_ms: i64, id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUNWAIT#{at_ms:015}#{id}"))
}

pub fn runs_waiting(org_id: &str, workspace_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUNWAIT#"))
}

/// A chunk of a run's plan or apply log, by the offset of its first byte.
pub fn run_log_chunk(org_id: &str, workspace_id: &str, run_id: &str, phase: &str, offset: u64) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#LOG#{run_id}#{phase}#{offset:012}"))
}

/// How much of a run's plan or apply log is kept (`length`, `chunks`): what the next chunk must
/// start at, and the bound on how many there are.
pub fn run_log_head(org_id: &str, workspace_id: &str, run_id: &str, phase: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#LOGHEAD#{run_id}#{phase}"))
}

/// What a run phase was given identity tokens for (never the tokens).
pub fn run_credentials(org_id: &str, workspace_id: &str, run_id: &str, phase: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#RUNCRED#{run_id}#{phase}"))
}

pub fn run_log(org_id: &str, workspace_id: &str, run_id: &str, phase: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("WSD#{workspace_id}#LOG#{run_id}#{phase}#"))
}

/// A job waiting for an agent in a queue (an agent pool's id, or `remote` for Hangar's own
/// runners), oldest first.
pub fn job_queue_entry(queue: &str, at_ms: i64, run_id: &str) -> Key {
    Key::new(format!("JOBQ#{queue}"), format!("{at_ms:015}#{run_id}"))
}

pub fn job_queue(queue: &str) -> Query {
    Query::partition(format!("JOBQ#{queue}"), "")
}

/// The schedule (GSI1) of claimed jobs by when their lease runs out.
pub const JOB_LEASES: &str = "JOBLEASE";

/// An organization's runs in its queue (GSI2), queued or running, oldest first.
pub fn active_run_index(org_id: &str, at_ms: i64, run_id: &str) -> (Index, String, String) {
    (Index::Gsi2, format!("RUNQ#{org_id}"), format!("{at_ms:015}#{run_id}"))
}

pub fn active_runs(org_id: &str) -> Query {
    Query::index(Index::Gsi2, format!("RUNQ#{org_id}"), "")
}

/// Points from a resource id (`team-…`, `ws-…`) to the item that holds the resource.
pub fn id_pointer(id: &str) -> Key {
    Key::new(format!("ID#{id}"), "ID")
}

/// Whether `key` is where an organization keeps a resource of `kind`: what an id pointer of
/// that kind may lead to.
pub fn holds(key: &Key, kind: Kind) -> bool {
    let sort = match kind {
        Kind::Team => "TEAM#",
        Kind::Workspace => "WS#",
        Kind::AgentPool => "POOL#",
        Kind::AgentToken => "AGENTTOKEN#",
        Kind::Agent => "AGENT#",
        Kind::OAuthClient => "OAUTHCLIENT#",
        Kind::OAuthToken => "OAUTHTOKEN#",
        Kind::Module => "MOD#",
        Kind::StateVersion | Kind::Variable | Kind::TeamAccess | Kind::ConfigurationVersion | Kind::Run => "WSD#",
    };
    // A workspace's data holds several kinds: the one after its id tells them apart.
    let within: &[&str] = match kind {
        Kind::StateVersion => &["#SV#", "#SVPENDING#"],
        Kind::Variable => &["#VAR#"],
        Kind::TeamAccess => &["#ACCESS#"],
        Kind::ConfigurationVersion => &["#CV#"],
        Kind::Run => &["#RUN#"],
        _ => &[""],
    };
    key.pk.starts_with("ORG#") && key.sk.starts_with(sort) && within.iter().any(|part| key.sk.contains(part))
}

pub fn token(hash_hex: &str) -> Key {
    Key::new(format!("TOKEN#{hash_hex}"), "TOKEN")
}

/// A web console session, by the SHA-256 of the id its cookie holds.
pub fn web_session(hash_hex: &str) -> Key {
    Key::new(format!("WEBSESSION#{hash_hex}"), "WEBSESSION")
}

/// Present once dev-server has generated and printed a site-admin token (before the bootstrap
/// record below existed; still read, for data directories made then).
pub fn site_admin_marker() -> Key {
    Key::new("SITE", "ADMIN_TOKEN_GENERATED")
}

/// The bootstrap record of the site-admin token: the hash installed last, which the next
/// configured value replaces.
pub fn site_admin_bootstrap() -> Key {
    Key::new("SITE", "ADMIN_TOKEN")
}

/// The bootstrap record of the token Hangar's own runners register with.
pub fn site_runner_bootstrap() -> Key {
    Key::new("SITE", "RUNNER_TOKEN")
}

/// The count of organizations, for the site admin's list total.
pub fn organization_total() -> Key {
    Key::new("SITE", "ORGANIZATION_COUNT")
}

/// Present once `registry-sync` has rewritten every format-1 sealed value of the registry's
/// kinds (OAuth tokens, webhook secrets) bound to its record, so later runs skip the pass.
pub fn registry_resealed() -> Key {
    Key::new("SITE", "REGISTRY_RESEALED")
}

/// Where a registry module lives: private modules' namespace is their organization's name,
/// so it is not part of their key (organizations can be renamed).
pub fn module(org_id: &str, namespace: Option<&str>, name: &str, provider: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("{}{provider}", module_prefix(namespace, name)))
}

/// Every provider of one module name.
pub fn module_providers(org_id: &str, namespace: Option<&str>, name: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), module_prefix(namespace, name))
}

fn module_prefix(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        None => format!("MOD#private#{name}#"),
        Some(namespace) => format!("MOD#public#{namespace}#{name}#"),
    }
}

/// Every module of an organization (private before public, then by namespace, name and
/// provider), or those of one registry (`private` or `public`).
pub fn modules(org_id: &str, registry: Option<&str>) -> Query {
    let prefix = match registry {
        Some(registry) => format!("MOD#{registry}#"),
        None => "MOD#".to_owned(),
    };
    Query::partition(format!("ORG#{org_id}"), prefix)
}

pub fn module_version(org_id: &str, name: &str, provider: &str, version: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("VER#{name}#{provider}#{version}"))
}

/// What a private module version's Terraform files declare (its parsed metadata), kept apart
/// from the version so that the version's item stays small.
pub fn module_version_metadata(org_id: &str, name: &str, provider: &str, version: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("VMETA#{name}#{provider}#{version}"))
}

/// Every version of one provider of a private module.
pub fn module_versions(org_id: &str, name: &str, provider: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("VER#{name}#{provider}#"))
}

/// One version's entry in its module's list of versions, keyed by the version without its
/// build metadata (its SemVer precedence): two versions ranked equal cannot both have one.
pub fn version_status(org_id: &str, name: &str, provider: &str, precedence: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("VST#{name}#{provider}#{precedence}"))
}

/// Every version entry of one provider of a private module.
pub fn version_statuses(org_id: &str, name: &str, provider: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("VST#{name}#{provider}#"))
}

/// One item holding every version entry of one provider of a private module, so that a read
/// of the module can fetch them by key, in the same batch as the module.
pub fn version_index(org_id: &str, name: &str, provider: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("VIDX#{name}#{provider}"))
}

/// A module's download count, apart from the module so that downloads never contend with
/// changes to it.
pub fn module_downloads(org_id: &str, namespace: Option<&str>, name: &str, provider: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("DL#{}{provider}", module_prefix(namespace, name)))
}

/// The version waiting for the archive uploaded as this object.
pub fn pending_upload(object_id: &str) -> Key {
    Key::new(format!("UPLOAD#{object_id}"), "UPLOAD")
}

/// Where a registry provider lives: a private provider's namespace is its organization's name,
/// so it is not part of its key (as a private module's).
pub fn registry_provider(org_id: &str, namespace: Option<&str>, name: &str) -> Key {
    let sk = match namespace {
        None => format!("PROV#private#{name}"),
        Some(namespace) => format!("PROV#public#{namespace}#{name}"),
    };
    Key::new(format!("ORG#{org_id}"), sk)
}

/// Every registry provider of an organization, private before public.
pub fn registry_providers(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "PROV#")
}

pub fn provider_version(org_id: &str, name: &str, version: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("PROVV#{name}#{version}"))
}

/// Every version of one private provider.
pub fn provider_versions(org_id: &str, name: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("PROVV#{name}#"))
}

/// One item holding what the provider registry protocol lists of each version of a private
/// provider, so that its `versions` is read by key.
pub fn provider_version_index(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("PROVIDX#{name}"))
}

pub fn gpg_key(org_id: &str, key_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("GPGKEY#{key_id}"))
}

pub fn gpg_keys(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "GPGKEY#")
}

/// The provider version part (SHA256SUMS, its signature, a platform's binary) waiting for
/// the file uploaded as this object.
pub fn provider_upload(object_id: &str) -> Key {
    Key::new(format!("PROVUPLOAD#{object_id}"), "PROVUPLOAD")
}

pub fn agent_pool(org_id: &str, pool_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("POOL#{pool_id}"))
}

pub fn agent_pools(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "POOL#")
}

/// Claimed by a pool's name, so names are unique per organization.
pub fn agent_pool_name(org_id: &str, name: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("POOLNAME#{name}"))
}

pub fn agent_token(org_id: &str, pool_id: &str, token_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("AGENTTOKEN#{pool_id}#{token_id}"))
}

pub fn agent_tokens(org_id: &str, pool_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("AGENTTOKEN#{pool_id}#"))
}

pub fn agent(org_id: &str, pool_id: &str, agent_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("AGENT#{pool_id}#{agent_id}"))
}

pub fn agents(org_id: &str, pool_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), format!("AGENT#{pool_id}#"))
}

/// A pool's index of its live agents (see `agents::live_index`).
pub fn pool_live_agents(org_id: &str, pool_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("POOLLIVE#{pool_id}"))
}

/// The organization's count of agents holding a live-agent slot.
pub fn live_agent_counter(org_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), "AGENTS#LIVE")
}

/// The schedule partition (GSI1) of every agent, ordered by when the scheduled job next has
/// something to do with it: mark it errored, or prune it.
pub const AGENT_SCHEDULE: &str = "AGENTDUE";

/// Where an agent that holds a live-agent slot is indexed (GSI2), ordered by when it would
/// become errored: the first is the one a registration at the limit may release.
/// `sort_key` is a schedule sort key (`store::schedule::sort_key`).
pub fn live_agent_index(org_id: &str, sort_key: String) -> (Index, String, String) {
    (Index::Gsi2, format!("AGENTLIVE#{org_id}"), sort_key)
}

pub fn live_agents_by_silence(org_id: &str) -> Query {
    Query::index(Index::Gsi2, format!("AGENTLIVE#{org_id}"), "")
}

pub fn service_token(hash_hex: &str) -> Key {
    Key::new(format!("VTOKEN#{hash_hex}"), "VTOKEN")
}

pub fn broker_policy(name: &str) -> Key {
    Key::new("BROKER", format!("POLICY#{name}"))
}

pub fn broker_policies() -> Query {
    Query::partition("BROKER", "POLICY#")
}

/// A token role of the broker's token store (`auth/token/roles/:name`).
pub fn broker_token_role(name: &str) -> Key {
    Key::new("BROKER", format!("TOKENROLE#{name}"))
}

pub fn broker_token_roles() -> Query {
    Query::partition("BROKER", "TOKENROLE#")
}

pub fn broker_mount(path: &str) -> Key {
    Key::new("BROKER", format!("MOUNT#{path}"))
}

pub fn broker_mounts() -> Query {
    Query::partition("BROKER", "MOUNT#")
}

/// An auth method enabled at a path (`sys/auth/<path>`); its configuration and roles live in the
/// partition its uuid names, as a secrets engine mount's do.
pub fn broker_auth_mount(path: &str) -> Key {
    Key::new("BROKER", format!("AUTH#{path}"))
}

pub fn broker_auth_mounts() -> Query {
    Query::partition("BROKER", "AUTH#")
}

/// Present once the default `aws` mount has been made, so unmounting it is not undone.
pub fn broker_mounts_initialized() -> Key {
    Key::new("BROKER", "MOUNTS_INITIALIZED")
}

/// Present once `key-rotation` has rewritten every format-1 sealed value of the broker (mount
/// root keys, static-role keys) bound to its record, so later runs skip the pass.
pub fn broker_resealed() -> Key {
    Key::new("BROKER", "RESEALED")
}

/// Everything a mount holds (configuration, roles, leases), so unmounting is one partition.
pub fn mount_partition(mount_uuid: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), "")
}

pub fn mount_config(mount_uuid: &str, name: &str) -> Key {
    Key::new(format!("BMOUNT#{mount_uuid}"), format!("CONFIG#{name}"))
}

pub fn mount_role(mount_uuid: &str, name: &str) -> Key {
    Key::new(format!("BMOUNT#{mount_uuid}"), format!("ROLE#{name}"))
}

pub fn mount_roles(mount_uuid: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), "ROLE#")
}

/// Present once dev-server has generated and printed a root service token (before the bootstrap
/// record below existed; still read, for data directories made then).
pub fn broker_root_generated() -> Key {
    Key::new("SITE", "ROOT_SERVICE_TOKEN_GENERATED")
}

/// The bootstrap record of the broker's root service token: the value configured last (its
/// hash, or none) and the accessor of the token installed for it.
pub fn broker_root_bootstrap() -> Key {
    Key::new("BROKER", "ROOT_TOKEN")
}

pub fn mount_lease(mount_uuid: &str, lease_id: &str) -> Key {
    Key::new(format!("BMOUNT#{mount_uuid}"), format!("LEASE#{lease_id}"))
}

pub fn mount_leases(mount_uuid: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), "LEASE#")
}

/// The leases of a mount whose ids start with `id_prefix` (`aws/creds/deploy/`), in id order.
pub fn mount_leases_under(mount_uuid: &str, id_prefix: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), format!("LEASE#{id_prefix}"))
}

/// The write-ahead record of an IAM user the broker is creating (`USERWAL#<user>`), present from
/// before `CreateUser` until the user's lease exists.
pub fn mount_user_intent(mount_uuid: &str, user: &str) -> Key {
    Key::new(format!("BMOUNT#{mount_uuid}"), format!("USERWAL#{user}"))
}

pub fn mount_user_intents(mount_uuid: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), "USERWAL#")
}

pub fn mount_static_role(mount_uuid: &str, name: &str) -> Key {
    Key::new(format!("BMOUNT#{mount_uuid}"), format!("STATIC#{name}"))
}

pub fn mount_static_roles(mount_uuid: &str) -> Query {
    Query::partition(format!("BMOUNT#{mount_uuid}"), "STATIC#")
}

/// A VCS connection (HCP Terraform's OAuth client).
pub fn oauth_client(org_id: &str, id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("OAUTHCLIENT#{id}"))
}

/// Every VCS connection of an organization.
pub fn oauth_clients(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "OAUTHCLIENT#")
}

/// A VCS connection's OAuth token, which holds the provider credential, sealed.
pub fn oauth_token(org_id: &str, id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), format!("OAUTHTOKEN#{id}"))
}

/// Every VCS connection's OAuth token of an organization.
pub fn oauth_tokens(org_id: &str) -> Query {
    Query::partition(format!("ORG#{org_id}"), "OAUTHTOKEN#")
}

/// The partition of the modules published from one repository (through one VCS connection's
/// token) in an organization, so that a webhook delivery finds them all with one query.
fn vcs_repository(org_id: &str, oauth_token_id: &str, identifier: &str) -> String {
    format!("VCSREPO#{org_id}#{oauth_token_id}#{}", identifier.to_ascii_lowercase())
}

/// A module's entry among the modules published from its repository.
pub fn vcs_repository_module(org_id: &str, oauth_token_id: &str, identifier: &str, module_id: &str) -> Key {
    Key::new(vcs_repository(org_id, oauth_token_id, identifier), format!("MOD#{module_id}"))
}

/// Every module published from one repository (a monorepo holds several).
pub fn vcs_repository_modules(org_id: &str, oauth_token_id: &str, identifier: &str) -> Query {
    Query::partition(vcs_repository(org_id, oauth_token_id, identifier), "MOD#")
}

/// Points from a VCS module's webhook id to the module.
pub fn vcs_webhook(uuid: &str) -> Key {
    Key::new(format!("WEBHOOK#{uuid}"), "WEBHOOK")
}

/// The schedule partition (GSI1) of static roles, ordered by next rotation.
pub const STATIC_ROLE_SCHEDULE: &str = "BSTATIC";
/// The schedule partition (GSI1) of the broker's write-ahead user records, ordered by when
/// each was written: what the scheduled job rolls back once old enough.
pub const USER_INTENT_SCHEDULE: &str = "BUSERWAL";
/// The schedule partition (GSI1) of the broker's leases, ordered by expiry.
pub const LEASE_EXPIRY_SCHEDULE: &str = "BLEASES";

/// Points from a broker service token's accessor to the token (`VACCESSOR#<accessor>` /
/// `VACCESSOR`), for `auth/token/revoke-accessor`; it lives and expires with the token.
pub fn service_token_accessor(accessor: &str) -> Key {
    Key::new(format!("VACCESSOR#{accessor}"), "VACCESSOR")
}

/// Where a broker service token is listed among its parent's children: GSI2
/// `VCHILDREN#<parent-accessor>` / `<accessor>`.
pub fn service_token_child(parent_accessor: &str, accessor: &str) -> (Index, String, String) {
    (Index::Gsi2, format!("VCHILDREN#{parent_accessor}"), accessor.to_owned())
}

/// The children of a broker service token (what revoking it walks).
pub fn service_token_children(parent_accessor: &str) -> Query {
    Query::index(Index::Gsi2, format!("VCHILDREN#{parent_accessor}"), "")
}

/// Where a lease is listed among the leases of the token it was issued to: GSI2
/// `VHELD#<token-accessor>` / `<lease-id>`.
pub fn lease_held(accessor: &str, lease_id: &str) -> (Index, String, String) {
    (Index::Gsi2, format!("VHELD#{accessor}"), lease_id.to_owned())
}

/// The leases a broker service token holds (what revoking it revokes).
pub fn leases_held(accessor: &str) -> Query {
    Query::index(Index::Gsi2, format!("VHELD#{accessor}"), "")
}

/// The schedule partition (GSI1) of broker service tokens being revoked, ordered by when their
/// revocation began: what a revoke call left to the scheduled job.
pub const TOKEN_REVOCATION_SCHEDULE: &str = "BREVOKE";

/// The organization's own token (HCP Terraform's organization token), at most one.
pub fn organization_token(org_id: &str) -> Key {
    Key::new(format!("ORG#{org_id}"), "ORGTOKEN")
}

/// A piece of VCS work waiting for the scheduled job: a repository's tags to read, or a
/// version's archive to fetch.
pub fn vcs_work(id: &str) -> Key {
    Key::new(format!("VCSWORK#{id}"), "WORK")
}

/// The schedule partition (GSI1) where new repository syncs land, in the order they were
/// recorded, until the job moves each to its organization's queue.
pub const VCS_WORK_INBOX: &str = "VCSWORK";

/// The schedule partition (GSI1) of one organization's VCS work, ordered by when each is due.
pub fn vcs_work_queue(org_id: &str) -> String {
    format!("VCSQUEUE#{org_id}")
}

/// An organization's turn in the VCS job's round, present while it has VCS work.
pub fn vcs_work_turn(org_id: &str) -> Key {
    Key::new(format!("VCSTURN#{org_id}"), "VCSTURN")
}

/// The schedule partition (GSI1) of the organizations' turns, ordered by when each has work due.
pub const VCS_WORK_TURNS: &str = "VCSTURNS";

/// The claim one upload takes on a local upload link, so that racing uploads have one winner.
pub fn upload_claim(object_id: &str) -> Key {
    Key::new(format!("UPLOADCLAIM#{object_id}"), "UPLOADCLAIM")
}
