//! The page shell every console page shares, its one stylesheet (compiled in), and the small
//! pieces pages repeat: the pagination links, times, the empty-list line.

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use crate::api::{PageRequest, Paginated, QueryParams};

pub const STYLESHEET_PATH: &str = "/app/console.css";
const STYLESHEET: &str = include_str!("console.css");

/// Serves the stylesheet; it changes only with the binary, so browsers may keep it an hour.
pub async fn stylesheet() -> Response {
    let headers = [(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "public, max-age=3600")];
    (StatusCode::OK, headers, STYLESHEET).into_response()
}

/// A rendered page.
pub struct Page(Markup);

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        Html(self.0.into_string()).into_response()
    }
}

/// What the signed-in header needs of the session.
pub struct Chrome<'a> {
    /// The session's form token, which the sign-out form carries.
    pub form_token: &'a str,
    /// A broker token's session (the broker pages) rather than a Hangar token's.
    pub broker: bool,
}

/// A page with the signed-in header: where the token may go, and the sign-out form.
pub fn page(chrome: Chrome<'_>, title: &str, crumbs: &[(&str, String)], body: Markup) -> Page {
    refreshing_page(chrome, title, crumbs, body, None)
}

/// [`page`], reloaded by the browser every `refresh` seconds when given (a run still going: its
/// log grows), with no script.
pub fn refreshing_page(
    chrome: Chrome<'_>,
    title: &str,
    crumbs: &[(&str, String)],
    body: Markup,
    refresh: Option<u32>,
) -> Page {
    let links: Vec<(&str, &str)> = match chrome.broker {
        false => vec![("Organizations", "/app")],
        true => vec![("Credential broker", "/app/broker")],
    };
    let header = html! {
        nav.top {
            a.brand href="/app" { "Hangar" }
            @for (label, href) in &links { a href=(href) { (label) } }
            form.sign-out method="post" action="/app/sign-out" {
                input type="hidden" name="form_token" value=(chrome.form_token);
                button type="submit" { "Sign out" }
            }
        }
    };
    Page(shell(title, header, crumbs, body, refresh))
}

/// A page for someone signed out (the sign-in form), or one whose session is unknown (errors).
pub fn bare_page(title: &str, body: Markup) -> Page {
    let header = html! { nav.top { a.brand href="/app" { "Hangar" } } };
    Page(shell(title, header, &[], body, None))
}

/// An error page: a heading and a sentence.
pub fn message_page(title: &str, text: &str) -> Page {
    bare_page(title, message(title, text))
}

/// An error page for someone signed in: the same words inside the signed-in header, so every
/// page has a way on (the console's home, sign-out).
pub fn signed_in_message_page(chrome: Chrome<'_>, title: &str, text: &str) -> Page {
    page(chrome, title, &[], message(title, text))
}

fn message(title: &str, text: &str) -> Markup {
    html! { h1 { (title) } p.message { (text) } p { a href="/app" { "Back to the console" } } }
}

fn shell(title: &str, header: Markup, crumbs: &[(&str, String)], body: Markup, refresh: Option<u32>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(seconds) = refresh { meta http-equiv="refresh" content=(seconds); }
                title { (title) " · Hangar" }
                link rel="stylesheet" href=(STYLESHEET_PATH);
            }
            body {
                header { (header) }
                main {
                    @if !crumbs.is_empty() {
                        nav.crumbs aria-label="Breadcrumb" {
                            @for (label, href) in crumbs { a href=(href) { (label) } " / " }
                            span { (title) }
                        }
                    }
                    (body)
                }
            }
        }
    }
}

/// The console's one script: a "Copy" button copies the text of the element its `data-copy`
/// names. Allowed by its hash in the Content-Security-Policy (`guard::content_security_policy`),
/// so no other script, inline or loaded, can run.
pub const COPY_SCRIPT: &str = "document.querySelectorAll('button[data-copy]').forEach(function (button) {\
button.addEventListener('click', function () {\
navigator.clipboard.writeText(document.getElementById(button.dataset.copy).textContent).then(\
function () { button.textContent = 'Copied'; }, function () { button.textContent = 'Copy failed'; });\
});\
});";

/// A "Copy" button for the element with id `target`, and the script that makes it work.
pub fn copy_button(target: &str) -> Markup {
    html! {
        button.copy type="button" data-copy=(target) { "Copy" }
        script { (maud::PreEscaped(COPY_SCRIPT)) }
    }
}

/// Previous / next links for a list, built by the API's pagination helper on the page's own path
/// (its `page[number]` and `page[size]` parameters, the caller's others kept).
pub fn pager(path: &str, params: &QueryParams, page: PageRequest, total: usize) -> Markup {
    let paginated = Paginated::new(path.to_owned(), params, page, total);
    let links = paginated.links();
    let link = |name: &str| links.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    html! {
        nav.pager aria-label="Pages" {
            @if let Some(prev) = link("prev") { a rel="prev" href=(prev) { "← Previous" } }
            span { "Page " (page.number.min(paginated.total_pages())) " of " (paginated.total_pages()) " · " (total) " in all" }
            @if let Some(next) = link("next") { a rel="next" href=(next) { "Next →" } }
        }
    }
}

/// A stored RFC 3339 time as people read it (UTC, to the minute); as stored if it does not parse.
pub fn time(at: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(at)
        .map(|at| at.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| at.to_owned())
}

/// Unix seconds as [`time`] shows them.
pub fn unix_time(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map_or_else(|| at.to_string(), |at| at.format("%Y-%m-%d %H:%M UTC").to_string())
}

/// A status as a labelled badge (`status-ok`, `status-errored`, …) that reads without colour,
/// in words: the API's codes (`reg_ingress_failed`) mean nothing to a person.
pub fn badge(status: &str) -> Markup {
    let class: String =
        status.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    html! { span class={ "badge status-" (class) } title=(status) { (in_words(status)) } }
}

/// A status code as people say it; an unknown one with its underscores as spaces.
fn in_words(status: &str) -> std::borrow::Cow<'_, str> {
    let words = match status {
        "ok" => "ready",
        "pending" => "waiting for its archive",
        "reg_ingress_failed" => "archive refused",
        "reg_ingress_req_failed" => "fetch failed",
        "reg_ingressing" => "being read",
        "setup_complete" => "ready",
        "setup_failed" => "setup failed",
        "no_version_tags" => "no version tags",
        "pending_setup" => "being set up",
        _ => return status.replace('_', " ").into(),
    };
    words.into()
}
