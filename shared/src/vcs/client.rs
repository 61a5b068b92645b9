//! The HTTP client every VCS call goes through, built once per process, and the rules on the
//! URLs it may call. Its DNS resolver checks each address a host name resolves to against
//! [`AllowedNetworks`] and hands the connector only those that pass, so the address checked is
//! the address connected to: no second lookup can answer differently (DNS rebinding), and every
//! connection is covered, redirects included. A literal IP never reaches a resolver, so callers
//! check each URL with [`Client::check_target`] first. The client follows no redirect itself
//! (the API layer follows them one checked hop at a time) and ignores `HTTP(S)_PROXY`: a proxy
//! would resolve names where they cannot be checked.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

use super::networks::{AllowedNetworks, Refused};
use crate::lazy::LazyClient;

/// How long opening a connection may take; each call has its own overall timeout as well.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most addresses of one host name that are checked and tried.
const MAX_ADDRESSES: usize = 16;

/// The checked client, cheap to clone. Its HTTPS client is built by the first call out: most
/// of a function's starts make none (BENCHMARKS.md, "Cold init").
#[derive(Clone)]
pub struct Client {
    http: LazyClient<Result<reqwest::Client, String>>,
    allowed: Arc<AllowedNetworks>,
    /// The largest archive download read, in bytes (`HANGAR_ARCHIVE_MAX_COMPRESSED_BYTES`, as for
    /// uploads).
    pub(super) max_archive_bytes: u64,
}

impl Client {
    /// A client whose connections reach the public Internet and the `allowed` networks only.
    pub fn new(allowed: AllowedNetworks, max_archive_bytes: u64) -> Self {
        let allowed = Arc::new(allowed);
        let resolver = CheckedResolver(Arc::clone(&allowed));
        let http = LazyClient::new(move || {
            let tls = crate::https::client_tls().map_err(|e| e.to_string())?;
            reqwest::Client::builder()
                .use_preconfigured_tls(tls)
                .dns_resolver(Arc::new(resolver))
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| e.to_string())
        });
        Self { http, allowed, max_archive_bytes }
    }

    /// The HTTPS client, built on first use; the reason if it could not be built (a TLS
    /// configuration rustls refuses, which the one compiled in never is).
    pub(super) fn http(&self) -> Result<&reqwest::Client, &str> {
        self.http.as_ref().map_err(String::as_str)
    }

    /// The networks this client may reach besides the public Internet.
    pub fn allowed(&self) -> &AllowedNetworks {
        &self.allowed
    }

    /// Refuses a URL about to be called whose host is a literal IP outside the allowed
    /// networks; a host name is checked by the resolver when connecting.
    pub(super) fn check_target(&self, url: &Url) -> Result<(), Refused> {
        literal_ip(url).map_or(Ok(()), |ip| self.allowed.check(ip))
    }
}

impl Client {
    /// GETs a small JSON document (an OIDC discovery document, a JWKS) from a URL someone
    /// configured, through the same guard as every VCS call: its addresses checked, no
    /// redirects, no proxy, at most `limit` bytes, 10 seconds in all.
    pub async fn get_json(&self, raw: &str, limit: usize) -> Result<serde_json::Value, String> {
        let url = check_url(raw, &self.allowed).map_err(|problem| match problem {
            UrlProblem::Malformed => format!("`{raw}` is not an absolute http(s) URL without credentials"),
            UrlProblem::Refused(why) => why.to_string(),
        })?;
        let http = self.http()?;
        let call = async {
            let mut response = http.get(url).send().await.map_err(|e| e.to_string())?;
            if !response.status().is_success() {
                return Err(format!("it answered {}", response.status()));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
                if body.len() + chunk.len() > limit {
                    return Err(format!("the answer is over {limit} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
        };
        tokio::time::timeout(Duration::from_secs(10), call).await.map_err(|_| "no answer in 10 seconds".to_owned())?
    }
}

/// The URL's host if it is an IP address (which `Url` has already normalised: `2130706433` and
/// `0x7f.1` are `127.0.0.1`).
fn literal_ip(url: &Url) -> Option<IpAddr> {
    url.host_str()?.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// Why a URL cannot be a VCS connection's `api-url` or `http-url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlProblem {
    /// Not an absolute http(s) URL with a host, or one with credentials, a query or a fragment
    /// (a query or fragment would corrupt the paths appended to it, and credentials would be
    /// shown in every response).
    Malformed,
    /// Its host is a literal address outside the allowed networks.
    Refused(Refused),
}

/// Checks a connection's URL: when the connection is created (a 422) and before every call
/// (for connections stored before the check, or an allow-list narrowed since). A host name
/// passes here; what it resolves to is checked when it is used, as the answer may change.
pub fn check_url(raw: &str, allowed: &AllowedNetworks) -> Result<Url, UrlProblem> {
    let url = Url::parse(raw).map_err(|_| UrlProblem::Malformed)?;
    let well_formed = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|host| !host.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none();
    if !well_formed {
        return Err(UrlProblem::Malformed);
    }
    if let Some(ip) = literal_ip(&url) {
        allowed.check(ip).map_err(UrlProblem::Refused)?;
    }
    Ok(url)
}

/// Whether a redirect from a call on `base` (the connection's API URL) to `to` may be followed:
/// to the API's own origin, never to an http URL from an https API, nor to a URL carrying
/// credentials. An archive download may also go to a host beside the API's in its domain over
/// the default port (GitHub sends `api.github.com`'s tarballs from `codeload.github.com`; an
/// Enterprise Server's API host `ghe.corp.example` from `codeload.ghe.corp.example`), never to
/// a literal IP or out of a domain of one label (`gitlab.com` has no such neighbours). Each hop
/// is checked again for the addresses it reaches, and the token goes only to the API's origin.
pub(super) fn may_follow(base: &Url, to: &Url, download: bool) -> bool {
    let scheme_ok = match base.scheme() {
        "https" => to.scheme() == "https",
        _ => matches!(to.scheme(), "http" | "https"),
    };
    if !scheme_ok || !to.username().is_empty() || to.password().is_some() {
        return false;
    }
    if to.origin() == base.origin() {
        return true;
    }
    let (Some(from), Some(host)) = (base.host_str(), to.host_str()) else { return false };
    if literal_ip(base).is_some() || literal_ip(to).is_some() {
        return false;
    }
    let Some((_, domain)) = from.split_once('.') else { return false };
    download && domain.contains('.') && to.port().is_none() && host.ends_with(&format!(".{domain}"))
}

/// Resolves host names, then keeps only the addresses [`AllowedNetworks`] accepts; refuses the
/// name when none is left.
struct CheckedResolver(Arc<AllowedNetworks>);

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allowed = Arc::clone(&self.0);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.take(MAX_ADDRESSES).collect();
            let (kept, refused): (Vec<SocketAddr>, Vec<Refused>) =
                found.into_iter().fold((Vec::new(), Vec::new()), |(mut kept, mut refused), address| {
                    match allowed.check(address.ip()) {
                        Ok(()) => kept.push(address),
                        Err(why) => refused.push(why),
                    }
                    (kept, refused)
                });
            let shown: Vec<String> = refused.iter().map(ToString::to_string).collect();
            if let Some(first) = refused.first().filter(|_| kept.is_empty()) {
                tracing::warn!(host, refused = ?shown, "VCS call refused: the host resolves only to addresses outside HANGAR_VCS_ALLOWED_NETWORKS");
                return Err(Box::new(*first) as Box<dyn std::error::Error + Send + Sync>);
            }
            if !refused.is_empty() {
                tracing::warn!(host, refused = ?shown, "VCS call: skipping the host's addresses outside HANGAR_VCS_ALLOWED_NETWORKS");
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(raw: &str) -> Url {
        Url::parse(raw).unwrap()
    }

    #[test]
    fn a_connection_url_is_absolute_http_without_credentials_query_or_fragment() {
        let none = AllowedNetworks::default();
        for good in ["https://api.github.com", "http://git.example:8080/api/v4/", "https://8.8.8.8/api/v3"] {
            assert!(check_url(good, &none).is_ok(), "{good}");
        }
        for bad in [
            "git.example",
            "ftp://git.example",
            "https://u:p@git.example",
            "https://token@git.example",
            "https://git.example/api?x=1",
            "https://git.example/api?",
            "https://git.example/api#top",
            "file:///etc/passwd",
        ] {
            assert_eq!(check_url(bad, &none).unwrap_err(), UrlProblem::Malformed, "{bad}");
        }
    }

    #[test]
    fn a_connection_url_at_a_refused_literal_address_is_refused_unless_allowed() {
        let none = AllowedNetworks::default();
        for bad in [
            "http://127.0.0.1:8080",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://[::ffff:7f00:1]/",
            "http://[fe80::1]/",
            "http://169.254.169.254/latest",
        ] {
            assert!(matches!(check_url(bad, &none), Err(UrlProblem::Refused(_))), "{bad}");
        }
        let loopback = AllowedNetworks::parse("127.0.0.0/8").unwrap();
        assert!(check_url("http://127.0.0.1:8080/api/v3", &loopback).is_ok());
        assert!(check_url("http://localhost:8080", &none).is_ok(), "a host name is checked when used");
    }

    #[test]
    fn redirects_stay_on_the_api_s_origin_except_downloads_to_a_neighbour_host() {
        let github = url("https://api.github.com");
        let codeload = url("https://codeload.github.com/acme/vpc/legacy.tar.gz/v1.0.0?token=x");
        assert!(may_follow(&github, &url("https://api.github.com/repositories/1/tarball/v1"), false));
        assert!(may_follow(&github, &codeload, true));
        assert!(!may_follow(&github, &codeload, false), "API calls stay on the API's origin");
        for elsewhere in [
            "https://evil.example/x",
            "https://github.com.evil.example/x",
            "http://codeload.github.com/x",
            "https://codeload.github.com:8443/x",
            "https://user@codeload.github.com/x",
            "https://api.github.com:444/x",
            "https://127.0.0.1/x",
        ] {
            assert!(!may_follow(&github, &url(elsewhere), true), "{elsewhere}");
        }
        let ghe = url("https://ghe.corp.example/api/v3");
        assert!(may_follow(&ghe, &url("https://codeload.ghe.corp.example/x"), true));
        let gitlab = url("https://gitlab.com/api/v4");
        assert!(!may_follow(&gitlab, &url("https://other.com/x"), true), "no neighbours in a one-label domain");
        let local = url("http://127.0.0.1:8080/api/v3");
        assert!(may_follow(&local, &url("http://127.0.0.1:8080/codeload/x"), true));
        assert!(!may_follow(&local, &url("https://127.0.0.1:8080/x"), false));
        assert!(!may_follow(&local, &url("http://localhost:8080/codeload/x"), true));
        assert!(!may_follow(&local, &url("http://127.0.0.1:9090/codeload/x"), true));
    }
}
