//! The provider registry's management routes: GPG keys under `/api/registry/private/v2`, and
//! providers, versions and platforms under `/api/v2/organizations/:org/registry-providers`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::provider_render as render;
use super::providers::{self, NewPlatform, NewProvider, NewVersion, ProviderAddress, ProviderFilter};
use crate::api::{ApiError, Document, JsonApiBody, Listing, QueryParams};
use crate::auth::Principal;
use crate::state::AppState;

type Result<T> = std::result::Result<T, ApiError>;

const KEYS: &str = "/api/registry/private/v2/gpg-keys";
const ORG: &str = "/api/v2/organizations/{org}/registry-providers";
const PROVIDER: &str = "/api/v2/organizations/{org}/registry-providers/{registry}/{namespace}/{name}";

pub fn router() -> Router<AppState> {
    Router::new()
        .route(KEYS, get(list_keys).post(create_key))
        .route(&format!("{KEYS}/{{namespace}}/{{key_id}}"), get(show_key).patch(update_key).delete(delete_key))
        .route(ORG, get(list_providers).post(create_provider))
        .route(PROVIDER, get(show_provider).delete(delete_provider))
        .route(&format!("{PROVIDER}/versions"), get(list_versions).post(create_version))
        .route(&format!("{PROVIDER}/versions/{{version}}"), get(show_version).delete(delete_version))
        .route(&format!("{PROVIDER}/versions/{{version}}/platforms"), get(list_platforms).post(create_platform))
        .route(
            &format!("{PROVIDER}/versions/{{version}}/platforms/{{os}}/{{arch}}"),
            get(show_platform).delete(delete_platform),
        )
}

#[derive(Deserialize)]
struct KeyPath {
    namespace: String,
    key_id: String,
}

#[derive(Deserialize)]
struct ProviderPath {
    org: String,
    registry: String,
    namespace: String,
    name: String,
}

impl ProviderPath {
    fn address(&self) -> ProviderAddress {
        ProviderAddress { registry: self.registry.clone(), namespace: self.namespace.clone(), name: self.name.clone() }
    }

    fn path(&self) -> String {
        format!(
            "/api/v2/organizations/{}/registry-providers/{}/{}/{}",
            self.org, self.registry, self.namespace, self.name
        )
    }
}

#[derive(Deserialize)]
struct VersionPath {
    #[serde(flatten)]
    provider: ProviderPath,
    version: String,
}

#[derive(Deserialize)]
struct PlatformPath {
    #[serde(flatten)]
    version: VersionPath,
    os: String,
    arch: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct KeyAttrs {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    ascii_armor: String,
}

async fn create_key(State(state): State<AppState>, principal: Principal, body: JsonApiBody) -> Result<Document> {
    let attrs = body.resource::<KeyAttrs>(&["gpg-keys"])?.attributes;
    let (key, org) =
        providers::keys::create(state.store.as_ref(), &principal, &attrs.namespace, &attrs.ascii_armor).await?;
    Ok(Document::one(render::gpg_key(&key, &org)).created())
}

async fn list_keys(State(state): State<AppState>, principal: Principal, listing: Listing) -> Result<Document> {
    let raw = listing.params.non_empty("filter[namespace]").ok_or_else(|| {
        ApiError::invalid_parameter(
            "filter[namespace]",
            "filter[namespace] is required: the namespaces to list keys of",
        )
    })?;
    let namespaces: Vec<&str> = raw.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    let (keys, total) = providers::keys::list(state.store.as_ref(), &principal, &namespaces, &listing.page).await?;
    let resources = keys.iter().map(|(key, org)| render::gpg_key(key, org)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_key(State(state): State<AppState>, principal: Principal, Path(path): Path<KeyPath>) -> Result<Document> {
    let (key, org) = providers::keys::get(state.store.as_ref(), &principal, &path.namespace, &path.key_id).await?;
    Ok(Document::one(render::gpg_key(&key, &org)))
}

async fn update_key(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<KeyPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<KeyAttrs>(&["gpg-keys"])?.attributes;
    let store = state.store.as_ref();
    let (key, org) =
        providers::keys::update(store, &principal, &path.namespace, &path.key_id, &attrs.namespace).await?;
    Ok(Document::one(render::gpg_key(&key, &org)))
}

async fn delete_key(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<KeyPath>,
) -> Result<StatusCode> {
    providers::keys::delete(state.store.as_ref(), &principal, &path.namespace, &path.key_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ProviderAttrs {
    #[serde(default)]
    name: String,
    namespace: Option<String>,
    #[serde(alias = "registry_name")]
    registry_name: Option<String>,
}

async fn create_provider(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<ProviderAttrs>(&["registry-providers"])?.attributes;
    let new = NewProvider { name: attrs.name, namespace: attrs.namespace, registry: attrs.registry_name };
    let (provider, org) = providers::create(&state, &principal, &org, new).await?;
    Ok(Document::one(render::provider(&provider, &org, &principal, &[])).created())
}

async fn list_providers(
    State(state): State<AppState>,
    principal: Principal,
    Path(org): Path<String>,
    listing: Listing,
) -> Result<Document> {
    let registry = super::routes::registry_filter(&listing.params)?;
    let filter = ProviderFilter { registry, q: listing.params.non_empty("q").map(str::to_owned) };
    let (list, total, org) = providers::list(state.store.as_ref(), &principal, &org, &filter, &listing.page).await?;
    let resources = list.iter().map(|provider| render::provider(provider, &org, &principal, &[])).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_provider(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    params: QueryParams,
) -> Result<Document> {
    let with_versions = params.includes("registry-provider-versions")?;
    let (provider, org, versions) =
        providers::show_provider(&state, &principal, &path.org, &path.address(), with_versions).await?;
    let ids: Vec<&str> = versions.iter().map(|shown| shown.version.id.as_str()).collect();
    let document = Document::one(render::provider(&provider, &org, &principal, &ids));
    if !with_versions {
        return Ok(document);
    }
    let path = path.path();
    let included = versions.iter().map(|shown| render::version(&shown.version, &shown.links, &path, &principal));
    Ok(document.included(included.collect()))
}

async fn delete_provider(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
) -> Result<StatusCode> {
    providers::delete_provider(&state, &principal, &path.org, &path.address()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct VersionAttrs {
    #[serde(default)]
    version: String,
    #[serde(default, alias = "key_id")]
    key_id: String,
    /// go-tfe sends `null` when none are given.
    #[serde(default)]
    protocols: Option<Vec<String>>,
}

/// go-tfe sends versions and platforms with an empty `type`; HCP's documents name two
/// platform types. All are taken.
const VERSION_TYPES: &[&str] = &["registry-provider-versions", ""];
const PLATFORM_TYPES: &[&str] = &["registry-provider-platforms", "registry-provider-version-platforms", ""];

async fn create_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<VersionAttrs>(VERSION_TYPES)?.attributes;
    let new =
        NewVersion { version: attrs.version, key_id: attrs.key_id, protocols: attrs.protocols.unwrap_or_default() };
    let shown = providers::create_version(&state, &principal, &path.org, &path.address(), new).await?;
    Ok(Document::one(render::version(&shown.version, &shown.links, &path.path(), &principal)).created())
}

async fn list_versions(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<ProviderPath>,
    listing: Listing,
) -> Result<Document> {
    let (versions, total) =
        providers::list_versions(&state, &principal, &path.org, &path.address(), &listing.page).await?;
    let provider_path = path.path();
    let resources = versions
        .iter()
        .map(|shown| render::version(&shown.version, &shown.links, &provider_path, &principal))
        .collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
) -> Result<Document> {
    let provider = &path.provider;
    let shown = providers::get_version(&state, &principal, &provider.org, &provider.address(), &path.version).await?;
    Ok(Document::one(render::version(&shown.version, &shown.links, &provider.path(), &principal)))
}

async fn delete_version(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
) -> Result<StatusCode> {
    let provider = &path.provider;
    providers::delete_version(&state, &principal, &provider.org, &provider.address(), &path.version).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct PlatformAttrs {
    #[serde(default)]
    os: String,
    #[serde(default)]
    arch: String,
    #[serde(default)]
    shasum: String,
    #[serde(default)]
    filename: String,
}

async fn create_platform(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
    body: JsonApiBody,
) -> Result<Document> {
    let attrs = body.resource::<PlatformAttrs>(PLATFORM_TYPES)?.attributes;
    let new = NewPlatform { os: attrs.os, arch: attrs.arch, shasum: attrs.shasum, filename: attrs.filename };
    let provider = &path.provider;
    let at = (&provider.address(), path.version.as_str());
    let (platform, version, links) = providers::create_platform(&state, &principal, &provider.org, at, new).await?;
    Ok(Document::one(render::platform(&platform, &version, &links, &principal)).created())
}

async fn list_platforms(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<VersionPath>,
    listing: Listing,
) -> Result<Document> {
    let provider = &path.provider;
    let at = (&provider.address(), path.version.as_str());
    let (platforms, total, shown) =
        providers::list_platforms(&state, &principal, &provider.org, at, &listing.page).await?;
    let resources = platforms.iter().map(|p| render::platform(p, &shown.version, &shown.links, &principal)).collect();
    Ok(Document::page(resources, &listing.envelope(total)))
}

async fn show_platform(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<PlatformPath>,
) -> Result<Document> {
    let provider = &path.version.provider;
    let at = (&provider.address(), path.version.version.as_str());
    let (platform, shown) =
        providers::get_platform(&state, &principal, &provider.org, at, (&path.os, &path.arch)).await?;
    Ok(Document::one(render::platform(&platform, &shown.version, &shown.links, &principal)))
}

async fn delete_platform(
    State(state): State<AppState>,
    principal: Principal,
    Path(path): Path<PlatformPath>,
) -> Result<StatusCode> {
    let provider = &path.version.provider;
    let at = (&provider.address(), path.version.version.as_str());
    providers::delete_platform(&state, &principal, &provider.org, at, (&path.os, &path.arch)).await?;
    Ok(StatusCode::NO_CONTENT)
}
