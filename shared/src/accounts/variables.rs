//! Workspace variables (`/workspaces/:id/vars`), as HCP Terraform and go-tfe have them: a key, a
//! value, a category (`terraform` or `env`), `hcl` and `sensitive`. A sensitive value is sealed
//! for its variable (`SealContext::workspace_variable`) and never shown again; a variable once
//! sensitive stays so. A key is unique per category in its workspace, claimed by an item in the
//! same transaction. Variables live under their workspace's data, so its deletion removes them.

use serde::{Deserialize, Serialize};

use super::error::{AccountsError, Result};
use super::workspaces::{self, Found, Workspace, WorkspaceAt};
use crate::api::Field;
use crate::auth::Principal;
use crate::ids::{new_id, Kind};
use crate::seal::{SealContext, Sealer};
use crate::store::{
    keys, pointer, query_all_as, retry_on_race, Condition, Item, ItemStore, Key, Transaction, UpdateOp, Write,
};

/// The longest key, description and value a variable takes; a sensitive value is sealed by KMS
/// in AWS, which seals at most 4 KiB.
pub const MAX_KEY: usize = 128;
pub const MAX_DESCRIPTION: usize = 512;
pub const MAX_VALUE: usize = 256 * 1024;
pub const MAX_SENSITIVE_VALUE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Terraform,
    Env,
}

impl Category {
    pub fn parse(raw: &str) -> Result<Self> {
        match raw {
            "terraform" => Ok(Category::Terraform),
            "env" => Ok(Category::Env),
            _ => Err(AccountsError::invalid(Field::Attribute("category"), "must be `terraform` or `env`")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Terraform => "terraform",
            Category::Env => "env",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variable {
    pub id: String,
    pub org_id: String,
    pub workspace_id: String,
    pub key: String,
    /// The value, when it is not sensitive.
    pub value: Option<String>,
    /// The value sealed for this variable, when it is sensitive and not empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_value: Option<String>,
    pub description: Option<String>,
    pub category: Category,
    pub hcl: bool,
    pub sensitive: bool,
    pub created_at: String,
    pub revision: u64,
}

impl pointer::Addressed for Variable {
    const KIND: Kind = Kind::Variable;
}

impl Variable {
    fn key(&self) -> Key {
        keys::variable(&self.org_id, &self.workspace_id, &self.id)
    }

    fn claim(&self) -> Key {
        keys::variable_key_claim(&self.org_id, &self.workspace_id, self.category.as_str(), &self.key)
    }

    fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    fn claim_write(&self) -> Write {
        let item = Item::new(self.claim(), Default::default());
        Write::Put { item, condition: Condition::NotExists }
    }
}

/// What a request sets; `None` keeps a value (on creation: its default).
#[derive(Debug, Clone, Default)]
pub struct VariableChanges {
    pub key: Option<String>,
    pub value: Option<String>,
    pub description: Option<String>,
    pub category: Option<Category>,
    pub hcl: Option<bool>,
    pub sensitive: Option<bool>,
}

fn check_key(key: &str, category: Category) -> Result<()> {
    let mut chars = key.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (c == '-' && category == Category::Terraform));
    if key.len() > MAX_KEY || !first_ok || !rest_ok {
        let allowed = match category {
            Category::Terraform => "letters, digits, `_` and `-`",
            Category::Env => "letters, digits and `_`",
        };
        return Err(AccountsError::invalid(
            Field::Attribute("key"),
            format!("must start with a letter or `_` and hold only {allowed} (at most {MAX_KEY} bytes)"),
        ));
    }
    Ok(())
}

fn check_text(value: &str, limit: usize, field: &'static str) -> Result<()> {
    if value.len() > limit {
        return Err(AccountsError::invalid(Field::Attribute(field), format!("is longer than {limit} bytes")));
    }
    Ok(())
}

/// The workspace `workspace_id` for a caller that may read its variables (else not found),
/// and whether the caller may change them.
async fn workspace(store: &dyn ItemStore, principal: &Principal, workspace_id: &str) -> Result<(Workspace, bool)> {
    let Found { workspace, may, .. } = workspaces::find(store, principal, WorkspaceAt::Id(workspace_id)).await?;
    if !may.read_variables {
        return Err(AccountsError::NotFound);
    }
    Ok((workspace, may.write_variables))
}

async fn writable(store: &dyn ItemStore, principal: &Principal, workspace_id: &str) -> Result<Workspace> {
    match workspace(store, principal, workspace_id).await? {
        (workspace, true) => Ok(workspace),
        (_, false) => Err(AccountsError::Forbidden("You may not change this workspace's variables.".into())),
    }
}

/// The variable `variable_id` of `workspace`.
async fn find(store: &dyn ItemStore, workspace: &Workspace, variable_id: &str) -> Result<Variable> {
    let variable: Variable = pointer::resolve(store, variable_id).await?.ok_or(AccountsError::NotFound)?;
    if variable.workspace_id != workspace.id {
        return Err(AccountsError::NotFound);
    }
    Ok(variable)
}

/// `variable` with `changes` applied and checked, its value sealed when sensitive.
async fn applied(sealer: &dyn Sealer, current: &Variable, changes: &VariableChanges) -> Result<Variable> {
    let mut next = Variable { revision: current.revision + 1, ..current.clone() };
    if let Some(key) = &changes.key {
        next.key = key.clone();
    }
    if let Some(category) = changes.category {
        next.category = category;
    }
    check_key(&next.key, next.category)?;
    if let Some(description) = &changes.description {
        check_text(description, MAX_DESCRIPTION, "description")?;
        next.description = Some(description.clone());
    }
    if let Some(hcl) = changes.hcl {
        next.hcl = hcl;
    }
    if current.sensitive && changes.sensitive == Some(false) {
        return Err(AccountsError::invalid(
            Field::Attribute("sensitive"),
            "a sensitive variable cannot be made non-sensitive; delete it and create it again",
        ));
    }
    next.sensitive = current.sensitive || changes.sensitive == Some(true);
    let plain = match (&changes.value, current.sensitive) {
        (Some(value), _) => Some(value.clone()),
        (None, false) => current.value.clone(),
        // Sensitive already and no new value: the sealed value stays as it is.
        (None, true) => return Ok(next),
    };
    let plain = plain.unwrap_or_default();
    check_text(&plain, if next.sensitive { MAX_SENSITIVE_VALUE } else { MAX_VALUE }, "value")?;
    if next.sensitive {
        next.value = None;
        next.sealed_value = match plain.is_empty() {
            true => None,
            false => Some(sealer.seal_for(&SealContext::workspace_variable(&next.id), &plain).await?),
        };
    } else {
        next.value = Some(plain);
    }
    Ok(next)
}

/// Creates a variable in the workspace `workspace_id`.
pub async fn create(
    store: &dyn ItemStore,
    sealer: &dyn Sealer,
    principal: &Principal,
    workspace_id: &str,
    new: VariableChanges,
    max: usize,
) -> Result<Variable> {
    let workspace = writable(store, principal, workspace_id).await?;
    let key = new.key.clone().ok_or_else(|| AccountsError::invalid(Field::Attribute("key"), "is required"))?;
    let category = new.category.ok_or_else(|| AccountsError::invalid(Field::Attribute("category"), "is required"))?;
    let blank = Variable {
        id: new_id("var"),
        org_id: workspace.org_id.clone(),
        workspace_id: workspace.id.clone(),
        key,
        value: Some(String::new()),
        sealed_value: None,
        description: None,
        category,
        hcl: false,
        sensitive: false,
        created_at: crate::api::timestamp(chrono::Utc::now()),
        revision: 0,
    };
    let variable = applied(sealer, &blank, &new).await?;
    let mut transaction = Transaction::new();
    transaction.add(Write::Put { item: variable.to_item()?, condition: Condition::NotExists });
    transaction.add(pointer::create(&variable.id, &variable.key())?);
    let claim = transaction.add(variable.claim_write());
    // The workspace is still there: a deletion that raced this one purges what it finds after.
    let present = transaction
        .add(Write::Check { key: workspace.key(), condition: Condition::equals("id", workspace.id.as_str()) });
    let below_limit = transaction.add(count_change(&workspace, 1, Some(max)));
    match transaction.commit(store).await {
        Err(e) if e.failed_on(claim) => Err(AccountsError::taken(Field::Attribute("key"))),
        Err(e) if e.failed_on(below_limit) => Err(AccountsError::invalid(
            Field::Attribute("key"),
            format!(
                "workspace {} already has {max} variable(s), the most it may have (HANGAR_MAX_WORKSPACE_VARIABLES)",
                workspace.name
            ),
        )),
        Err(e) if e.failed_on(present) => Err(AccountsError::Conflict("The workspace is changing; retry.".into())),
        other => other.map(|()| variable).map_err(AccountsError::from),
    }
}

/// Counts a variable in or out of the workspace's, refusing past `max` when one is given.
fn count_change(workspace: &Workspace, by: i64, max: Option<usize>) -> Write {
    let condition = match max {
        Some(max) => Condition::Below(COUNT.into(), i64::try_from(max).unwrap_or(i64::MAX)),
        None => Condition::Always,
    };
    let key = keys::variable_count(&workspace.org_id, &workspace.id);
    Write::Update { key, ops: vec![UpdateOp::Add(COUNT.into(), by)], condition }
}

const COUNT: &str = "count";

/// The workspace's variables, by key.
pub async fn list(store: &dyn ItemStore, principal: &Principal, workspace_id: &str) -> Result<Vec<Variable>> {
    let (workspace, _) = workspace(store, principal, workspace_id).await?;
    let mut variables: Vec<Variable> = query_all_as(store, keys::variables(&workspace.org_id, &workspace.id)).await?;
    variables.sort_by(|a, b| (a.category.as_str(), &a.key).cmp(&(b.category.as_str(), &b.key)));
    Ok(variables)
}

pub async fn get(store: &dyn ItemStore, principal: &Principal, workspace_id: &str, id: &str) -> Result<Variable> {
    let (workspace, _) = workspace(store, principal, workspace_id).await?;
    find(store, &workspace, id).await
}

/// Changes a variable; a new key (or category) moves its claim in the same transaction.
pub async fn update(
    store: &dyn ItemStore,
    sealer: &dyn Sealer,
    principal: &Principal,
    workspace_id: &str,
    id: &str,
    changes: VariableChanges,
) -> Result<Variable> {
    let workspace = writable(store, principal, workspace_id).await?;
    let (workspace, changes) = (&workspace, &changes);
    let updated = retry_on_race(|| async move {
        let current = find(store, workspace, id).await?;
        let next = applied(sealer, &current, changes).await?;
        let mut transaction = Transaction::new();
        transaction
            .add(Write::Put { item: next.to_item()?, condition: Condition::equals("revision", current.revision) });
        let claim = (next.claim() != current.claim()).then(|| {
            transaction.add(Write::Delete { key: current.claim(), condition: Condition::Always });
            transaction.add(next.claim_write())
        });
        match transaction.commit(store).await {
            Err(e) if claim.is_some_and(|claim| e.failed_on(claim)) => {
                Err(AccountsError::taken(Field::Attribute("key")))
            }
            Err(e) if e.is_condition_failed() => Ok(None),
            other => other.map(|()| Some(next)).map_err(AccountsError::from),
        }
    })
    .await?;
    updated.ok_or_else(|| AccountsError::Conflict("The variable is changing; retry.".into()))
}

pub async fn delete(store: &dyn ItemStore, principal: &Principal, workspace_id: &str, id: &str) -> Result<()> {
    let workspace = writable(store, principal, workspace_id).await?;
    let variable = find(store, &workspace, id).await?;
    let mut transaction = Transaction::new();
    // On the variable as read: a rename that won meanwhile moved its claim, which this delete
    // would otherwise leave behind.
    transaction.add(Write::Delete { key: variable.key(), condition: Condition::equals("revision", variable.revision) });
    transaction.add(pointer::remove(&variable.id));
    transaction.add(Write::Delete { key: variable.claim(), condition: Condition::Always });
    transaction.add(count_change(&workspace, -1, None));
    match transaction.commit(store).await {
        Err(e) if e.is_condition_failed() => Err(AccountsError::Conflict("The variable is changing; retry.".into())),
        other => other.map_err(AccountsError::from),
    }
}

/// A variable as a run receives it: its value in the clear, sensitive ones unsealed.
#[derive(Debug, Clone, Serialize)]
pub struct RunVariable {
    pub key: String,
    pub value: String,
    pub category: Category,
    pub hcl: bool,
    pub sensitive: bool,
}

/// Every variable of the workspace `found` (as `principal` found it) with its value, for the run's
/// job token alone (the agent that runs the job): what no other caller is ever shown again once
/// sensitive.
pub async fn for_run(
    store: &dyn ItemStore,
    sealer: &dyn Sealer,
    principal: &Principal,
    found: &Found,
) -> Result<Vec<RunVariable>> {
    let workspace = &found.workspace;
    let own = matches!(principal, Principal::Job(job) if job.workspace_id == workspace.id);
    if !own || !found.may.read_variables {
        return Err(AccountsError::NotFound);
    }
    let variables: Vec<Variable> = query_all_as(store, keys::variables(&workspace.org_id, &workspace.id)).await?;
    let mut shown = Vec::with_capacity(variables.len());
    for variable in variables {
        let value = match (&variable.sealed_value, &variable.value) {
            (Some(sealed), _) => sealer.unseal_for(&SealContext::workspace_variable(&variable.id), sealed).await?,
            (None, value) => value.clone().unwrap_or_default(),
        };
        let Variable { key, category, hcl, sensitive, .. } = variable;
        shown.push(RunVariable { key, value, category, hcl, sensitive });
    }
    Ok(shown)
}
