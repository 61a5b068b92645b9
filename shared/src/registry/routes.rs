//! The registry management routes, deprecated forms included (go-tfe's `CreateVersion` and
//! `Delete` still use them): each maps to the same domain call as its replacement.

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{delete, get, post, MethodRouter};
use axum::{Extension, Router};
use serde::Deserialize;

use super::lifecycle::{self, DeprecationRequest, LifecycleChange, RevocationRequest};
use super::modules::{self, Address, ModuleChange, ModuleChanges, ModuleFilter, NewModule, Shown};
use super::names::RegistryName;
use super::publishing::{self, PublishRequest};
use super::render;
use super::versions::{self, NewVersion};
use crate::api::{ApiError, BaseUrl, Document, Field, JsonApiBody, Listing, QueryParams};
use crate::auth::{Principal, Scoped};
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

const ORG: &str = "/api/v2/organizations/{org}/registry-modules";
const MODULE: &str = "/api/v2/organizations/{org}/registry-modules/{registry}/{namespace}/{name}";
const PROVIDER: &str = "/api/v2/organizations/{org}/registry-modules/{registry}/{namespace}/{name}/{provider}";

pub fn router() -> Router<AppState> {
    Router::new()
        .merge(super::provider_routes::router())
        .route(ORG, get(list_modules).post(create_module))
        .route(&format!("{ORG}/vcs"), post(publish_module))
        .route("/api/v2/registry-modules", post(deprecated_publish_module))
        .route("/webhooks/vcs/{uuid}", post(webhook).layer(DefaultBodyLimit::max(publishing::MAX_DELIVERY_BYTES)))
        .route(MODULE, unreadable(delete(delete_module), "DELETE"))
        .route(
            PROVIDER,
            get(show_module.layer(Extension(modules::PRIVATE_MODULE))).patch(update_module).delete(delete_provider),
        )
        .route(&format!("{PROVIDER}/versions"), get(list_versions).post(create_version))
        .route(&format!("{PROVIDER}/version"), get(show_version))
        .route(
            &format!("{PROVIDER}/{{version}}"),
            unreadable(delete(delete_version).patch(update_version), "DELETE, PATCH"),
        )
        .route(&format!("{PROVIDER}/actions/resync"), post(resync_module))
        .route(&format!("{PROVIDER}/{{version}}/actions/retry"), post(retry_version))
        .route("/api/v2/registry-modules/{id}", get(show_module_by_id))
        // Deprecated forms, for private modules (namespace = organization).
        .route("/api/v2/registry-modules/{org}/{name}/{provider}/versions", post(deprecated_create_version))
        .route(
            "/api/v2/registry-modules/show/{org}/{name}/{provider}",
            get(deprecated_show_module.layer(Extension(modules::PRIVATE_MODULE))),
        )
        .route("/api/v2/registry-modules/actions/delete/{org}/{name}", post(deprecated_delete_module))
        .route("/api/v2/registry-modules/actions/delete/{org}/{name}/{provider}", post(deprecated_delete_provider))
        .route(
            "/api/v2/registry-modules/actions/delete/{org}/{name}/{provider}/{version}",
            post(deprecated_delete_version),
        )
}

#[derive(Deserialize)]
struct ModulePath {
    org: String,
    registry: String,
    namespace: String,
    name: String,
}

#[derive(Deserialize)]
struct ProviderPath {
    org: String,
    registry: String,
    namespace: String,
    name: String,
    provider: String,
}

#[derive(Deserialize)]
struct VersionPath {
    org: String,
    registry: String,
    namespace: String,
    name: String,
    provider: String,
    version: String,
}

impl ProviderPath {
    fn address(&self) -> Result<Address> {
        Ok(Address::new(&self.registry, &self.namespace, &self.name)?)
    }

    /// A deprecated path's module: private, in its organization's namespace.
    fn private(org: String, name: String, provider: String) -> Self {
        ProviderPath { registry: "private".into(), namespace: org.clone(), org, name, provider }
    }
}

/// `filter[registry_name]`, of module and provider lists alike.
pub(super) fn registry_filter(params: &QueryParams) -> Result<Option<RegistryName>> {
    match params.non_empty("filter[registry_name]") {
        None => Ok(None),
        Some(raw) => Ok(Some(RegistryName::parse(Field::Document, raw).map_err(|_| {
            ApiError::invalid_parameter("filter[registry_name]", "filter[registry_name] must be `private` or `public`")
        })?)),
    }
}

fn filter(params: &QueryParams) -> Result<ModuleFilter> {
    let registry = registry_filter(params)?;
    Ok(ModuleFilter {
        q: params.non_empty("q").map(str::to_owned),
        registry,
        provider: params.non_empty("filter[provider]").map(str::to_owned),
        organization_name: params.non_empty("filter[organization_name]").map(str::to_owned),
    })
}

/// A path that cannot be read (it only deletes or changes). To a read it is as unknown as any
/// other path (404, as HCP Terraform answers); any other method gets the usual 405.
fn unreadable(methods: MethodRouter<AppState>, allow: &'static str) -> MethodRouter<AppState> {
    methods.fallback(move |method: Method| async move {
        if matches!(method, Method::GET | Method::HEAD) {
            return ApiError::not_found().into_response();
        }
        let mut refused = ApiError::method_not_allowed().into_response();
        refused.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        refused
    })
}

async fn list_modules(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let filter = filter(&listing.params)?;
    let (list, total, org) = modules::list(state.store.as_ref(), &principal, &org, &filter, &listing.page).await?;
    let resources = list.iter().map(|module| render::module(module, &org, &principal)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

// pytfe sends these attributes with underscores (`registry_name`, `no_code`, `commit_sha`,
// `vcs_repo`) where the API's own spelling has hyphens; both are accepted.

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ModuleAttrs {
    #[serde(default)]
    name: String,
    #[serde(default)]
    provider: String,
    namespace: Option<String>,
    #[serde(alias = "registry_name")]
    registry_name: Option<String>,
    #[serde(alias = "no_code")]
    no_code: Option<bool>,
}

async fn create_module(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<ModuleAttrs>(&["registry-modules"])?.attributes;
    let new = NewModule {
        name: attrs.name,
        provider: attrs.provider,
        namespace: attrs.namespace,
        registry: attrs.registry_name,
        no_code: attrs.no_code,
    };
    let (module, org) = modules::create(&state, &principal, &org, new).await?;
    Ok(Document::one(render::module(&Shown::new(module), &org, &principal)).created())
}

async fn show_module(
    State(state): State<AppState>,
    caller: Scoped,
    Path(path): Path<ProviderPath>,
) -> Result<Document> {
    let (module, org) = modules::get(&state, &caller, &path.org, &path.address()?, &path.provider).await?;
    Ok(Document::one(render::module(&module, &org, &caller.principal)))
}

async fn show_module_by_id(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> Result<Document> {
    let (module, org) = modules::get_by_id(state.store.as_ref(), &principal, &id).await?;
    Ok(Document::one(render::module(&module, &org, &principal)))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct UpdateAttrs {
    #[serde(default, alias = "vcs_repo")]
    vcs_repo: VcsRepoChanges,
    #[serde(default, alias = "test_config")]
    test_config: TestConfigChanges,
    #[serde(alias = "no_code")]
    no_code: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct VcsRepoChanges {
    branch: Option<String>,
    tags: Option<bool>,
    #[serde(alias = "source_directory")]
    source_directory: Option<String>,
    #[serde(alias = "tag_prefix")]
    tag_prefix: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct TestConfigChanges {
    #[serde(alias = "tests_enabled")]
    tests_enabled: Option<bool>,
}

async fn update_module(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<UpdateAttrs>(&["registry-modules"])?.attributes;
    let repo = attrs.vcs_repo;
    let update = publishing::repo_update(repo.branch, repo.tags, repo.source_directory, repo.tag_prefix)?;
    let changes = ModuleChanges {
        publishing: update.as_ref().map(|update| update as &dyn ModuleChange),
        tests_enabled: attrs.test_config.tests_enabled,
        no_code: attrs.no_code,
    };
    let (module, org) =
        modules::update(&state, &principal, &path.org, &path.address()?, &path.provider, changes).await?;
    Ok(Document::one(render::module(&module, &org, &principal)))
}

/// Reads a VCS module's tags (or branch) again now, through the job.
async fn resync_module(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
) -> Result<Document> {
    let (module, org) = publishing::resync(&state, &principal, &path.org, &path.address()?, &path.provider).await?;
    Ok(Document::one(render::module(&module, &org, &principal)))
}

/// Puts a failed version back to `pending` with a new upload link (and a new fetch for a VCS
/// module's version).
async fn retry_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
) -> Result<Document> {
    let address = Address::new(&path.registry, &path.namespace, &path.name)?;
    let created = publishing::retry(&state, &principal, &path.org, &address, &path.provider, &path.version).await?;
    Ok(Document::one(render::version(&created.version, created.upload_url)))
}

async fn delete_module(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ModulePath>,
) -> Result<StatusCode> {
    let address = Address::new(&path.registry, &path.namespace, &path.name)?;
    versions::delete_module(&state, &principal, &path.org, &address).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_provider(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
) -> Result<StatusCode> {
    versions::delete_provider(&state, &principal, &path.org, &path.address()?, &path.provider).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct VersionAttrs {
    #[serde(default)]
    version: String,
    #[serde(alias = "commit_sha")]
    commit_sha: Option<String>,
}

async fn create_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<VersionAttrs>(&["registry-module-versions"])?.attributes;
    let new = NewVersion { version: attrs.version, commit_sha: attrs.commit_sha };
    let accepted = versions::accept(&state, &principal, &path.org, &path.address()?, &path.provider, new).await?;
    // A branch-based module's version is the archive at a commit, which publishing fetches.
    let created = if accepted.module.publishes_from_branch() {
        publishing::create_branch_version(&state, accepted).await?
    } else {
        versions::create(&state, accepted).await?
    };
    Ok(Document::one(render::version(&created.version, created.upload_url)).created())
}

async fn show_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    params: QueryParams,
) -> Result<Document> {
    let wanted = params
        .non_empty("module_version")
        .ok_or_else(|| ApiError::invalid_parameter("module_version", "module_version is required"))?;
    let (version, metadata, _) =
        versions::read(&state, &principal, &path.org, &path.address()?, &path.provider, wanted).await?;
    let upload = versions::upload_url_for(state.blobs.as_ref(), &principal, &version).await?;
    Ok(render::with_deprecation(render::version_with_metadata(&version, upload, metadata.as_ref()), &version))
}

async fn list_versions(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    listing: Listing,
) -> Result<Document> {
    let address = path.address()?;
    let (page, total) = versions::list(&state, &principal, &path.org, &address, &path.provider, &listing.page).await?;
    let resources = page.iter().map(|version| render::version(version, None)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn delete_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
) -> Result<StatusCode> {
    let address = Address::new(&path.registry, &path.namespace, &path.name)?;
    versions::delete(&state, &principal, &path.org, &address, &path.provider, &path.version).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `deprecation` of a version's PATCH, as HCP Terraform's "Manage module versions" sends it.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct DeprecationAttrs {
    #[serde(alias = "deprecated_status")]
    deprecated_status: Option<String>,
    reason: Option<String>,
    link: Option<String>,
}

#[derive(Deserialize)]
struct RevocationAttrs {
    status: Option<String>,
    message: Option<String>,
    link: Option<String>,
}

#[derive(Deserialize)]
struct LifecycleAttrs {
    deprecation: Option<DeprecationAttrs>,
    revocation: Option<RevocationAttrs>,
}

/// Deprecates, revokes or reverts a version. HCP Terraform documents `module-versions` as the
/// request's type; the version's own type is accepted too.
async fn update_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<LifecycleAttrs>(&["module-versions", "registry-module-versions"])?.attributes;
    let change = LifecycleChange {
        deprecation: attrs.deprecation.map(|d| DeprecationRequest {
            status: d.deprecated_status,
            reason: d.reason,
            link: d.link,
        }),
        revocation: attrs.revocation.map(|r| RevocationRequest { status: r.status, message: r.message, link: r.link }),
    };
    let address = Address::new(&path.registry, &path.namespace, &path.name)?;
    let version =
        lifecycle::change(&state, &principal, &path.org, &address, (&path.provider, &path.version), change).await?;
    Ok(render::with_deprecation(render::version(&version, None), &version))
}

async fn deprecated_create_version(
    state: State<AppState>,
    principal: Principal,
    Path((org, name, provider)): Path<(String, String, String)>,
    body: JsonApiBody,
) -> Result<Document> {
    create_version(state, principal, Path(ProviderPath::private(org, name, provider)), body).await
}

async fn deprecated_show_module(
    state: State<AppState>,
    caller: Scoped,
    Path((org, name, provider)): Path<(String, String, String)>,
) -> Result<Document> {
    show_module(state, caller, Path(ProviderPath::private(org, name, provider))).await
}

async fn deprecated_delete_module(
    state: State<AppState>,
    principal: Principal,
    Path((org, name)): Path<(String, String)>,
) -> Result<StatusCode> {
    let path = ModulePath { registry: "private".into(), namespace: org.clone(), org, name };
    delete_module(state, principal, Path(path)).await
}

async fn deprecated_delete_provider(
    state: State<AppState>,
    principal: Principal,
    Path((org, name, provider)): Path<(String, String, String)>,
) -> Result<StatusCode> {
    delete_provider(state, principal, Path(ProviderPath::private(org, name, provider))).await
}

async fn deprecated_delete_version(
    state: State<AppState>,
    principal: Principal,
    Path((org, name, provider, version)): Path<(String, String, String, String)>,
) -> Result<StatusCode> {
    let path = VersionPath { registry: "private".into(), namespace: org.clone(), org, name, provider, version };
    delete_version(state, principal, Path(path)).await
}

#[derive(Deserialize, Default)]
struct PublishAttrs {
    /// A monorepo module's name and provider (its repository's name gives them otherwise).
    name: Option<String>,
    provider: Option<String>,
    #[serde(default, rename = "vcs-repo", alias = "vcs_repo")]
    vcs_repo: VcsRepoAttrs,
    #[serde(default, rename = "no-code", alias = "no_code")]
    no_code: Option<bool>,
}

/// `vcs-repo` of a publish request. `display_identifier` is written with an underscore in
/// requests (the spec's table); the hyphenated form is accepted too.
#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct VcsRepoAttrs {
    identifier: Option<String>,
    #[serde(alias = "oauth_token_id")]
    oauth_token_id: Option<String>,
    #[serde(alias = "github_app_installation_id")]
    github_app_installation_id: Option<String>,
    #[serde(rename = "display_identifier", alias = "display-identifier")]
    display_identifier: Option<String>,
    branch: Option<String>,
    #[serde(alias = "ingress_submodules")]
    ingress_submodules: Option<bool>,
    #[serde(alias = "source_directory")]
    source_directory: Option<String>,
    #[serde(alias = "tag_prefix")]
    tag_prefix: Option<String>,
}

fn publish_request(body: &JsonApiBody) -> Result<PublishRequest> {
    let attrs = body.resource::<PublishAttrs>(&["registry-modules"])?.attributes;
    let repo = attrs.vcs_repo;
    Ok(PublishRequest {
        name: attrs.name,
        provider: attrs.provider,
        identifier: repo.identifier,
        display_identifier: repo.display_identifier,
        oauth_token_id: repo.oauth_token_id,
        github_app_installation_id: repo.github_app_installation_id,
        branch: repo.branch,
        ingress_submodules: repo.ingress_submodules,
        no_code: attrs.no_code,
        source_directory: repo.source_directory,
        tag_prefix: repo.tag_prefix,
    })
}

async fn publish_module(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    BaseUrl(base): BaseUrl,
    body: JsonApiBody,
) -> Result<Document> {
    let request = publish_request(&body)?;
    let (module, org) = publishing::publish(&state, &principal, &org, &base, request).await?;
    Ok(Document::one(render::module(&Shown::new(module), &org, &principal)).created())
}

/// The deprecated form: the organization is the OAuth token's.
async fn deprecated_publish_module(
    State(state): State<AppState>,
    principal: Principal,
    BaseUrl(base): BaseUrl,
    body: JsonApiBody,
) -> Result<Document> {
    let request = publish_request(&body)?;
    let org = publishing::organization_of_token(state.store.as_ref(), request.oauth_token_id.as_deref()).await?;
    let (module, org) = publishing::publish(&state, &principal, &org, &base, request).await?;
    Ok(Document::one(render::module(&Shown::new(module), &org, &principal)).created())
}

/// A VCS provider's delivery: answered at once, the work it records runs off the request path.
async fn webhook(
    State(state): State<AppState>,
    Path(uuid): Path<String>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<StatusCode> {
    let added = publishing::delivery(&state, &uuid, &headers, &body).await?;
    Ok(if added { StatusCode::ACCEPTED } else { StatusCode::OK })
}
