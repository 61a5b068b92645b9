//! A job's dynamic credentials, as HCP Terraform's agent gives them to Terraform: the phase's
//! identity tokens Hangar signed (in the job's spec) become files in the job's directory, and
//! the settings that point the AWS SDK and the Vault provider at them; a Vault login (Hangar's
//! broker by default) is made with its token, the AWS engine asked for keys when the workspace
//! says so, and the login revoked, with its leases, when the phase ends. Nothing of it is logged
//! but where it came from; the files go with the job's directory.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::client::Client;

/// The agent's own settings the AWS SDK would otherwise take credentials from ahead of, or
/// instead of, what is given here: static keys, profiles, a web identity of the host's (EKS's
/// IRSA), a container's credentials endpoint.
const AWS_STATIC_SETTINGS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
];

/// What the job's Terraform gets, and what to undo when the phase ends.
#[derive(Default)]
pub struct Prepared {
    pub env: Vec<(String, String)>,
    /// Inherited settings Terraform must not see (static AWS keys that would win).
    pub hidden: Vec<String>,
    /// Lines for the job's log: where each credential came from.
    pub notes: Vec<String>,
    logins: Vec<VaultLogin>,
}

struct VaultLogin {
    vault: Client,
    address: String,
    namespace: Option<String>,
    token: String,
}

/// Writes the job's credentials under `dir` (made here, the owner's alone) and the Terraform
/// variables HCP fills in beside the configuration (`terraform_dir`).
/// A failure part way revokes the Vault logins already made.
pub async fn prepare(client: &Client, dir: &Path, terraform_dir: &Path, given: &Value) -> Result<Prepared, String> {
    let mut prepared = Prepared::default();
    match prepare_into(&mut prepared, client, dir, terraform_dir, given).await {
        Ok(()) => Ok(prepared),
        Err(why) => {
            release(prepared).await;
            Err(why)
        }
    }
}

async fn prepare_into(
    prepared: &mut Prepared,
    client: &Client,
    dir: &Path,
    terraform_dir: &Path,
    given: &Value,
) -> Result<(), String> {
    let empty = Vec::new();
    let list = |name: &str| given[name].as_array().unwrap_or(&empty).clone();
    let (aws, vault, bare) = (list("aws"), list("vault"), list("identity-tokens"));
    if aws.is_empty() && vault.is_empty() && bare.is_empty() {
        return Ok(());
    }
    create_private_dir(dir).map_err(|e| format!("the credentials directory could not be made: {e}"))?;
    let mut variables = Map::new();
    let mut aws_aliases = Map::new();
    for config in &aws {
        let tag = config["tag"].as_str();
        let name = file_stem("aws", tag);
        let token_file = write_secret(dir, &format!("{name}.token"), text(config, "token")?)?;
        let role_arn = text(config, "role-arn")?;
        let session = text(config, "session-name")?;
        let shared_config = format!(
            "[default]\nrole_arn = {role_arn}\nweb_identity_token_file = {}\nrole_session_name = {session}\n",
            token_file.display()
        );
        let config_file = write_secret(dir, &format!("{name}.config"), &shared_config)?;
        let entry = json!({ "shared_config_file": config_file });
        match tag {
            None => {
                prepared.env.push(("AWS_ROLE_ARN".into(), role_arn.into()));
                prepared.env.push(("AWS_WEB_IDENTITY_TOKEN_FILE".into(), token_file.display().to_string()));
                prepared.env.push(("AWS_ROLE_SESSION_NAME".into(), session.into()));
                prepared.hidden.extend(AWS_STATIC_SETTINGS.iter().map(|s| s.to_string()));
                aws_aliases.insert(String::new(), entry);
            }
            Some(tag) => {
                aws_aliases.insert(tag.to_owned(), entry);
            }
        }
        prepared.notes.push(format!("Dynamic credentials{}: AWS role {role_arn}, by web identity", label(tag)));
    }
    if !aws_aliases.is_empty() {
        variables.insert("tfc_aws_dynamic_credentials".into(), with_default(aws_aliases, "shared_config_file"));
    }
    let mut vault_aliases = Map::new();
    let mut backed_aliases = Map::new();
    for config in &vault {
        let tag = config["tag"].as_str();
        let name = file_stem("vault", tag);
        let address = text(config, "address")?.trim_end_matches('/').to_owned();
        let namespace = config["namespace"].as_str().map(str::to_owned);
        let mut ca_cert_file = String::new();
        let extra_ca = match config["encoded-cacert"].as_str() {
            Some(encoded) => {
                use base64::Engine;
                let pem = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| format!("TFC_VAULT_ENCODED_CACERT{}: not base64", suffix(tag)))?;
                let file = write_secret(dir, &format!("{name}.ca.pem"), &String::from_utf8_lossy(&pem))?;
                ca_cert_file = file.display().to_string();
                Some(pem)
            }
            None => None,
        };
        let vault = client.for_vault(extra_ca.as_deref()).map_err(|e| e.to_string())?;
        let login_path = format!("/v1/auth/{}/login", text(config, "auth-path")?);
        let body = json!({ "role": text(config, "role")?, "jwt": text(config, "token")? });
        let answer = vault
            .vault_call(reqwest::Method::POST, &address, &login_path, None, namespace.as_deref(), Some(&body), &[])
            .await
            .map_err(|e| format!("Vault login at {address}{login_path} failed: {e}"))?;
        let token = answer["auth"]["client_token"].as_str().ok_or("Vault's login answered no token")?.to_owned();
        let login = VaultLogin { vault, address: address.clone(), namespace: namespace.clone(), token };
        let token_file = write_secret(dir, &format!("{name}.token"), &login.token)?;
        prepared.notes.push(format!(
            "Dynamic credentials{}: Vault token from {address} (auth/{}, role {})",
            label(tag),
            text(config, "auth-path")?,
            text(config, "role")?
        ));
        let entry = json!({
            "token_filename": token_file, "address": address,
            "namespace": namespace.clone().unwrap_or_default(), "ca_cert_file": ca_cert_file,
        });
        if tag.is_none() {
            prepared.env.push(("VAULT_ADDR".into(), address.clone()));
            prepared.env.push(("VAULT_TOKEN".into(), login.token.clone()));
            if let Some(namespace) = &namespace {
                prepared.env.push(("VAULT_NAMESPACE".into(), namespace.clone()));
            }
            if !ca_cert_file.is_empty() {
                prepared.env.push(("VAULT_CACERT".into(), ca_cert_file.clone()));
            }
        }
        vault_aliases.insert(tag.unwrap_or_default().to_owned(), entry);
        let backed = &config["aws"];
        let result = if backed.is_object() { backed_aws(&login, backed).await.map(Some) } else { Ok(None) };
        prepared.logins.push(login);
        let Some((keys, note)) = result? else { continue };
        let credentials = write_secret(dir, &format!("{name}-aws.credentials"), &keys)?;
        if tag.is_none() {
            prepared.env.push(("AWS_SHARED_CREDENTIALS_FILE".into(), credentials.display().to_string()));
            prepared.hidden.extend(AWS_STATIC_SETTINGS.iter().map(|s| s.to_string()));
        }
        backed_aliases.insert(tag.unwrap_or_default().to_owned(), json!({ "shared_credentials_file": credentials }));
        prepared.notes.push(format!("Dynamic credentials{}: AWS keys from {address}: {note}", label(tag)));
        let sleep = backed["sleep-seconds"].as_u64().unwrap_or(0).min(1500);
        if sleep > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(sleep)).await;
        }
    }
    if !vault_aliases.is_empty() {
        variables.insert("tfc_vault_dynamic_credentials".into(), with_default(vault_aliases, "token_filename"));
    }
    if !backed_aliases.is_empty() {
        variables.insert(
            "tfc_vault_backed_aws_dynamic_credentials".into(),
            with_default(backed_aliases, "shared_credentials_file"),
        );
    }
    for bare in &bare {
        let tag = bare["tag"].as_str();
        prepared.env.push((format!("TFC_WORKLOAD_IDENTITY_TOKEN{}", suffix(tag)), text(bare, "token")?.into()));
        prepared.notes.push(format!("Workload identity token{} for {}", label(tag), text(bare, "audience")?));
    }
    variables.retain(|_, v| !v.is_null());
    if !variables.is_empty() {
        let file = terraform_dir.join("zzz_hangar_dynamic_credentials.auto.tfvars.json");
        std::fs::write(&file, serde_json::to_vec_pretty(&Value::Object(variables)).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(())
}

/// AWS keys from the Vault's AWS engine with the login's token: `creds/<role>` for an IAM user,
/// `sts/<role>` (with the phase's role ARN) for the others. A shared credentials file's text,
/// and a note of where they came from.
async fn backed_aws(login: &VaultLogin, backed: &Value) -> Result<(String, String), String> {
    let mount = text(backed, "mount-path")?;
    let role = text(backed, "vault-role")?;
    let kind = text(backed, "auth-type")?;
    let (path, query) = match (kind, backed["role-arn"].as_str()) {
        ("iam_user", _) => (format!("/v1/{mount}/creds/{role}"), vec![]),
        (_, Some(arn)) => (format!("/v1/{mount}/sts/{role}"), vec![("role_arn", arn)]),
        (_, None) => (format!("/v1/{mount}/sts/{role}"), vec![]),
    };
    let token = Some(login.token.as_str());
    let answer = login
        .vault
        .vault_call(reqwest::Method::GET, &login.address, &path, token, login.namespace.as_deref(), None, &query)
        .await
        .map_err(|e| format!("Vault's AWS engine ({mount}/{role}) refused: {e}"))?;
    let data = &answer["data"];
    let (Some(access), Some(secret)) = (data["access_key"].as_str(), data["secret_key"].as_str()) else {
        return Err(format!("Vault's AWS engine ({mount}/{role}) answered no keys"));
    };
    let mut file = format!("[default]\naws_access_key_id = {access}\naws_secret_access_key = {secret}\n");
    if let Some(session) = data["security_token"].as_str().filter(|s| !s.is_empty()) {
        file.push_str(&format!("aws_session_token = {session}\n"));
    }
    Ok((file, format!("{kind} from {mount}/{role}")))
}

/// Revokes each Vault login the phase made, and with it every lease it holds.
pub async fn release(prepared: Prepared) -> Vec<String> {
    let mut failures = Vec::new();
    for login in prepared.logins {
        let revoked = login
            .vault
            .vault_call(
                reqwest::Method::POST,
                &login.address,
                "/v1/auth/token/revoke-self",
                Some(&login.token),
                login.namespace.as_deref(),
                None,
                &[],
            )
            .await;
        if let Err(e) = revoked {
            failures.push(format!("the Vault token from {} could not be revoked: {e}", login.address));
        }
    }
    failures
}

/// A Terraform variable of HCP's shape: `default` (the untagged configuration's, or one of
/// empty strings) and `aliases` by tag.
fn with_default(mut by_tag: Map<String, Value>, field: &str) -> Value {
    let default = by_tag.remove("").unwrap_or_else(|| json!({ field: "" }));
    let default = match (field, default) {
        ("token_filename", Value::Object(map)) if map.is_empty() => {
            json!({"token_filename": "", "address": "", "namespace": "", "ca_cert_file": ""})
        }
        (_, value) => value,
    };
    json!({ "default": default, "aliases": by_tag })
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Writes `body` to `dir/name`, the owner's alone.
fn write_secret(dir: &Path, name: &str, body: &str) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(body.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

fn text<'v>(value: &'v Value, name: &str) -> Result<&'v str, String> {
    value[name].as_str().ok_or_else(|| format!("the job's credentials lack `{name}`"))
}

fn file_stem(kind: &str, tag: Option<&str>) -> String {
    match tag {
        None => kind.to_owned(),
        Some(tag) => format!("{kind}-{tag}"),
    }
}

fn suffix(tag: Option<&str>) -> String {
    tag.map(|t| format!("_{t}")).unwrap_or_default()
}

fn label(tag: Option<&str>) -> String {
    tag.map(|t| format!(" ({t})")).unwrap_or_default()
}
