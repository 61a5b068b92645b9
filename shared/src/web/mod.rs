//! The web console (function `web`): the registry, the agent pools and the credential broker as
//! pages under `/app`, rendered on the server with maud. It signs in with a Hangar or broker
//! token and then calls the same domain functions as the API handlers, with the same principal,
//! so it sees exactly what the token sees through the API (another organization's module is the
//! same 404). No JavaScript: every page reads with scripts off, and the CSP forbids them.

mod error;
mod guard;
pub mod layout;
mod markdown;
mod pages;
mod session;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::Router;

pub use error::WebError;
pub use session::{COOKIE, SESSION_LIFETIME};

use crate::state::AppState;

/// The largest sign-in or sign-out form accepted (a token is at most a few hundred bytes).
const MAX_FORM_BYTES: usize = 4 * 1024;

/// Every console route, to merge beside the families' routers (dev-server's). Unknown paths
/// under `/app` are the console's own 404 page; every answer, errors and redirects included,
/// carries the security headers (`guard::headers`).
pub fn router(state: &AppState) -> Router<AppState> {
    guarded(routes(), state)
}

/// The console alone (the `web` function's): any path outside `/app` is its 404 page too.
pub fn standalone(state: &AppState) -> Router<AppState> {
    guarded(routes().fallback(|| async { WebError::NotFound }), state)
}

/// Every answer: error pages inside the signed-in header (outermost, so it also sees the pages
/// `guard::headers` makes of axum's own refusals), and the security headers.
fn guarded(routes: Router<AppState>, state: &AppState) -> Router<AppState> {
    routes
        .layer(axum::middleware::from_fn(guard::headers))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard::signed_in_errors))
}

fn routes() -> Router<AppState> {
    let forms = DefaultBodyLimit::max(MAX_FORM_BYTES);
    Router::new()
        .route("/app", get(pages::organizations::list))
        // The catch-all below takes no empty rest: `/app/` is the console's too.
        .route("/app/", get(|| async { axum::response::Redirect::permanent("/app") }))
        .route(layout::STYLESHEET_PATH, get(layout::stylesheet))
        .route("/app/sign-in", get(pages::sign_in::form).post(pages::sign_in::submit).layer(forms))
        .route("/app/sign-out", get(pages::sign_in::sign_out_form).post(pages::sign_in::sign_out).layer(forms))
        .route("/app/organizations/{org}", get(pages::organizations::show))
        .route("/app/organizations/{org}/modules", get(pages::modules::list))
        .route("/app/organizations/{org}/providers", get(pages::providers::list))
        .route("/app/organizations/{org}/workspaces/{name}", get(pages::workspace::show))
        .route("/app/organizations/{org}/workspaces/{name}/runs/{run}", get(pages::runs::show))
        .route("/app/organizations/{org}/modules/{registry}/{namespace}/{name}/{provider}", get(pages::module::show))
        .route("/app/organizations/{org}/agent-pools", get(pages::agents::pools))
        .route("/app/broker", get(pages::broker::mounts))
        .route("/app/broker/mount", get(pages::broker::mount))
        .route("/app/{*unknown}", axum::routing::any(|| async { WebError::NotFound }))
}
