//! Signing in (a token, checked once, for a session cookie) and out (the session deleted).
//! Both are POST forms carrying a form token (the sign-in cookie's, the session's), refused when
//! they name another site; no GET changes anything.

use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use crate::api::BaseUrl;
use crate::state::AppState;
use crate::web::error::WebError;
use crate::web::guard::refuse_foreign_origin;
use crate::web::layout::{self, bare_page};
use crate::web::session::{self, MaybeViewer, MAX_TOKEN_CHARS};

/// The longest form token read.
const MAX_FORM_TOKEN_CHARS: usize = 64;

/// The sign-in page. Someone signed in sees it too, with who they are, the console's header and
/// the sign-out form: signing in again with another token replaces the session.
pub async fn form(MaybeViewer(viewer): MaybeViewer, BaseUrl(base): BaseUrl) -> Response {
    let mut page = sign_in_page(StatusCode::OK, None, base.starts_with("https://"));
    if let Some(viewer) = viewer {
        let (mut parts, _) = page.into_parts();
        let body = html! {
            section.sign-in {
                h1 { "Sign in to Hangar" }
                p.summary { "Signed in as " (viewer.describe()) ". Sign in below with another token to switch, or sign out." }
                (sign_in_form(&form_token_of(&parts)))
            }
        };
        let signed_in = layout::page(viewer.chrome(), "Sign in", &[], body).into_response();
        let (_, body) = signed_in.into_parts();
        parts.headers.remove(header::CONTENT_LENGTH);
        page = Response::from_parts(parts, body);
    }
    page
}

/// The sign-out page (a GET): the POST form that ends the session, with its form token.
pub async fn sign_out_form(MaybeViewer(viewer): MaybeViewer) -> Response {
    let Some(viewer) = viewer else { return Redirect::to("/app/sign-in").into_response() };
    let body = html! {
        section.sign-in {
            h1 { "Sign out" }
            p { "Signed in as " (viewer.describe()) ". Signing out ends this session; the token itself stays valid." }
            form method="post" action="/app/sign-out" {
                input type="hidden" name="form_token" value=(viewer.form_token());
                button type="submit" { "Sign out" }
            }
        }
    };
    layout::page(viewer.chrome(), "Sign out", &[], body).into_response()
}

/// The sign-in form token a sign-in page's cookie holds (the page sets it with the form).
fn form_token_of(parts: &axum::http::response::Parts) -> String {
    let cookie = parts.headers.get(header::SET_COOKIE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    cookie.split(';').next().and_then(|pair| pair.split_once('=')).map(|(_, v)| v.to_owned()).unwrap_or_default()
}

/// The form, with a fresh form token and the cookie that holds it.
fn sign_in_page(status: StatusCode, problem: Option<&str>, secure: bool) -> Response {
    let (form_token, cookie) = session::sign_in_form(secure);
    let page = bare_page(
        "Sign in",
        html! {
            section.sign-in {
                h1 { "Sign in to Hangar" }
                p { "Paste a Hangar token (a team token or the site-admin token) to browse the registry and "
                    "agent pools, or a broker token to browse the credential broker. It is checked once; "
                    "the browser then keeps only a session cookie." }
                @if let Some(problem) = problem { p.problem role="alert" { (problem) } }
                (sign_in_form(&form_token))
            }
        },
    );
    (status, [(header::SET_COOKIE, cookie)], page).into_response()
}

fn sign_in_form(form_token: &str) -> maud::Markup {
    html! {
        form method="post" action="/app/sign-in" {
            input type="hidden" name="form_token" value=(form_token);
            label for="token" { "Token" }
            input #token type="password" name="token" required autocomplete="off"
                maxlength=(MAX_TOKEN_CHARS) autofocus;
            button type="submit" { "Sign in" }
        }
    }
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    form_token: String,
}

pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    BaseUrl(base): BaseUrl,
    form: Result<Form<SignInForm>, axum::extract::rejection::FormRejection>,
) -> Result<Response, WebError> {
    refuse_foreign_origin(&headers)?;
    let Form(form) = form.map_err(|_| WebError::bad_request("The sign-in form could not be read."))?;
    session::check_sign_in_form(&headers, bounded(&form.form_token)?)?;
    let now = chrono::Utc::now().timestamp();
    let secure = base.starts_with("https://");
    let Some(id) = session::sign_in(state.store.as_ref(), &form.token, now).await? else {
        let problem = "That token is not valid. Check it and try again.";
        return Ok(sign_in_page(StatusCode::UNAUTHORIZED, Some(problem), secure));
    };
    Ok(([(header::SET_COOKIE, session::cookie(&id, secure))], Redirect::to("/app")).into_response())
}

#[derive(Deserialize)]
pub struct SignOutForm {
    #[serde(default)]
    form_token: String,
}

/// Deletes the session (what makes sign-out hold even for a copy of the cookie) and clears the
/// cookie. Without a live session there is nothing to end: the cookie is cleared all the same.
pub async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    BaseUrl(base): BaseUrl,
    MaybeViewer(viewer): MaybeViewer,
    form: Result<Form<SignOutForm>, axum::extract::rejection::FormRejection>,
) -> Result<Response, WebError> {
    refuse_foreign_origin(&headers)?;
    let Form(form) = form.map_err(|_| WebError::bad_request("The sign-out form could not be read."))?;
    if let Some(viewer) = viewer {
        viewer.check_form(bounded(&form.form_token)?)?;
        session::sign_out(state.store.as_ref(), &viewer).await?;
    }
    let cookie = session::cleared(base.starts_with("https://"));
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to("/app/sign-in")).into_response())
}

/// A form token within its bound (a longer one is no form token of ours).
fn bounded(form_token: &str) -> Result<&str, WebError> {
    if form_token.len() > MAX_FORM_TOKEN_CHARS {
        return Err(WebError::CrossSite);
    }
    Ok(form_token)
}
