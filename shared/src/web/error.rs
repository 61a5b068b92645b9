//! The console's one error type, rendered as a page in one place. What the token may not see is
//! the same 404 page as what does not exist (the families' rule); a server fault is a generic
//! page, its cause in the log, never in the page.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::layout;
use crate::accounts::AccountsError;
use crate::agents::AgentsError;
use crate::api::ApiError;
use crate::broker::BrokerError;
use crate::errors::Kind;
use crate::registry::RegistryError;
use crate::state_versions::StateError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    /// Missing, or not visible to the token.
    #[error("not found")]
    NotFound,
    /// No session, an expired one, or one whose token was revoked: to the sign-in page.
    #[error("sign-in required")]
    SignInRequired,
    /// A POST that did not come from the console's own pages (Origin check, form token).
    #[error("the form did not come from this site")]
    CrossSite,
    /// A request the console refuses, with a message for the user.
    #[error("{1}")]
    Refused(StatusCode, String),
    /// The store is busy: a 503 page with `Retry-After`.
    #[error("the store is busy")]
    Unavailable,
    /// The server's fault; the cause was logged where it was met.
    #[error("internal error")]
    Internal,
}

impl WebError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        WebError::Refused(StatusCode::BAD_REQUEST, detail.into())
    }

    fn status(&self) -> StatusCode {
        match self {
            WebError::NotFound => StatusCode::NOT_FOUND,
            WebError::SignInRequired => StatusCode::SEE_OTHER,
            WebError::CrossSite => StatusCode::FORBIDDEN,
            WebError::Refused(status, _) => *status,
            WebError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            WebError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The page's heading and text.
    fn words(&self) -> (&'static str, String) {
        match self {
            WebError::NotFound => {
                ("Not found", "There is nothing here, or your token is not allowed to see it.".into())
            }
            WebError::SignInRequired => ("Sign in", "Sign in to continue.".into()),
            WebError::CrossSite => {
                ("Refused", "The form was not sent from this site's own pages. Reload the page and retry.".into())
            }
            WebError::Refused(_, detail) => ("Refused", detail.clone()),
            WebError::Unavailable => ("Busy", "The server is busy. Retry in a moment.".into()),
            WebError::Internal => ("Something went wrong", "The server could not complete the request.".into()),
        }
    }
}

/// What an error page says, kept on its response so that `guard::signed_in_errors` can show
/// it again inside the signed-in header of the session that met it.
#[derive(Debug, Clone)]
pub struct ErrorPage {
    pub title: &'static str,
    pub text: String,
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        if let WebError::SignInRequired = self {
            return Redirect::to("/app/sign-in").into_response();
        }
        let (title, text) = self.words();
        let mut response = (self.status(), layout::message_page(title, &text)).into_response();
        if let WebError::Unavailable = self {
            response.headers_mut().extend(Kind::Unavailable.headers());
        }
        response.extensions_mut().insert(ErrorPage { title, text });
        response
    }
}

impl WebError {
    /// The console's answer to a failure of `kind` met in a family: what the caller may not
    /// see (401, 403, 404 in the API) is its one 404; server faults are generic and were logged
    /// where they were met.
    fn of(kind: Kind, detail: String) -> Self {
        match kind {
            Kind::NotFound | Kind::Forbidden | Kind::Unauthorized => WebError::NotFound,
            Kind::Unavailable => WebError::Unavailable,
            kind if kind.is_server_fault() => WebError::Internal,
            kind => WebError::Refused(kind.status(), detail),
        }
    }
}

/// The families' errors reach the console through their one mapping to HTTP (`ApiError`), which
/// keeps their kind and the detail the API would show.
impl From<ApiError> for WebError {
    fn from(e: ApiError) -> Self {
        WebError::of(e.kind, e.detail)
    }
}

impl From<RegistryError> for WebError {
    fn from(e: RegistryError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<AgentsError> for WebError {
    fn from(e: AgentsError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<AccountsError> for WebError {
    fn from(e: AccountsError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<crate::runs::RunsError> for WebError {
    fn from(e: crate::runs::RunsError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<StateError> for WebError {
    fn from(e: StateError) -> Self {
        ApiError::from(e).into()
    }
}

impl From<StoreError> for WebError {
    fn from(e: StoreError) -> Self {
        ApiError::from(e).into()
    }
}

/// The broker's errors by their kind: a path the token's policies refuse (403) is the console's
/// 404, as in the other families. Vault answers a broken rule with a 400.
impl From<BrokerError> for WebError {
    fn from(e: BrokerError) -> Self {
        if e.kind().is_server_fault() && e.kind() != Kind::Unavailable {
            tracing::error!(error = %e, "broker error in the console");
        }
        match e.kind() {
            Kind::Invalid => WebError::Refused(e.status(), e.to_string()),
            kind => WebError::of(kind, e.to_string()),
        }
    }
}
