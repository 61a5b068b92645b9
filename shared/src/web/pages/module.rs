//! A module's page: its versions with their status, upload errors, deprecation and revocation; the usage
//! snippet; the VCS source; and for the version shown (the latest unless one is asked for) the
//! README and the parsed metadata: inputs, outputs, required providers, resources, submodules
//! and examples. Read through the registry's `modules::get` and `versions::read`, the same calls
//! (and 404s) as the management API's show-module and show-version.

use axum::extract::{Path, RawQuery, State};
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;

use super::{filter, params};
use crate::api::BaseUrl;
use crate::archive::{ModuleDirectory, ModuleMetadata};
use crate::auth::Scoped;
use crate::registry::modules::{self, Address, Module, VersionStatus};
use crate::registry::status::OK;
use crate::registry::versions::{self, ModuleVersion};
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::layout::{self, badge, Page};
use crate::web::markdown;
use crate::web::session::Viewer;

/// The longest input default shown (characters); the rest is elided.
const MAX_DEFAULT_CHARS: usize = 200;

#[derive(Deserialize)]
pub struct ModulePath {
    org: String,
    registry: String,
    namespace: String,
    name: String,
    provider: String,
}

pub async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(path): Path<ModulePath>,
    BaseUrl(base): BaseUrl,
    query: RawQuery,
) -> Result<Page, WebError> {
    let principal = viewer.principal()?;
    let params = params(query)?;
    let asked = filter(&params, "version")?;
    let address = Address::new(&path.registry, &path.namespace, &path.name)?;
    let caller = Scoped::of(principal.clone());
    let (shown, org) = modules::get(&state, &caller, &path.org, &address, &path.provider).await?;
    let module = &shown.module;
    let statuses = &shown.statuses;
    // The version shown: the one asked for (404 if the module has none such), else the latest.
    let chosen = match asked {
        Some(asked) => Some(statuses.iter().find(|s| s.version == asked).ok_or(WebError::NotFound)?),
        None => module.latest.as_ref().or(statuses.last()),
    };
    let version = match chosen {
        Some(chosen) => Some(
            versions::read(&state, principal, &path.org, &address, &path.provider, &chosen.version)
                .await
                .map(|(version, metadata, _)| (version, metadata))?,
        ),
        None => None,
    };
    let namespace = module.namespace_in(&org).to_owned();
    let title = format!("{namespace}/{}/{}", module.name.as_str(), module.provider.as_str());
    let modules_page = format!("/app/organizations/{}/modules", org.name);
    let here =
        format!("{modules_page}/{}/{namespace}/{}/{}", path.registry, module.name.as_str(), module.provider.as_str());
    let host = super::registry_host(&base);
    let usage = version.as_ref().map(|(version, _)| usage(host, &namespace, module, version));
    let details = match version {
        Some((version, metadata)) => {
            let hosts = image_hosts(&state, module);
            // READMEs render off the async workers: a page's bounded worst case is still tens of
            // milliseconds of CPU, which would hold up every other request on the worker.
            let rendered = tokio::task::spawn_blocking(move || version_details(&version, metadata.as_ref(), hosts));
            Some(rendered.await.map_err(|_| WebError::Internal)?)
        }
        None => None,
    };
    let body = html! {
        h1 { (title) }
        p.summary {
            (badge(&module.status)) " "
            span { (module.registry.as_str()) " module" }
            @if let Some(description) = &module.description { " · " (description) }
        }
        @if let Some(usage) = usage { (usage) }
        (source(module))
        (versions_table(&here, statuses, chosen.map(|c| c.version.as_str())))
        @if let Some(details) = details { (details) }
    };
    let crumbs = [("Organizations", "/app".to_owned()), (org.name.as_str(), modules_page.clone())];
    Ok(layout::page(viewer.chrome(), &title, &crumbs, body))
}

/// `module "…" { source = "<host>/<namespace>/<name>/<provider>"  version = "~> x.y" }` for an
/// `ok` version: a pessimistic constraint on its minor version, or the exact prerelease.
fn usage(host: &str, namespace: &str, module: &Module, version: &ModuleVersion) -> Markup {
    if version.status != OK || version.revocation.is_some() {
        return html! {};
    }
    let constraint = match semver::Version::parse(&version.version) {
        Ok(v) if v.pre.is_empty() => format!("~> {}.{}", v.major, v.minor),
        _ => version.version.clone(),
    };
    let snippet = format!(
        "module \"{name}\" {{\n  source  = \"{host}/{namespace}/{name}/{provider}\"\n  version = \"{constraint}\"\n}}",
        name = module.name.as_str(),
        provider = module.provider.as_str(),
    );
    html! {
        section.usage {
            h2 { "Usage" }
            pre { code #usage-snippet { (snippet) } }
            (layout::copy_button("usage-snippet"))
        }
    }
}

/// The repository a module publishes from, when it does.
fn source(module: &Module) -> Markup {
    let Some(repo) = &module.vcs_repo else { return html! {} };
    let link = repo.repository_http_url.starts_with("https://") || repo.repository_http_url.starts_with("http://");
    html! {
        section.source {
            h2 { "Source" }
            p {
                @if link { a href=(repo.repository_http_url) rel="noopener noreferrer nofollow" { (repo.display_identifier) } }
                @else { (repo.display_identifier) }
                " (" (repo.service_provider) ") · "
                @if module.publishes_from_tags() { "a version for each tag" }
                @else { "versions from branch " code { (repo.branch) } }
            }
            @if let Some(error) = &repo.setup_error { p.problem { "Setup failed: " (error) } }
        }
    }
}

fn versions_table(here: &str, statuses: &[VersionStatus], chosen: Option<&str>) -> Markup {
    html! {
        section.versions {
            h2 { "Versions" }
            @if statuses.is_empty() {
                p.empty { "No version yet." }
            } @else {
                table.list {
                    thead { tr { th { "Version" } th { "Status" } th { "Published" } th { "Notes" } } }
                    tbody {
                        @for status in statuses.iter().rev() {
                            tr class=[(chosen == Some(status.version.as_str())).then_some("chosen")] {
                                td { a href={ (here) "?" (version_query(&status.version)) } { (status.version) } }
                                td {
                                    (badge(&status.status))
                                    @if status.deprecation.is_some() { " " (badge("deprecated")) }
                                    @if status.revocation.is_some() { " " (badge("revoked")) }
                                }
                                td { (status.published_at.as_deref().map(layout::time).unwrap_or_default()) }
                                td { (lifecycle_notes(status)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A version's upload error, deprecation and revocation, each with its reason and link.
fn lifecycle_notes(status: &VersionStatus) -> Markup {
    html! {
        @if let Some(error) = &status.error { p.problem { (error) } }
        @if let Some(deprecation) = &status.deprecation {
            p.deprecation {
                "Deprecated " (layout::time(&deprecation.deprecated_at))
                @if !deprecation.reason.is_empty() { ": " (deprecation.reason) }
                (more_link(deprecation.link.as_deref()))
            }
        }
        @if let Some(revocation) = &status.revocation {
            p.problem {
                "Revoked " (layout::time(&revocation.revoked_at)) ", no longer offered to new consumers"
                @if !revocation.message.is_empty() { ": " (revocation.message) }
                (more_link(revocation.link.as_deref()))
            }
        }
    }
}

/// A "Read more" link, for an http(s) URL only (the registry checks it; the page checks again).
fn more_link(link: Option<&str>) -> Markup {
    match link.filter(|link| link.starts_with("https://") || link.starts_with("http://")) {
        Some(link) => html! { " " a href=(link) rel="noopener noreferrer nofollow" { "Read more" } },
        None => html! {},
    }
}

/// The hosts a module page's README images may load from: the operator's list, and a VCS
/// module's own repository host.
fn image_hosts(state: &AppState, module: &crate::registry::modules::Module) -> Vec<String> {
    let mut hosts = state.config.console_image_hosts.clone();
    let repository = module.vcs_repo.as_ref().and_then(|repo| reqwest::Url::parse(&repo.repository_http_url).ok());
    hosts.extend(repository.and_then(|url| url.host_str().map(str::to_ascii_lowercase)));
    hosts
}

fn version_details(version: &ModuleVersion, metadata: Option<&ModuleMetadata>, image_hosts: Vec<String>) -> Markup {
    // One budget for every README the page shows.
    let mut budget = markdown::Budget::page(image_hosts);
    html! {
        section.readme {
            h2 { "README" span.note { " · version " (version.version) } }
            @match &version.readme {
                Some(readme) => article.markdown { (PreEscaped(markdown::render(readme, &mut budget))) },
                None => p.empty { "This version has no README." },
            }
        }
        @if let Some(error) = &version.error { p.problem { "Upload failed: " (error) } }
        @if version.deprecation.is_some() || version.revocation.is_some() {
            p.problem { "Version " (version.version) " is "
                @if version.revocation.is_some() { "revoked" } @else { "deprecated" }
                ": see Versions above." }
        }
        @match metadata {
            None => p.empty { "No parsed metadata for this version." },
            Some(metadata) => {
                @if let Some(problem) = &metadata.problem { p.problem { (problem) } }
                (directory(&metadata.root))
                (directories("Submodules", &metadata.submodules, &mut budget))
                (directories("Examples", &metadata.examples, &mut budget))
            }
        }
    }
}

fn directories(title: &str, all: &[ModuleDirectory], budget: &mut markdown::Budget) -> Markup {
    if all.is_empty() {
        return html! {};
    }
    html! {
        section.directories {
            h2 { (title) }
            @for dir in all {
                details {
                    summary { code { (dir.path) } " · " (dir.inputs.len()) " inputs, " (dir.outputs.len()) " outputs" }
                    @if let Some(readme) = &dir.readme { article.markdown { (PreEscaped(markdown::render(readme, budget))) } }
                    (directory(dir))
                }
            }
        }
    }
}

/// One directory's inputs, outputs, required providers, module calls, resources and data sources.
fn directory(dir: &ModuleDirectory) -> Markup {
    html! {
        @if let Some(problem) = &dir.problem { p.problem { (problem) } }
        section.inputs {
            h3 { "Inputs" }
            @if dir.inputs.is_empty() { p.empty { "None." } } @else {
                table.list {
                    thead { tr { th { "Name" } th { "Type" } th { "Description" } th { "Default" } th { "Required" } } }
                    tbody {
                        @for input in &dir.inputs {
                            tr {
                                td { code { (input.name) } @if input.sensitive { " " span.note { "sensitive" } } }
                                td { code { (input.kind) } }
                                td { (input.description) }
                                td { @if let Some(default) = &input.default { code { (shorten(&default.to_string())) } } }
                                td { @if input.required { "yes" } @else { "no" } }
                            }
                        }
                    }
                }
            }
        }
        section.outputs {
            h3 { "Outputs" }
            @if dir.outputs.is_empty() { p.empty { "None." } } @else {
                table.list {
                    thead { tr { th { "Name" } th { "Description" } } }
                    tbody {
                        @for output in &dir.outputs {
                            tr {
                                td { code { (output.name) } @if output.sensitive { " " span.note { "sensitive" } } }
                                td { (output.description) }
                            }
                        }
                    }
                }
            }
        }
        @if !dir.provider_dependencies.is_empty() {
            section.providers {
                h3 { "Required providers" }
                ul { @for p in &dir.provider_dependencies { li { code { (p.source) } @if !p.version.is_empty() { " " code { (p.version) } } } } }
            }
        }
        @if !dir.dependencies.is_empty() {
            section.calls {
                h3 { "Module calls" }
                ul { @for call in &dir.dependencies { li { code { (call.name) } " ← " code { (call.source) } @if !call.version.is_empty() { " " code { (call.version) } } } } }
            }
        }
        @if !dir.resources.is_empty() || !dir.data_sources.is_empty() {
            section.resources {
                h3 { "Resources" }
                ul {
                    @for r in &dir.resources { li { code { (r.kind) "." (r.name) } } }
                    @for r in &dir.data_sources { li { code { "data." (r.kind) "." (r.name) } } }
                }
            }
        }
    }
}

/// `version=…`, encoded (a `+` of build metadata would read back as a space).
fn version_query(version: &str) -> String {
    serde_urlencoded::to_string([("version", version)]).unwrap_or_default()
}

fn shorten(text: &str) -> String {
    match text.char_indices().nth(MAX_DEFAULT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
