//! Webhook deliveries: proving one came from the provider (GitHub signs the body with the
//! hook's secret, GitLab echoes the secret as a token) and reading which new tag it announces,
//! so that a tag pushed to a connected repository publishes a module version.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ServiceProvider;

/// Whether `header` (`X-Hub-Signature-256: sha256=<hex>`) is the HMAC-SHA256 of `body` under
/// `secret`, compared in constant time. An empty secret proves nothing and verifies nothing.
pub fn verify_github_signature(secret: &str, body: &[u8], header: Option<&str>) -> bool {
    let Some(signature) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else { return false };
    let Ok(signature) = hex::decode(signature) else { return false };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else { return false };
    mac.update(body);
    !secret.is_empty() && mac.verify_slice(&signature).is_ok()
}

/// Whether `header` (`X-Gitlab-Token`) is `secret`. Digests are compared, in constant time, so
/// that neither content nor length leaks. An empty secret verifies nothing.
pub fn verify_gitlab_token(secret: &str, header: Option<&str>) -> bool {
    let Some(token) = header else { return false };
    let (expected, given) = (Sha256::digest(secret.as_bytes()), Sha256::digest(token.as_bytes()));
    !secret.is_empty() && bool::from(expected.ct_eq(&given))
}

/// The tag a delivery announces, if it announces a new one, as (tag name, commit SHA):
/// GitHub `push` events creating `refs/tags/<name>` and `create` events of a tag, GitLab `Tag
/// Push Hook`s with a non-zero `after`. `event_header` is `X-GitHub-Event` or `X-Gitlab-Event`;
/// without it the event is told from the body. For annotated tags the SHA is the tagged commit's
/// (`head_commit`, `checkout_sha`), not the tag object's. GitHub's `create` events carry no SHA:
/// theirs is empty, for the caller to resolve through the tag list.
pub fn tag_from_delivery(
    provider: &ServiceProvider,
    event_header: Option<&str>,
    body: &Value,
) -> Option<(String, String)> {
    if provider.is_gitlab() {
        gitlab_tag(event_header, body)
    } else {
        github_tag(event_header, body)
    }
}

fn github_tag(event: Option<&str>, body: &Value) -> Option<(String, String)> {
    let event = event.unwrap_or(if body.get("ref_type").is_some() { "create" } else { "push" });
    let git_ref = body.get("ref")?.as_str()?;
    match event {
        "create" if body.get("ref_type")?.as_str()? == "tag" => Some((git_ref.to_owned(), String::new())),
        "push" => {
            let name = git_ref.strip_prefix("refs/tags/")?;
            let created = body.get("created").and_then(Value::as_bool) == Some(true);
            let deleted = body.get("deleted").and_then(Value::as_bool) == Some(true);
            let commit = body.pointer("/head_commit/id").and_then(Value::as_str);
            let sha = commit.or_else(|| body.get("after")?.as_str()).filter(|sha| !is_zero(sha))?;
            (created && !deleted).then(|| (name.to_owned(), sha.to_owned()))
        }
        _ => None,
    }
}

fn gitlab_tag(event: Option<&str>, body: &Value) -> Option<(String, String)> {
    let kind = body.get("object_kind").and_then(Value::as_str);
    if event.map_or(kind != Some("tag_push"), |event| event != "Tag Push Hook") {
        return None;
    }
    let name = body.get("ref")?.as_str()?.strip_prefix("refs/tags/")?;
    let after = body.get("after")?.as_str().filter(|sha| !is_zero(sha))?;
    let sha = body.get("checkout_sha").and_then(Value::as_str).unwrap_or(after);
    Some((name.to_owned(), sha.to_owned()))
}

/// Git's all-zero SHA, which stands for "no commit" (a deleted ref).
fn is_zero(sha: &str) -> bool {
    sha.bytes().all(|b| b == b'0')
}
