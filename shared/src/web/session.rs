//! Console sessions. A token is checked once, at sign-in; the cookie then holds a random session
//! id, and the store keeps only the id's SHA-256 with the token's hash (never the token) and an
//! expiry. Each request resolves the token again by that hash, so a revoked token ends its
//! sessions at once, and signing out deletes the session record, so a copied cookie is dead too.

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts, HeaderMap};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use super::error::WebError;
use super::layout::Chrome;
use crate::auth::{self, hash_secret, Principal};
use crate::broker::tokens::{self as broker_tokens, ServiceToken};
use crate::ids::random_token;
use crate::state::AppState;
use crate::store::{keys, Condition, Item, ItemStore};

/// The cookie that holds the session id.
pub const COOKIE: &str = "hangar_session";
/// How long a session lasts from sign-in; the token's own life may end it sooner.
pub const SESSION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(8 * 3600);
/// The longest token the sign-in form takes: Hangar's are 90 characters, the broker's 28, an
/// installed one what its operator chose.
pub const MAX_TOKEN_CHARS: usize = 512;
/// A session id and a form token: 43 alphanumerics, about 256 bits.
const ID_CHARS: usize = 43;

/// Which kind of token a session was opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum TokenKind {
    /// A site-admin or team token: the registry and agent pages.
    Hangar,
    /// A broker service token (the root one or one it made): the broker pages.
    Broker,
}

/// The stored session, under the SHA-256 of its id.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Session {
    kind: TokenKind,
    token_hash: String,
    /// What the console's POST forms carry besides the cookie (see [`Viewer::check_form`]).
    form_token: String,
    /// Unix seconds; also the item's TTL.
    expires_at: i64,
}

/// Who the signed-in token is.
pub enum Who {
    Hangar(Principal),
    /// Boxed: a broker token is several times the size of a principal.
    Broker(Box<ServiceToken>),
}

/// The caller of a console page: a live session and its token, resolved again for this request.
pub struct Viewer {
    pub who: Who,
    pub form_token: String,
    session_hash: String,
}

impl Viewer {
    /// The principal of a Hangar token; a broker session sees no registry or agent page (404).
    pub fn principal(&self) -> Result<&Principal, WebError> {
        match &self.who {
            Who::Hangar(principal) => Ok(principal),
            Who::Broker(_) => Err(WebError::NotFound),
        }
    }

    /// The broker token; a Hangar session sees no broker page (404).
    pub fn broker_token(&self) -> Result<&ServiceToken, WebError> {
        match &self.who {
            Who::Broker(token) => Ok(token),
            Who::Hangar(_) => Err(WebError::NotFound),
        }
    }

    /// Who the session's token is, in words, and what it may do.
    pub fn describe(&self) -> String {
        match &self.who {
            Who::Hangar(Principal::SiteAdmin) => "the site admin (every organization, every action)".to_owned(),
            Who::Hangar(Principal::Team(grant)) if grant.owners => {
                "a token of an organization's owners team".to_owned()
            }
            Who::Hangar(Principal::Team(grant)) => {
                let access = &grant.access;
                let may: Vec<&str> = [
                    (access.manage_modules, "manage modules"),
                    (access.manage_providers, "manage providers"),
                    (access.manage_agent_pools, "manage agent pools"),
                    (access.manage_workspaces, "manage workspaces"),
                ]
                .into_iter()
                .filter_map(|(granted, what)| granted.then_some(what))
                .collect();
                match may.is_empty() {
                    true => "a team token that may read its organization".to_owned(),
                    false => format!("a team token that may read its organization and {}", may.join(", ")),
                }
            }
            Who::Hangar(Principal::Agent(_)) => "an agent token".to_owned(),
            Who::Hangar(Principal::Job(_)) => "a run's job token".to_owned(),
            Who::Broker(token) => {
                format!("broker token {} with the policies {}", token.display_name, token.policies.join(", "))
            }
        }
    }

    /// The session's form token, which its POST forms carry.
    pub fn form_token(&self) -> &str {
        &self.form_token
    }

    /// What the page header shows for this session.
    pub fn chrome(&self) -> Chrome<'_> {
        Chrome { form_token: &self.form_token, broker: matches!(self.who, Who::Broker(_)) }
    }

    /// Refuses a form that does not carry this session's form token.
    pub fn check_form(&self, presented: &str) -> Result<(), WebError> {
        let same: bool = self.form_token.as_bytes().ct_eq(presented.as_bytes()).into();
        if same {
            Ok(())
        } else {
            Err(WebError::CrossSite)
        }
    }
}

/// A new session for `secret` if it is a Hangar token (not an agent's) or a broker token: the
/// id for the cookie. `None` for anything else, told apart by no one.
pub async fn sign_in(store: &dyn ItemStore, secret: &str, now: i64) -> Result<Option<String>, WebError> {
    let secret = secret.trim();
    if secret.is_empty() || secret.chars().count() > MAX_TOKEN_CHARS {
        return Ok(None);
    }
    let kind = match auth::resolve(store, secret).await? {
        Some(Principal::Agent(_) | Principal::Job(_)) => return Ok(None),
        Some(_) => TokenKind::Hangar,
        // A token with limited uses opens no session: every page would have to spend one.
        None if broker_tokens::resolve(store, secret).await?.is_some_and(|t| !t.is_limited_use()) => TokenKind::Broker,
        None => return Ok(None),
    };
    let lifetime = i64::try_from(SESSION_LIFETIME.as_secs()).unwrap_or(i64::MAX);
    let session = Session {
        kind,
        token_hash: hash_secret(secret),
        form_token: random_token(ID_CHARS),
        expires_at: now.saturating_add(lifetime),
    };
    let id = random_token(ID_CHARS);
    let item = Item::from_value(keys::web_session(&hash_secret(&id)), &session)?.with_ttl(session.expires_at);
    store.put(item, Condition::NotExists).await?;
    Ok(Some(id))
}

/// The viewer of a session id, if the session is live and its token still resolves. A session
/// whose token is gone opens nothing and is left to its expiry (no GET writes).
pub async fn open(store: &dyn ItemStore, id: &str, now: i64) -> Result<Option<Viewer>, WebError> {
    let session_hash = hash_secret(id);
    let key = keys::web_session(&session_hash);
    let Some(item) = store.get(&key).await? else { return Ok(None) };
    let session: Session = item.parse()?;
    if session.expires_at <= now {
        return Ok(None);
    }
    let who = match session.kind {
        TokenKind::Hangar => match auth::resolve_hash(store, &session.token_hash).await? {
            Some(Principal::Agent(_) | Principal::Job(_)) | None => None,
            Some(principal) => Some(Who::Hangar(principal)),
        },
        TokenKind::Broker => broker_tokens::resolve_hash(store, &session.token_hash)
            .await?
            .filter(|t| !t.is_limited_use())
            .map(|t| Who::Broker(Box::new(t))),
    };
    let Some(who) = who else { return Ok(None) };
    Ok(Some(Viewer { who, form_token: session.form_token, session_hash }))
}

/// Ends a session: its record is deleted, so the cookie's id opens nothing any more.
pub async fn sign_out(store: &dyn ItemStore, viewer: &Viewer) -> Result<(), WebError> {
    store.delete(&keys::web_session(&viewer.session_hash), Condition::Always).await?;
    Ok(())
}

/// The session id the request's cookie holds, if it has the shape of one.
pub fn presented(headers: &HeaderMap) -> Option<&str> {
    cookie_value(headers, COOKIE)
}

/// A cookie's value, if it has the shape of an id: 43 alphanumerics.
fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value)
        .filter(|value| value.len() == ID_CHARS && value.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The cookie that pairs the sign-in form with the browser that loaded it (before there is a
/// session, there is no session's form token): the form carries the same random value.
pub const SIGN_IN_COOKIE: &str = "hangar_sign_in";

/// A new sign-in form token, and the `Set-Cookie` value that holds it for an hour on the
/// sign-in path alone. Another site can neither read it nor make the browser send it along.
pub fn sign_in_form(secure: bool) -> (String, String) {
    let token = random_token(ID_CHARS);
    let secure = if secure { "; Secure" } else { "" };
    let cookie =
        format!("{SIGN_IN_COOKIE}={token}; Path=/app/sign-in; HttpOnly; SameSite=Strict; Max-Age=3600{secure}");
    (token, cookie)
}

/// Refuses a sign-in form whose token is not the one its browser's sign-in cookie holds: a form
/// another site made the browser send (login CSRF).
pub fn check_sign_in_form(headers: &HeaderMap, presented: &str) -> Result<(), WebError> {
    let expected = cookie_value(headers, SIGN_IN_COOKIE).ok_or(WebError::CrossSite)?;
    let same: bool = expected.as_bytes().ct_eq(presented.as_bytes()).into();
    if same {
        Ok(())
    } else {
        Err(WebError::CrossSite)
    }
}

/// The `Set-Cookie` value of a new session: not readable by scripts, sent only to the console's
/// own pages and never with a request another site starts, over https only when served so.
pub fn cookie(id: &str, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={id}; Path=/app; HttpOnly; SameSite=Strict; Max-Age={}{secure}", SESSION_LIFETIME.as_secs())
}

/// The `Set-Cookie` value that clears the cookie.
pub fn cleared(secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}=; Path=/app; HttpOnly; SameSite=Strict; Max-Age=0{secure}")
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let id = presented(&parts.headers).ok_or(WebError::SignInRequired)?;
        let now = chrono::Utc::now().timestamp();
        open(state.store.as_ref(), id, now).await?.ok_or(WebError::SignInRequired)
    }
}

/// A viewer when there is one: for the pages that also serve those signed out.
pub struct MaybeViewer(pub Option<Viewer>);

impl FromRequestParts<AppState> for MaybeViewer {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(id) = presented(&parts.headers) else { return Ok(MaybeViewer(None)) };
        let now = chrono::Utc::now().timestamp();
        Ok(MaybeViewer(open(state.store.as_ref(), id, now).await?))
    }
}
