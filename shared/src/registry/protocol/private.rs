//! `/api/registry/v1/modules`: the organization's private modules as the public registry
//! shows modules (namespace = organization name), with only offered versions (`ok`, not
//! revoked), in semantic-version order, each with its `deprecation` as HCP Terraform serves it.
//! Downloads answer with a pre-signed link to the stored archive in `X-Terraform-Get`; a revoked
//! version's download is refused.

use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::handler::Handler;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::{json, Value};

use super::error::{ProtocolError, Result};
use crate::accounts::access::{self, Organization};
use crate::api::{whole_number, ApiError, QueryParams};
use crate::archive::ModuleMetadata;
use crate::auth::{Permission, Principal, Scoped};
use crate::blobs::ObjectId;
use crate::registry::metadata;
use crate::registry::modules::{
    self, offered_versions, parse_modules, statuses, Module, Read, VersionStatus, Wanted, DOWNLOADS,
};
use crate::registry::status::{Deprecation, OK};
use crate::registry::versions::ModuleVersion;
use crate::state::AppState;
use crate::store::{keys, query_all, Condition, Item, ItemStore, Key, UpdateOp, Write};

const PREFIX: &str = "/api/registry/v1/modules";
/// How long a download link stays valid: long enough for a slow `terraform init` to fetch it.
const DOWNLOAD_LINK_VALIDITY: Duration = Duration::from_secs(600);
const DEFAULT_LIMIT: usize = 15;
const MAX_LIMIT: usize = 100;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(list_all))
        .route(&format!("{PREFIX}/search"), get(search))
        .route(&format!("{PREFIX}/{{namespace}}"), get(list_namespace))
        .route(&format!("{PREFIX}/{{namespace}}/{{name}}"), get(latest_for_each_provider))
        .route(
            &format!("{PREFIX}/{{namespace}}/{{name}}/{{provider}}"),
            get(latest_for_provider.layer(Extension(modules::PRIVATE_MODULE))),
        )
        .route(
            &format!("{PREFIX}/{{namespace}}/{{name}}/{{provider}}/versions"),
            get(list_versions.layer(Extension(modules::PRIVATE_MODULE))),
        )
        .route(&format!("{PREFIX}/{{namespace}}/{{name}}/{{provider}}/download"), get(download_latest))
        .route(
            &format!("{PREFIX}/{{namespace}}/{{name}}/{{provider}}/{{version}}"),
            get(show_version.layer(Extension(modules::PRIVATE_MODULE))),
        )
        .route(&format!("{PREFIX}/{{namespace}}/{{name}}/{{provider}}/{{version}}/download"), get(download))
}

type Caller = std::result::Result<Principal, ApiError>;
/// A caller of a path under one namespace: its token and the organization's name marker are read
/// in one BatchGetItem (see [`Scoped`]).
type ScopedCaller = std::result::Result<Scoped, ApiError>;

/// The organization behind a namespace, if the caller may read it.
async fn namespace(store: &dyn ItemStore, caller: Caller, namespace: &str) -> Result<(Principal, Organization)> {
    let principal = caller?;
    let org = access::authorized(store, &principal, namespace, Permission::ReadRegistry).await?;
    Ok((principal, org))
}

/// The organizations whose modules the caller sees when it names no namespace.
async fn visible_organizations(store: &dyn ItemStore, principal: &Principal) -> Result<Vec<Organization>> {
    match principal.org_id() {
        Some(org_id) => Ok(vec![access::get_by_id(store, org_id).await?]),
        None => {
            let (index, partition, _) = keys::organizations_by_name();
            let items = query_all(store, crate::store::Query::index(index, partition, "")).await?;
            let orgs = items.iter().filter_map(|item| item.parse::<Organization>().ok());
            Ok(orgs.collect())
        }
    }
}

async fn private_modules(store: &dyn ItemStore, org: &Organization) -> Result<Vec<Module>> {
    Ok(parse_modules(store, &query_all(store, keys::modules(&org.id, Some("private"))).await?).await?)
}

/// The download counts of `modules`, in their order, read together.
async fn downloads(store: &dyn ItemStore, modules: &[&Module]) -> Result<Vec<u64>> {
    let keys: Vec<_> = modules.iter().map(|module| module.downloads_key()).collect();
    let counts = store.get_many(&keys).await?;
    let count =
        |item: Option<Item>| Ok(item.map(|item| item.attr::<u64>(DOWNLOADS)).transpose()?.flatten().unwrap_or(0));
    counts.into_iter().map(count).collect()
}

/// A module as the public registry lists it, at one version.
fn summary(org: &Organization, module: &Module, version: &VersionStatus, downloads: u64) -> Value {
    json!({
        "id": format!("{}/{}/{}/{}", org.name, module.name, module.provider, version.version),
        "owner": "",
        "namespace": org.name,
        "name": module.name,
        "version": version.version,
        "provider": module.provider,
        "description": module.description.as_deref().unwrap_or(""),
        "source": "",
        "published_at": version.published_at,
        "downloads": downloads,
        "verified": false,
    })
}

/// One version in full: the summary plus the module's root, its providers and every `ok`
/// version.
struct Detail<'a> {
    org: &'a Organization,
    module: &'a Module,
    version: &'a VersionStatus,
    stored: &'a ModuleVersion,
    metadata: Option<&'a ModuleMetadata>,
    statuses: &'a [VersionStatus],
    downloads: u64,
}

fn detail(shown: Detail<'_>) -> Value {
    let Detail { org, module, version, stored, metadata, statuses, downloads } = shown;
    let mut detail = summary(org, module, version, downloads);
    // The version shown, not whichever version was uploaded last, describes itself.
    detail["description"] = json!(stored.description().unwrap_or_default());
    let readme = stored.readme.as_deref().unwrap_or("");
    let members = super::detail::members(module.name.as_str(), readme, stored.root_module_files.is_empty(), metadata);
    if let (Some(detail), Value::Object(members)) = (detail.as_object_mut(), members) {
        detail.extend(members);
    }
    detail["providers"] = json!(super::detail::providers(metadata, module.provider.as_str()));
    detail["versions"] = offered_versions(statuses).map(|v| v.version.clone()).collect();
    detail["deprecation"] = deprecation(stored.deprecation.as_ref());
    detail
}

/// A version's deprecation as HCP Terraform serves it in the protocol (and as Terraform's
/// registry client once read it to warn): `{"reason", "link"}`, `null` when not deprecated.
fn deprecation(deprecation: Option<&Deprecation>) -> Value {
    deprecation.map_or(Value::Null, |d| json!({ "reason": d.reason, "link": d.link.as_deref().unwrap_or("") }))
}

/// Refuses a revoked version, saying why.
fn refuse_revoked(org: &str, stored: &ModuleVersion) -> Result<()> {
    let Some(revocation) = &stored.revocation else { return Ok(()) };
    let mut why = format!("version {} of {org}/{}/{} is revoked", stored.version, stored.name, stored.provider);
    if !revocation.message.is_empty() {
        why = format!("{why}: {}", revocation.message);
    }
    if let Some(link) = &revocation.link {
        why = format!("{why} ({link})");
    }
    Err(ProtocolError::Revoked(why))
}

/// `offset` / `limit` paging with the public registry's `meta`.
struct Paging {
    offset: usize,
    limit: usize,
    params: QueryParams,
}

impl Paging {
    fn parse(raw: Option<String>) -> Result<Self> {
        let params =
            QueryParams::parse(raw.as_deref().unwrap_or("")).map_err(|e| ProtocolError::BadRequest(e.detail))?;
        let number = |name: &str, default: usize| -> Result<usize> {
            match params.non_empty(name) {
                None => Ok(default),
                Some(raw) => {
                    whole_number(raw).ok_or_else(|| ProtocolError::BadRequest(format!("{name} must be a whole number")))
                }
            }
        };
        let offset = number("offset", 0)?;
        let limit = number("limit", DEFAULT_LIMIT)?.clamp(1, MAX_LIMIT);
        Ok(Self { offset, limit, params })
    }

    fn respond(&self, path: &str, modules: Vec<Value>) -> Json<Value> {
        let total = modules.len();
        let page: Vec<Value> = modules.into_iter().skip(self.offset).take(self.limit).collect();
        let next = self.offset.checked_add(self.limit).filter(|next| *next < total);
        let mut meta = json!({ "limit": self.limit, "current_offset": self.offset });
        if self.offset > 0 {
            meta["prev_offset"] = json!(self.offset.saturating_sub(self.limit));
        }
        if let Some(next) = next {
            let mut query = vec![("limit".to_owned(), self.limit.to_string()), ("offset".to_owned(), next.to_string())];
            query.extend(self.params.without(&["limit", "offset"]));
            let query = serde_urlencoded::to_string(&query).expect("pairs of strings encode");
            meta["next_offset"] = json!(next);
            meta["next_url"] = json!(format!("{path}?{query}"));
        }
        Json(json!({ "meta": meta, "modules": page }))
    }
}

/// The latest `ok` version of each module, optionally of one provider and matching a search.
async fn latest_of(
    store: &dyn ItemStore,
    orgs: &[Organization],
    provider: Option<&str>,
    q: Option<&str>,
) -> Result<Vec<Value>> {
    let q = q.map(str::to_lowercase);
    let mut out = Vec::new();
    for org in orgs {
        let modules = private_modules(store, org).await?;
        let shown: Vec<(&Module, &VersionStatus)> = modules
            .iter()
            .filter(|module| provider.is_none_or(|p| p == module.provider.as_str()))
            .filter(|module| {
                let searched = [
                    module.name.as_str(),
                    org.name.as_str(),
                    module.provider.as_str(),
                    module.description.as_deref().unwrap_or(""),
                ];
                q.as_ref().is_none_or(|q| searched.iter().any(|field| field.to_lowercase().contains(q)))
            })
            .filter_map(|module| Some((module, module.latest.as_ref()?)))
            .collect();
        let counts = downloads(store, &shown.iter().map(|(module, _)| *module).collect::<Vec<_>>()).await?;
        out.extend(shown.iter().zip(counts).map(|((module, latest), count)| summary(org, module, latest, count)));
    }
    Ok(out)
}

async fn list_all(State(state): State<AppState>, caller: Caller, RawQuery(raw): RawQuery) -> Result<Json<Value>> {
    let principal = caller?;
    let paging = Paging::parse(raw)?;
    let orgs = visible_organizations(state.store.as_ref(), &principal).await?;
    let modules = latest_of(state.store.as_ref(), &orgs, paging.params.non_empty("provider"), None).await?;
    Ok(paging.respond(PREFIX, modules))
}

async fn list_namespace(
    State(state): State<AppState>,
    caller: Caller,
    Path(ns): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    let (_, org) = namespace(state.store.as_ref(), caller, &ns).await?;
    let paging = Paging::parse(raw)?;
    let modules = latest_of(state.store.as_ref(), &[org], paging.params.non_empty("provider"), None).await?;
    Ok(paging.respond(&format!("{PREFIX}/{ns}"), modules))
}

async fn search(State(state): State<AppState>, caller: Caller, RawQuery(raw): RawQuery) -> Result<Json<Value>> {
    let principal = caller?;
    let paging = Paging::parse(raw)?;
    let q = paging.params.non_empty("q").ok_or_else(|| ProtocolError::BadRequest("q is required".into()))?.to_owned();
    let orgs = visible_organizations(state.store.as_ref(), &principal).await?;
    let modules = latest_of(state.store.as_ref(), &orgs, paging.params.non_empty("provider"), Some(&q)).await?;
    Ok(paging.respond(&format!("{PREFIX}/search"), modules))
}

async fn latest_for_each_provider(
    State(state): State<AppState>,
    caller: Caller,
    Path((ns, name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>> {
    let (_, org) = namespace(state.store.as_ref(), caller, &ns).await?;
    let paging = Paging::parse(raw)?;
    let store = state.store.as_ref();
    let modules = parse_modules(store, &query_all(store, keys::module_providers(&org.id, None, &name)).await?).await?;
    let shown: Vec<&Module> = modules.iter().filter(|module| module.latest.is_some()).collect();
    let counts = downloads(store, &shown).await?;
    let latest: Vec<Value> = shown
        .iter()
        .zip(counts)
        .filter_map(|(module, count)| Some(summary(&org, module, module.latest.as_ref()?, count)))
        .collect();
    if latest.is_empty() {
        return Err(ProtocolError::NotFound);
    }
    Ok(paging.respond(&format!("{PREFIX}/{ns}/{name}"), latest))
}

/// The module (one provider) behind a protocol path, if the caller may read it: read with the
/// organization in one batch, and its versions' statuses when asked (see [`modules::read`]).
async fn module(
    state: &AppState,
    caller: ScopedCaller,
    (ns, name, provider): (&str, &str, &str),
    statuses: bool,
) -> Result<Read> {
    let wanted = Wanted { org_name: ns, namespace: None, name, provider, statuses };
    Ok(modules::read_scoped(state, &caller?, wanted).await?)
}

async fn list_versions(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((ns, name, provider)): Path<(String, String, String)>,
) -> Result<Json<Value>> {
    let Read { org, module, statuses, .. } = module(&state, caller, (&ns, &name, &provider), true).await?;
    let versions: Vec<Value> = offered_versions(&statuses)
        .map(|v| json!({ "version": v.version, "deprecation": deprecation(v.deprecation.as_ref()) }))
        .collect();
    if versions.is_empty() {
        return Err(ProtocolError::NotFound);
    }
    let source = format!("{}/{}/{}", org.name, module.name, module.provider);
    Ok(Json(json!({ "modules": [{ "source": source, "versions": versions }] })))
}

async fn latest_for_provider(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((ns, name, provider)): Path<(String, String, String)>,
) -> Result<Json<Value>> {
    let Read { org, module, .. } = module(&state, caller, (&ns, &name, &provider), false).await?;
    let latest = module.latest.clone().ok_or(ProtocolError::NotFound)?;
    shown_version(state.store.as_ref(), &org, &module, &latest.version).await
}

/// The detail of one `ok` version.
async fn shown_version(
    store: &dyn ItemStore,
    org: &Organization,
    module: &Module,
    version: &str,
) -> Result<Json<Value>> {
    let (name, provider) = (module.name.as_str(), module.provider.as_str());
    let found = metadata::with_version(store, &org.id, name, provider, version).await?;
    let (stored, metadata) = found.filter(|(stored, _)| stored.status == OK).ok_or(ProtocolError::NotFound)?;
    refuse_revoked(&org.name, &stored)?;
    let statuses = statuses(store, module).await?;
    let status = offered_versions(&statuses).find(|v| v.version == version).ok_or(ProtocolError::NotFound)?;
    let downloads = downloads(store, &[module]).await?.pop().unwrap_or_default();
    let metadata = metadata.as_ref();
    Ok(Json(detail(Detail { org, module, version: status, stored: &stored, metadata, statuses: &statuses, downloads })))
}

async fn show_version(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((ns, name, provider, version)): Path<(String, String, String, String)>,
) -> Result<Json<Value>> {
    let Read { org, module, .. } = module(&state, caller, (&ns, &name, &provider), false).await?;
    shown_version(state.store.as_ref(), &org, &module, &version).await
}

async fn download(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((ns, name, provider, version)): Path<(String, String, String, String)>,
) -> Result<Response> {
    let Scoped { principal, name: name_read, .. } = caller?;
    let store = state.store.as_ref();
    let located = access::locate(store, &principal, &ns, name_read.as_ref()).await?;
    let org_id = located.org_id();
    let version_key = keys::module_version(org_id, &name, &provider, &version);
    let wanted = Wanted { org_name: &ns, namespace: None, name: &name, provider: &provider, statuses: false };
    // The count is written beside the reads (joined with them), not after them nor after the
    // response: on Lambda a task spawned to outlive the response may be frozen with the
    // environment before it runs, and the count lost. Its transaction holds only where the reads
    // would succeed (the version is `ok`, the module and the organization are there), so a
    // refused download counts nothing, and it costs no sequential round trip. The price is write
    // capacity: a transaction of 3 items (2 checks) bills twice each, 6 units where a bare update
    // billed 1.
    let reads = modules::read(store, &principal, &located, wanted, std::slice::from_ref(&version_key));
    let count = count_download(store, &principal, (&ns, &located), (&name, &provider), version_key.clone());
    let (read, ()) = futures::join!(reads, count);
    let Read { also, .. } = read?;
    let stored: ModuleVersion = also.into_iter().next().flatten().ok_or(ProtocolError::NotFound)?.parse()?;
    if stored.status != OK {
        return Err(ProtocolError::NotFound);
    }
    refuse_revoked(&ns, &stored)?;
    let archive = stored.archive.as_deref().and_then(ObjectId::parse).ok_or(ProtocolError::NotFound)?;
    let url = state.blobs.download_url(&archive, DOWNLOAD_LINK_VALIDITY).await?;
    // go-getter strips `archive` before fetching and unpacks what it fetched as tar.gz.
    let separator = if url.contains('?') { '&' } else { '?' };
    let get = format!("{url}{separator}archive=tar.gz");
    let value = HeaderValue::from_str(&get)?;
    let headers =
        [(HeaderName::from_static("x-terraform-get"), value), (header::CONTENT_LENGTH, HeaderValue::from_static("0"))];
    Ok((StatusCode::NO_CONTENT, headers).into_response())
}

/// Counts a download of a private module's version, in its own item (downloads never contend
/// with changes to the module), if the version is `ok` and not revoked and the caller may read
/// the organization.
/// A count that fails is logged, never the download's failure.
async fn count_download(
    store: &dyn ItemStore,
    principal: &Principal,
    (org_name, located): (&str, &access::Located),
    (name, provider): (&str, &str),
    version_key: Key,
) {
    let org_id = located.org_id();
    if !principal.can(org_id, Permission::ReadRegistry) {
        return;
    }
    let mut writes = vec![
        Write::Update {
            key: keys::module_downloads(org_id, None, name, provider),
            ops: vec![UpdateOp::Add(DOWNLOADS.into(), 1)],
            condition: Condition::Always,
        },
        Write::Check { key: version_key, condition: Condition::equals("status", OK).and(not_revoked()) },
    ];
    writes.extend(access::still_there(org_name, located));
    match store.transact(writes).await {
        Ok(()) => {}
        // The download is refused too (or the version went away meanwhile): nothing to count.
        Err(e) if e.is_condition_failed() => {}
        Err(e) => tracing::warn!(module = %name, provider = %provider, error = %e, "download not counted"),
    }
}

/// The version record is not revoked: its revocation is null, or it predates lifecycle changes
/// (every one bumps `lifecycle_revision` and writes `revocation`, null or not).
fn not_revoked() -> Condition {
    Condition::Or(vec![Condition::equals("revocation", Value::Null), Condition::Below("lifecycle_revision".into(), 1)])
}

async fn download_latest(
    State(state): State<AppState>,
    caller: ScopedCaller,
    Path((ns, name, provider)): Path<(String, String, String)>,
) -> Result<Response> {
    let Read { org, module, .. } = module(&state, caller, (&ns, &name, &provider), false).await?;
    let latest = module.latest.as_ref().ok_or(ProtocolError::NotFound)?;
    let location = format!("{PREFIX}/{}/{}/{}/{}/download", org.name, module.name, module.provider, latest.version);
    let location = HeaderValue::from_str(&location)?;
    Ok((StatusCode::FOUND, [(header::LOCATION, location)]).into_response())
}
