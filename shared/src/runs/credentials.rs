//! What cloud credentials a run phase asks for, read from its workspace's environment variables
//! as HCP Terraform reads them ("dynamic provider credentials"): `TFC_AWS_*` (a role AWS trusts
//! the run's identity token for), `TFC_VAULT_*` (a Vault JWT role, Hangar's broker by default)
//! and `TFC_VAULT_BACKED_AWS_*` (the AWS engine behind it), `TFC_WORKLOAD_IDENTITY_AUDIENCE`
//! (a bare token). Each may also come tagged (`TFC_AWS_PROVIDER_AUTH_<TAG>` and its
//! `_<TAG>` variables), one configuration per tag, and a setting missing from a configuration
//! is taken from its `TFC_DEFAULT_*` form. What is asked for but incomplete is refused here,
//! with the variable to set, before any token is signed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::{Result, RunsError};
use super::record::Phase;
use crate::accounts::variables::{Category, RunVariable};
use crate::api::Field;

/// HCP's default audiences.
pub const AWS_AUDIENCE: &str = "aws.workload.identity";
pub const VAULT_AUDIENCE: &str = "vault.workload.identity";
/// The Vault auth method's path and the AWS engine's mount when the variables name none.
const DEFAULT_AUTH_PATH: &str = "jwt";
const DEFAULT_AWS_MOUNT: &str = "aws";
/// Most configurations of one kind a workspace may ask for (the untagged one and its tags).
pub const MAX_CONFIGURATIONS: usize = 8;
const MAX_VALUE_BYTES: usize = 2048;
const MAX_CACERT_BYTES: usize = 64 * 1024;

/// A configuration's tag: `None` for the default one.
pub type Tag = Option<String>;

/// Credentials from an AWS role that trusts the run's identity token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsRole {
    pub tag: Tag,
    pub role_arn: String,
    pub audience: String,
}

/// A Vault JWT login with the run's identity token, and what it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultLogin {
    pub tag: Tag,
    /// `None`: this Hangar's broker.
    pub address: Option<String>,
    pub namespace: Option<String>,
    pub auth_path: String,
    pub role: String,
    pub audience: String,
    /// `TFC_VAULT_ENCODED_CACERT`: a base64 PEM bundle the agent trusts for this Vault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoded_cacert: Option<String>,
    /// AWS credentials from the Vault's AWS secrets engine, with the login's token.
    pub aws: Option<VaultBackedAws>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultBackedAws {
    /// `iam_user` (`creds/<role>`), `assumed_role` or `federation_token` (`sts/<role>`).
    pub auth_type: String,
    pub mount_path: String,
    pub vault_role: String,
    pub role_arn: Option<String>,
    /// Seconds to wait after getting them (IAM is eventually consistent), at most 1500.
    pub sleep_seconds: u64,
}

/// A bare identity token, for the configuration to use as it likes
/// (`TFC_WORKLOAD_IDENTITY_TOKEN`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BareToken {
    pub tag: Tag,
    pub audience: String,
}

/// Everything a phase asks for; empty for a workspace that asks for nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requested {
    pub aws: Vec<AwsRole>,
    pub vault: Vec<VaultLogin>,
    pub tokens: Vec<BareToken>,
}

impl Requested {
    pub fn is_empty(&self) -> bool {
        self.aws.is_empty() && self.vault.is_empty() && self.tokens.is_empty()
    }
}

/// What `variables` (the workspace's, as the run sees them) ask of `phase`.
pub fn requested(variables: &[RunVariable], phase: Phase) -> Result<Requested> {
    let env = Env::of(variables);
    let phase_name = match phase {
        Phase::Plan => "PLAN",
        Phase::Apply => "APPLY",
    };
    let mut requested = Requested::default();
    for tag in env.enabled("TFC_AWS_PROVIDER_AUTH")? {
        let role_arn = env.phase_value("TFC_AWS", phase_name, "ROLE_ARN", &tag)?;
        let role_arn = role_arn.ok_or_else(|| missing(&format!("TFC_AWS_RUN_ROLE_ARN{}", suffix(&tag))))?;
        if !role_arn.starts_with("arn:") {
            return Err(invalid(format!("TFC_AWS_RUN_ROLE_ARN{}: `{role_arn}` is not an ARN", suffix(&tag))));
        }
        let audience = env.value("TFC_AWS_WORKLOAD_IDENTITY_AUDIENCE", &tag)?.unwrap_or_else(|| AWS_AUDIENCE.into());
        requested.aws.push(AwsRole { tag, role_arn, audience });
    }
    for tag in env.enabled("TFC_VAULT_PROVIDER_AUTH")? {
        let role = env.phase_value("TFC_VAULT", phase_name, "ROLE", &tag)?;
        let role = role.ok_or_else(|| missing(&format!("TFC_VAULT_RUN_ROLE{}", suffix(&tag))))?;
        let address = env.value("TFC_VAULT_ADDR", &tag)?;
        if let Some(address) = &address {
            if !(address.starts_with("https://") || address.starts_with("http://")) {
                return Err(invalid(format!("TFC_VAULT_ADDR{}: `{address}` is not an http(s) URL", suffix(&tag))));
            }
        }
        let auth_path = env.value("TFC_VAULT_AUTH_PATH", &tag)?.unwrap_or_else(|| DEFAULT_AUTH_PATH.into());
        let encoded_cacert = env.value_up_to("TFC_VAULT_ENCODED_CACERT", &tag, MAX_CACERT_BYTES)?;
        requested.vault.push(VaultLogin {
            address,
            namespace: env.value("TFC_VAULT_NAMESPACE", &tag)?,
            auth_path: auth_path.trim_matches('/').to_owned(),
            role,
            audience: env.value("TFC_VAULT_WORKLOAD_IDENTITY_AUDIENCE", &tag)?.unwrap_or_else(|| VAULT_AUDIENCE.into()),
            encoded_cacert,
            aws: None,
            tag,
        });
    }
    for tag in env.enabled("TFC_VAULT_BACKED_AWS_AUTH")? {
        // The Vault configuration it logs in with: its own tag's, or the one it names.
        let vault_tag = match env.value("TFC_VAULT_BACKED_AWS_VAULT_CONFIG", &tag)? {
            Some(named) => Some(named),
            None => tag.clone(),
        };
        let Some(login) = requested.vault.iter_mut().find(|login| login.tag == vault_tag) else {
            return Err(invalid(format!(
                "TFC_VAULT_BACKED_AWS_AUTH{0} needs Vault's configuration: set TFC_VAULT_PROVIDER_AUTH{1} and its role",
                suffix(&tag),
                suffix(&vault_tag)
            )));
        };
        if login.aws.is_some() {
            return Err(invalid(format!(
                "two TFC_VAULT_BACKED_AWS_AUTH configurations use the Vault configuration{}",
                suffix(&vault_tag)
            )));
        }
        let auth_type = env.value("TFC_VAULT_BACKED_AWS_AUTH_TYPE", &tag)?;
        let auth_type = auth_type.ok_or_else(|| missing(&format!("TFC_VAULT_BACKED_AWS_AUTH_TYPE{}", suffix(&tag))))?;
        if !matches!(auth_type.as_str(), "iam_user" | "assumed_role" | "federation_token") {
            return Err(invalid(format!(
                "TFC_VAULT_BACKED_AWS_AUTH_TYPE{}: `{auth_type}` is not one of iam_user, assumed_role, federation_token",
                suffix(&tag)
            )));
        }
        let vault_role = env.phase_value("TFC_VAULT_BACKED_AWS", phase_name, "VAULT_ROLE", &tag)?;
        let vault_role =
            vault_role.ok_or_else(|| missing(&format!("TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE{}", suffix(&tag))))?;
        let role_arn = env.phase_value("TFC_VAULT_BACKED_AWS", phase_name, "ROLE_ARN", &tag)?;
        if auth_type == "assumed_role" && role_arn.is_none() {
            return Err(missing(&format!("TFC_VAULT_BACKED_AWS_RUN_ROLE_ARN{}", suffix(&tag))));
        }
        let mount_path =
            env.value("TFC_VAULT_BACKED_AWS_MOUNT_PATH", &tag)?.unwrap_or_else(|| DEFAULT_AWS_MOUNT.into());
        let sleep_seconds = match env.value("TFC_VAULT_BACKED_AWS_SLEEP_SECONDS", &tag)? {
            None => 0,
            Some(raw) => raw.parse::<u64>().ok().filter(|s| *s <= 1500).ok_or_else(|| {
                invalid(format!(
                    "TFC_VAULT_BACKED_AWS_SLEEP_SECONDS{}: a whole number of seconds up to 1500",
                    suffix(&tag)
                ))
            })?,
        };
        login.aws = Some(VaultBackedAws {
            auth_type,
            mount_path: mount_path.trim_matches('/').to_owned(),
            vault_role,
            role_arn,
            sleep_seconds,
        });
    }
    for tag in env.tags("TFC_WORKLOAD_IDENTITY_AUDIENCE")? {
        if let Some(audience) = env.value("TFC_WORKLOAD_IDENTITY_AUDIENCE", &tag)? {
            requested.tokens.push(BareToken { tag, audience });
        }
    }
    let default_aws = requested.aws.iter().any(|a| a.tag.is_none());
    let default_vault_aws = requested.vault.iter().any(|v| v.tag.is_none() && v.aws.is_some());
    if default_aws && default_vault_aws {
        return Err(invalid(
            "TFC_AWS_PROVIDER_AUTH and TFC_VAULT_BACKED_AWS_AUTH both give the default AWS credentials: tag one of them",
        ));
    }
    Ok(requested)
}

/// The workspace's environment variables by name.
struct Env<'a>(BTreeMap<&'a str, &'a str>);

impl<'a> Env<'a> {
    fn of(variables: &'a [RunVariable]) -> Self {
        Env(variables
            .iter()
            .filter(|v| v.category == Category::Env)
            .map(|v| (v.key.as_str(), v.value.as_str()))
            .collect())
    }

    /// The tags of `name`'s configurations: `None` for `name` itself, `Some(tag)` for `name_<tag>`
    /// (letters, digits and `_`; `TYPE` is HCP's reserved word, so `..._AUTH_TYPE` is no tag).
    fn tags(&self, name: &str) -> Result<Vec<Tag>> {
        let tagged = format!("{name}_");
        let mut tags = Vec::new();
        for key in self.0.keys() {
            if *key == name {
                tags.push(None);
            } else if let Some(tag) = key.strip_prefix(&tagged) {
                let valid = tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if valid && tag != "TYPE" && !tag.starts_with("TYPE_") {
                    tags.push(Some(tag.to_owned()));
                }
            }
        }
        if tags.len() > MAX_CONFIGURATIONS {
            return Err(invalid(format!("{name}: at most {MAX_CONFIGURATIONS} configurations (tags) per workspace")));
        }
        Ok(tags)
    }

    /// The tags whose `name` (a switch, which has no `TFC_DEFAULT_` form) is `true`.
    fn enabled(&self, name: &str) -> Result<Vec<Tag>> {
        let mut enabled = Vec::new();
        for tag in self.tags(name)? {
            let key = format!("{name}{}", suffix(&tag));
            if self.0.get(key.as_str()).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
                enabled.push(tag);
            }
        }
        Ok(enabled)
    }

    fn value(&self, name: &str, tag: &Tag) -> Result<Option<String>> {
        self.value_up_to(name, tag, MAX_VALUE_BYTES)
    }

    /// `name` with `tag`'s suffix, else its `TFC_DEFAULT_` form, trimmed; `None` when neither is
    /// set (or both are empty).
    fn value_up_to(&self, name: &str, tag: &Tag, most: usize) -> Result<Option<String>> {
        let own = format!("{name}{}", suffix(tag));
        let fallback = name.strip_prefix("TFC_").map(|rest| format!("TFC_DEFAULT_{rest}"));
        let set = |key: &str| self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let found = set(&own).map(|v| (own.clone(), v));
        let found = found.or_else(|| fallback.as_deref().and_then(|key| set(key).map(|v| (key.to_owned(), v))));
        let Some((key, value)) = found else {
            return Ok(None);
        };
        if value.len() > most {
            return Err(invalid(format!("{key} holds at most {most} bytes")));
        }
        Ok(Some(value.to_owned()))
    }

    /// `<prefix>_<PHASE>_<what>`, else `<prefix>_RUN_<what>`: HCP's phase-specific setting first.
    fn phase_value(&self, prefix: &str, phase: &str, what: &str, tag: &Tag) -> Result<Option<String>> {
        match self.value(&format!("{prefix}_{phase}_{what}"), tag)? {
            Some(value) => Ok(Some(value)),
            None => self.value(&format!("{prefix}_RUN_{what}"), tag),
        }
    }
}

fn suffix(tag: &Tag) -> String {
    tag.as_ref().map(|t| format!("_{t}")).unwrap_or_default()
}

fn invalid(detail: impl Into<String>) -> RunsError {
    RunsError::invalid(Field::Member("variables"), detail)
}

fn missing(variable: &str) -> RunsError {
    invalid(format!("dynamic credentials are asked for but {variable} is not set"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<RunVariable> {
        pairs
            .iter()
            .map(|(k, v)| RunVariable {
                key: (*k).into(),
                value: (*v).into(),
                category: Category::Env,
                hcl: false,
                sensitive: false,
            })
            .collect()
    }

    #[test]
    fn a_phase_role_wins_over_the_run_role_and_audiences_default_as_hcp_s() {
        let vars = env(&[
            ("TFC_AWS_PROVIDER_AUTH", "true"),
            ("TFC_AWS_RUN_ROLE_ARN", "arn:aws:iam::1:role/run"),
            ("TFC_AWS_APPLY_ROLE_ARN", "arn:aws:iam::1:role/apply"),
        ]);
        let plan = requested(&vars, Phase::Plan).unwrap();
        assert_eq!(plan.aws[0].role_arn, "arn:aws:iam::1:role/run");
        assert_eq!(plan.aws[0].audience, AWS_AUDIENCE);
        assert_eq!(requested(&vars, Phase::Apply).unwrap().aws[0].role_arn, "arn:aws:iam::1:role/apply");
    }

    #[test]
    fn tagged_configurations_stand_beside_the_default_one() {
        let vars = env(&[
            ("TFC_AWS_PROVIDER_AUTH", "true"),
            ("TFC_AWS_RUN_ROLE_ARN", "arn:aws:iam::1:role/a"),
            ("TFC_AWS_PROVIDER_AUTH_PROD", "TRUE"),
            ("TFC_AWS_RUN_ROLE_ARN_PROD", "arn:aws:iam::2:role/b"),
            ("TFC_AWS_WORKLOAD_IDENTITY_AUDIENCE_PROD", "prod"),
        ]);
        let aws = requested(&vars, Phase::Plan).unwrap().aws;
        assert_eq!(aws.len(), 2);
        let prod = aws.iter().find(|a| a.tag.as_deref() == Some("PROD")).unwrap();
        assert_eq!((prod.role_arn.as_str(), prod.audience.as_str()), ("arn:aws:iam::2:role/b", "prod"));
    }

    #[test]
    fn nothing_asked_is_nothing_given_and_what_is_incomplete_is_refused() {
        assert!(requested(&env(&[("AWS_REGION", "eu-west-1")]), Phase::Plan).unwrap().is_empty());
        assert!(requested(&env(&[("TFC_AWS_PROVIDER_AUTH", "false")]), Phase::Plan).unwrap().is_empty());
        let err = requested(&env(&[("TFC_AWS_PROVIDER_AUTH", "true")]), Phase::Plan).unwrap_err();
        assert!(err.to_string().contains("TFC_AWS_RUN_ROLE_ARN"), "{err}");
        let backed = env(&[("TFC_VAULT_BACKED_AWS_AUTH", "true"), ("TFC_VAULT_BACKED_AWS_AUTH_TYPE", "iam_user")]);
        assert!(requested(&backed, Phase::Plan).unwrap_err().to_string().contains("TFC_VAULT_PROVIDER_AUTH"));
    }

    #[test]
    fn vault_backed_aws_reads_hcp_s_variables_with_their_defaults() {
        let vars = env(&[
            ("TFC_VAULT_PROVIDER_AUTH", "true"),
            ("TFC_VAULT_RUN_ROLE", "tfc"),
            ("TFC_VAULT_BACKED_AWS_AUTH", "true"),
            ("TFC_VAULT_BACKED_AWS_AUTH_TYPE", "assumed_role"),
            ("TFC_VAULT_BACKED_AWS_RUN_VAULT_ROLE", "deploy"),
            ("TFC_VAULT_BACKED_AWS_RUN_ROLE_ARN", "arn:aws:iam::1:role/deploy"),
        ]);
        let vault = &requested(&vars, Phase::Apply).unwrap().vault[0];
        assert_eq!((vault.auth_path.as_str(), vault.audience.as_str()), ("jwt", VAULT_AUDIENCE));
        assert_eq!(vault.address, None);
        let aws = vault.aws.as_ref().unwrap();
        assert_eq!((aws.mount_path.as_str(), aws.vault_role.as_str()), ("aws", "deploy"));
        assert_eq!(aws.role_arn.as_deref(), Some("arn:aws:iam::1:role/deploy"));
        let mut bad_type = vars.clone();
        bad_type[3].value = "root".into();
        assert!(requested(&bad_type, Phase::Plan).unwrap_err().to_string().contains("iam_user"));
        assert_eq!(requested(&vars, Phase::Plan).unwrap().tokens, vec![], "AUTH_TYPE names no tag");
    }

    #[test]
    fn a_tfc_default_setting_fills_what_a_configuration_leaves_unset() {
        let vars = env(&[
            ("TFC_AWS_PROVIDER_AUTH_A", "true"),
            ("TFC_AWS_PROVIDER_AUTH_B", "true"),
            ("TFC_AWS_RUN_ROLE_ARN_A", "arn:aws:iam::1:role/a"),
            ("TFC_DEFAULT_AWS_RUN_ROLE_ARN", "arn:aws:iam::1:role/shared"),
        ]);
        let aws = requested(&vars, Phase::Plan).unwrap().aws;
        let arns: Vec<&str> = aws.iter().map(|a| a.role_arn.as_str()).collect();
        assert_eq!(arns, ["arn:aws:iam::1:role/a", "arn:aws:iam::1:role/shared"]);
    }
}
