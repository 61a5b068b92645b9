//! The provider records: a provider, its versions with their platforms inside (a version holds
//! a few dozen at most, and every change to one is a change to its version), the marker that
//! names what an upload is for, and the rules on the names a request gives. Nothing here reads
//! the store.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::accounts::access::Organization;
use crate::api::{timestamp, Field};
use crate::blobs::ObjectId;
use crate::ids::new_id;
use crate::registry::error::{RegistryError, Result};
use crate::registry::names::{parse_version, Namespace, RegistryName};
use crate::store::owned::BLOBS;
use crate::store::{keys, Item, Key};

/// The most bytes of `SHA256SUMS` taken: one line per platform, a few dozen platforms.
pub const SHASUMS_LIMIT: u64 = 64 * 1024;
/// The most bytes of `SHA256SUMS.sig` taken: a detached signature is a few hundred.
pub const SIGNATURE_LIMIT: u64 = 16 * 1024;
/// The most platforms a version holds (they are kept in the version's item).
pub const MAX_PLATFORMS: usize = 64;
/// The most protocol versions a version declares.
const MAX_PROTOCOLS: usize = 8;
/// The longest filename a platform may give.
const MAX_FILENAME: usize = 255;

/// The operating systems and architectures Terraform (Go) builds for: a platform names one of
/// each.
const OPERATING_SYSTEMS: &[&str] = &[
    "aix",
    "android",
    "darwin",
    "dragonfly",
    "freebsd",
    "illumos",
    "ios",
    "js",
    "linux",
    "netbsd",
    "openbsd",
    "plan9",
    "solaris",
    "wasip1",
    "windows",
];
const ARCHITECTURES: &[&str] = &[
    "386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64", "ppc64le", "riscv64",
    "s390x", "wasm",
];

/// A provider's type name as Terraform reads it in a source address: lowercase letters,
/// digits and dashes, not first, not last, never two in a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProviderType(String);

impl ProviderType {
    pub fn parse(field: Field, raw: &str) -> Result<Self> {
        let invalid = |detail: &str| RegistryError::invalid(field, format!("name {detail}"));
        if raw.is_empty() || raw.len() > 64 {
            return Err(invalid("must be 1 to 64 characters"));
        }
        if !raw.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return Err(invalid("may contain only lowercase letters, digits and dashes"));
        }
        if !crate::names::is_provider_part(raw) {
            return Err(invalid("may not start or end with a dash, nor hold two in a row"));
        }
        // Terraform refuses such a type in a source address.
        if raw.starts_with("terraform-") {
            return Err(invalid("may not start with `terraform-`: name the provider without it"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ProviderType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A provider version's number: SemVer, prerelease allowed; build metadata is refused, since
/// Terraform does not order versions by it (two versions that differ only there are one).
pub fn parse_provider_version(raw: &str) -> Result<semver::Version> {
    let field = Field::Attribute("version");
    let version = parse_version(field, raw)?;
    if !version.build.is_empty() {
        return Err(RegistryError::invalid(field, format!("`{raw}`: a provider version may not carry build metadata")));
    }
    Ok(version)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    pub id: String,
    pub org_id: String,
    pub registry: RegistryName,
    /// Public providers only: a private provider's namespace is its organization's name.
    pub namespace: Option<Namespace>,
    pub name: ProviderType,
    pub created_at: String,
    pub updated_at: String,
    /// Bumped by every version added, so that a delete that read the versions sees a new one.
    #[serde(default)]
    pub revision: u64,
}

impl Provider {
    pub fn new(org_id: &str, registry: RegistryName, namespace: Option<Namespace>, name: ProviderType) -> Self {
        let now = timestamp(chrono::Utc::now());
        Provider {
            id: new_id("prov"),
            org_id: org_id.to_owned(),
            registry,
            namespace,
            name,
            created_at: now.clone(),
            updated_at: now,
            revision: 0,
        }
    }

    pub fn key(&self) -> Key {
        keys::registry_provider(&self.org_id, self.namespace.as_ref().map(Namespace::as_str), self.name.as_str())
    }

    pub fn is_private(&self) -> bool {
        self.registry == RegistryName::Private
    }

    /// The namespace clients see: the organization's name for a private provider.
    pub fn namespace_in<'a>(&'a self, org: &'a Organization) -> &'a str {
        self.namespace.as_ref().map_or(org.name.as_str(), Namespace::as_str)
    }
}

/// One file of a version, uploaded through its own link: waiting while `upload` names the
/// link's object, then stored (`object`, the checked copy served to Terraform) or refused
/// (`error`). A link takes one upload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Asset {
    pub upload: Option<String>,
    pub object: Option<String>,
    pub error: Option<String>,
}

impl Asset {
    fn waiting(upload: &ObjectId) -> Self {
        Asset { upload: Some(upload.to_string()), object: None, error: None }
    }

    /// Whether its link took an upload (checked or refused).
    pub fn uploaded(&self) -> bool {
        self.upload.is_none()
    }

    /// The stored copy, if the upload checked out.
    pub fn stored(&self) -> Option<ObjectId> {
        self.object.as_deref().filter(|_| self.error.is_none()).and_then(ObjectId::parse)
    }

    fn objects(&self) -> impl Iterator<Item = &String> {
        self.upload.iter().chain(self.object.iter())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    pub id: String,
    pub os: String,
    pub arch: String,
    /// Lowercase hex SHA-256 of the zip archive, as `SHA256SUMS` lists it.
    pub shasum: String,
    pub filename: String,
    pub binary: Asset,
    pub created_at: String,
}

/// What a platform request names, checked.
pub struct NewPlatform {
    pub os: String,
    pub arch: String,
    pub shasum: String,
    pub filename: String,
}

impl NewPlatform {
    pub fn check(self) -> Result<Self> {
        if !OPERATING_SYSTEMS.contains(&self.os.as_str()) {
            let detail = format!("`{}` is not an operating system Terraform runs on", shown(&self.os));
            return Err(RegistryError::invalid(Field::Attribute("os"), detail));
        }
        if !ARCHITECTURES.contains(&self.arch.as_str()) {
            let detail = format!("`{}` is not an architecture Terraform runs on", shown(&self.arch));
            return Err(RegistryError::invalid(Field::Attribute("arch"), detail));
        }
        let shasum = self.shasum.to_ascii_lowercase();
        if shasum.len() != 64 || !shasum.bytes().all(|b| b.is_ascii_hexdigit()) {
            let detail = "shasum must be the archive's SHA-256, 64 hexadecimal digits";
            return Err(RegistryError::invalid(Field::Attribute("shasum"), detail));
        }
        let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        if self.filename.is_empty()
            || self.filename.len() > MAX_FILENAME
            || !self.filename.chars().all(safe)
            || self.filename.starts_with('.')
        {
            let detail = format!(
                "filename must be 1 to {MAX_FILENAME} letters, digits, `.`, `_` or `-`, as \
                 `terraform-provider-<name>_<version>_<os>_<arch>.zip`"
            );
            return Err(RegistryError::invalid(Field::Attribute("filename"), detail));
        }
        Ok(NewPlatform { shasum, ..self })
    }
}

/// Checks a version's protocol list: at most eight `major.minor` numbers (`5.0`, `6.0`); an
/// empty list, as go-tfe sends by default, makes Terraform skip its protocol check.
pub fn check_protocols(protocols: &[String]) -> Result<()> {
    let field = Field::Attribute("protocols");
    if protocols.len() > MAX_PROTOCOLS {
        return Err(RegistryError::invalid(field, format!("protocols may list at most {MAX_PROTOCOLS} versions")));
    }
    for protocol in protocols {
        let valid = protocol.split_once('.').is_some_and(|(major, minor)| {
            [major, minor].iter().all(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if !valid {
            return Err(RegistryError::invalid(
                field,
                format!("`{}` is not a protocol version (`5.0`, `6.0`)", shown(protocol)),
            ));
        }
    }
    Ok(())
}

/// A value quoted in a message, cut short.
fn shown(raw: &str) -> String {
    raw.chars().take(64).collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderVersion {
    pub id: String,
    pub org_id: String,
    pub provider_id: String,
    pub name: String,
    pub version: String,
    /// The GPG key that signs `SHA256SUMS`, and its armor as registered when the version was
    /// made (a key signing versions cannot be removed, so the two stay one).
    pub key_id: String,
    pub signing_key: String,
    pub protocols: Vec<String>,
    pub shasums: Asset,
    pub shasums_sig: Asset,
    /// What `SHA256SUMS` lists (filename → SHA-256), once its signature checked out.
    #[serde(default)]
    pub sums: Option<BTreeMap<String, String>>,
    /// Why the signature did not check out.
    #[serde(default)]
    pub signature_error: Option<String>,
    #[serde(default)]
    pub platforms: Vec<Platform>,
    pub created_at: String,
    pub updated_at: String,
    /// Bumped by every change; writes are conditional on it.
    #[serde(default)]
    pub revision: u64,
}

impl ProviderVersion {
    pub fn pending(
        provider: &Provider,
        version: &semver::Version,
        (key_id, signing_key): (&str, &str),
        protocols: Vec<String>,
        (shasums, signature): (&ObjectId, &ObjectId),
    ) -> Self {
        let now = timestamp(chrono::Utc::now());
        ProviderVersion {
            id: new_id("provver"),
            org_id: provider.org_id.clone(),
            provider_id: provider.id.clone(),
            name: provider.name.to_string(),
            version: version.to_string(),
            key_id: key_id.to_owned(),
            signing_key: signing_key.to_owned(),
            protocols,
            shasums: Asset::waiting(shasums),
            shasums_sig: Asset::waiting(signature),
            sums: None,
            signature_error: None,
            platforms: Vec::new(),
            created_at: now.clone(),
            updated_at: now,
            revision: 0,
        }
    }

    pub fn key(&self) -> Key {
        keys::provider_version(&self.org_id, &self.name, &self.version)
    }

    /// The item: the record, the upload markers it owns outside its partition, and every
    /// object it holds (for an organization's deletion).
    pub fn to_item(&self) -> Result<Item> {
        let markers: Vec<Key> = self.waiting().map(|(upload, _)| keys::provider_upload(upload)).collect();
        let mut item = Item::from_value(self.key(), self)?.with_satellites(&markers);
        let objects: Vec<String> = self.objects().map(|id| id.to_string()).collect();
        item.set(BLOBS, serde_json::json!(objects));
        Ok(item)
    }

    /// Every object the version holds in the blob store: uploads waiting and stored copies.
    pub fn objects(&self) -> impl Iterator<Item = ObjectId> + '_ {
        let platforms = self.platforms.iter().flat_map(|p| p.binary.objects());
        self.shasums.objects().chain(self.shasums_sig.objects()).chain(platforms).filter_map(|id| ObjectId::parse(id))
    }

    /// The uploads the version waits for, with the part each is for.
    pub fn waiting(&self) -> impl Iterator<Item = (&str, Part)> + '_ {
        let sums = self.shasums.upload.as_deref().map(|u| (u, Part::Shasums));
        let sig = self.shasums_sig.upload.as_deref().map(|u| (u, Part::ShasumsSig));
        let binaries = self.platforms.iter().filter_map(|p| {
            let part = Part::Binary { os: p.os.clone(), arch: p.arch.clone() };
            p.binary.upload.as_deref().map(|u| (u, part))
        });
        sums.into_iter().chain(sig).chain(binaries)
    }

    pub fn platform(&self, os: &str, arch: &str) -> Option<&Platform> {
        self.platforms.iter().find(|p| p.os == os && p.arch == arch)
    }

    /// What is wrong with the version as a whole, if anything: a refused file or signature.
    pub fn problem(&self) -> Option<String> {
        let refused = |name: &str, asset: &Asset| asset.error.as_ref().map(|e| format!("{name}: {e}"));
        refused("SHA256SUMS", &self.shasums)
            .or_else(|| refused("SHA256SUMS.sig", &self.shasums_sig))
            .or_else(|| self.signature_error.clone())
    }

    /// What keeps a platform from being installed, once its files are in: a refused binary, or
    /// signed sums that do not list its archive.
    pub fn platform_problem(&self, platform: &Platform) -> Option<String> {
        if let Some(error) = &platform.binary.error {
            return Some(error.clone());
        }
        let sums = self.sums.as_ref()?;
        match sums.get(&platform.filename) {
            Some(listed) if *listed == platform.shasum => None,
            Some(listed) => Some(format!(
                "SHA256SUMS lists {listed} for {}, not the platform's shasum {}",
                platform.filename, platform.shasum
            )),
            None => Some(format!("SHA256SUMS does not list {}", platform.filename)),
        }
    }

    /// Whether Terraform may install the platform: its archive checked out, and the signed sums
    /// list it with the platform's shasum.
    pub fn serves(&self, platform: &Platform) -> bool {
        let listed = self.sums.as_ref().and_then(|sums| sums.get(&platform.filename));
        platform.binary.stored().is_some() && listed == Some(&platform.shasum)
    }

    /// What the registry protocol lists of this version.
    pub fn index_entry(&self) -> IndexEntry {
        let platforms = self.platforms.iter().filter(|p| self.serves(p)).map(|p| [p.os.clone(), p.arch.clone()]);
        IndexEntry { version: self.version.clone(), protocols: self.protocols.clone(), platforms: platforms.collect() }
    }
}

/// One version as the registry protocol's `versions` lists it: only platforms that check out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub version: String,
    pub protocols: Vec<String>,
    pub platforms: Vec<[String; 2]>,
}

/// Which file of a version an upload is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "part", rename_all = "kebab-case")]
pub enum Part {
    Shasums,
    ShasumsSig,
    Binary { os: String, arch: String },
}

/// What waits under `PROVUPLOAD#<object-id>`: the version the uploaded file belongs to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProviderUpload {
    pub version: Key,
    #[serde(flatten)]
    pub part: Part,
}
