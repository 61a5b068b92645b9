//! `auth/<path>/config`: where a JWT method finds the keys that sign the tokens it accepts
//! (exactly one of an OIDC discovery URL, a JWKS URL, or PEM public keys) and whose issuer they
//! must name.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::broker::error::{BrokerError, Result};
use crate::store::{keys, Condition, Item, ItemStore};

/// Most PEM keys a configuration lists, and the algorithms it may name.
const MAX_PUBKEYS: usize = 16;
const MAX_TEXT_BYTES: usize = 16 * 1024;
/// The algorithms a token may be signed with (never `none`), Vault's list.
pub const ALGORITHMS: &[&str] = &["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "PS384", "PS512", "EdDSA"];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JwtConfig {
    pub oidc_discovery_url: Option<String>,
    pub jwks_url: Option<String>,
    #[serde(default)]
    pub jwt_validation_pubkeys: Vec<String>,
    pub bound_issuer: Option<String>,
    #[serde(default)]
    pub jwt_supported_algs: Vec<String>,
    pub default_role: Option<String>,
}

impl JwtConfig {
    /// Reads a configuration write, refusing what the broker cannot honour.
    pub fn parse(body: &Map<String, Value>) -> Result<Self> {
        for (field, value) in body {
            let known = matches!(
                field.as_str(),
                "oidc_discovery_url"
                    | "jwks_url"
                    | "jwt_validation_pubkeys"
                    | "bound_issuer"
                    | "jwt_supported_algs"
                    | "default_role"
                    | "oidc_discovery_ca_pem"
                    | "jwks_ca_pem"
                    | "oidc_client_id"
                    | "oidc_client_secret"
                    | "oidc_response_mode"
                    | "oidc_response_types"
                    | "provider_config"
                    | "namespace_in_state"
            );
            if !known {
                return Err(BrokerError::invalid(format!(
                    "{field} is not a setting of this broker's JWT auth method (OIDC flows are not offered)"
                )));
            }
            if matches!(field.as_str(), "oidc_discovery_ca_pem" | "jwks_ca_pem") && !is_empty(value) {
                return Err(BrokerError::invalid(format!(
                    "{field} is not supported: Hangar trusts the platform's certificate authorities"
                )));
            }
            let oidc_flow = matches!(
                field.as_str(),
                "oidc_client_id"
                    | "oidc_client_secret"
                    | "oidc_response_mode"
                    | "oidc_response_types"
                    | "provider_config"
            );
            let set = match value {
                Value::Array(items) => !items.is_empty(),
                Value::Object(map) => !map.is_empty(),
                other => !is_empty(other),
            };
            if oidc_flow && set {
                return Err(BrokerError::invalid(format!(
                    "{field} is not offered: the broker's JWT method logs in with JWTs, not browser OIDC flows"
                )));
            }
        }
        let config = JwtConfig {
            oidc_discovery_url: text(body, "oidc_discovery_url")?,
            jwks_url: text(body, "jwks_url")?,
            jwt_validation_pubkeys: list(body, "jwt_validation_pubkeys")?,
            bound_issuer: text(body, "bound_issuer")?,
            jwt_supported_algs: list(body, "jwt_supported_algs")?,
            default_role: text(body, "default_role")?,
        };
        let sources =
            [config.oidc_discovery_url.is_some(), config.jwks_url.is_some(), !config.jwt_validation_pubkeys.is_empty()];
        if sources.iter().filter(|set| **set).count() != 1 {
            return Err(BrokerError::invalid(
                "exactly one of 'jwt_validation_pubkeys', 'jwks_url' or 'oidc_discovery_url' must be set",
            ));
        }
        if config.jwt_validation_pubkeys.len() > MAX_PUBKEYS {
            return Err(BrokerError::invalid(format!("at most {MAX_PUBKEYS} jwt_validation_pubkeys")));
        }
        for pem in &config.jwt_validation_pubkeys {
            super::keys::from_pem(pem).map_err(|e| BrokerError::invalid(format!("error parsing public key: {e}")))?;
        }
        if let Some(alg) = config.jwt_supported_algs.iter().find(|a| !ALGORITHMS.contains(&a.as_str())) {
            return Err(BrokerError::invalid(format!("invalid jwt_supported_algs: {alg}")));
        }
        Ok(config)
    }

    pub fn describe(&self) -> Value {
        json!({
            "oidc_discovery_url": self.oidc_discovery_url.clone().unwrap_or_default(),
            "oidc_discovery_ca_pem": "",
            "jwks_url": self.jwks_url.clone().unwrap_or_default(),
            "jwks_ca_pem": "",
            "jwt_validation_pubkeys": self.jwt_validation_pubkeys,
            "bound_issuer": self.bound_issuer.clone().unwrap_or_default(),
            "jwt_supported_algs": self.jwt_supported_algs,
            "default_role": self.default_role.clone().unwrap_or_default(),
            "oidc_client_id": "",
            "oidc_response_mode": "",
            "oidc_response_types": [],
            "provider_config": {},
            "namespace_in_state": true,
        })
    }
}

pub async fn load(store: &dyn ItemStore, method_uuid: &str) -> Result<Option<JwtConfig>> {
    let item = store.get(&keys::mount_config(method_uuid, "jwt")).await?;
    Ok(item.map(|item| item.parse()).transpose()?)
}

pub async fn save(store: &dyn ItemStore, method_uuid: &str, config: &JwtConfig) -> Result<()> {
    let item = Item::from_value(keys::mount_config(method_uuid, "jwt"), config)?;
    store.put(item, Condition::Always).await?;
    Ok(())
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.trim().is_empty(),
        _ => false,
    }
}

/// A string field; `None` when absent or empty.
pub(super) fn text(body: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) if text.len() > MAX_TEXT_BYTES => {
            Err(BrokerError::invalid(format!("{name} holds at most {MAX_TEXT_BYTES} bytes")))
        }
        Some(Value::String(text)) => Ok(Some(text.trim().to_owned())),
        Some(_) => Err(BrokerError::invalid(format!("{name} must be a string"))),
    }
}

/// A list of strings, as Vault's comma-string-slice reads one: a JSON list, or one string of
/// comma-separated values.
pub(super) fn list(body: &Map<String, Value>, name: &str) -> Result<Vec<String>> {
    let items: Vec<String> = match body.get(name) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(text)) if name == "jwt_validation_pubkeys" => vec![text.clone()],
        Some(Value::String(text)) => text.split(',').map(str::to_owned).collect(),
        Some(Value::Array(values)) => values
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| BrokerError::invalid(format!("{name} must be a list of strings")))?,
        Some(_) => return Err(BrokerError::invalid(format!("{name} must be a list of strings"))),
    };
    let items: Vec<String> = items.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    if items.len() > 64 || items.iter().any(|s| s.len() > MAX_TEXT_BYTES) {
        return Err(BrokerError::invalid(format!("{name} holds at most 64 values of {MAX_TEXT_BYTES} bytes")));
    }
    Ok(items)
}
