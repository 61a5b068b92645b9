//! The records of the run workflow: configuration versions, runs and their two phases (a plan
//! and an apply), with HCP Terraform's statuses. A run is one item under its workspace's data;
//! what it owns elsewhere (its id pointer, its entry in a job queue, its job token) it names as
//! satellites, so a workspace's deletion takes them too.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::error::Result;
use crate::api::timestamp;
use crate::auth::{hash_secret, JobGrant, Principal, TokenRecord};
use crate::ids::Kind;
use crate::store::{keys, pointer, schedule, Condition, Index, Item, Key, Write};

/// How long a configuration version's upload link stays valid.
pub const UPLOAD_LINK_LIFETIME: std::time::Duration = std::time::Duration::from_secs(3600);

/// The most runs a configuration version that is still pending starts when it lands.
pub const MAX_AWAITING: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UploadStatus {
    Pending,
    Uploaded,
    Errored,
}

impl UploadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            UploadStatus::Pending => "pending",
            UploadStatus::Uploaded => "uploaded",
            UploadStatus::Errored => "errored",
        }
    }
}

/// A configuration version: the files a run plans, uploaded once as a gzipped tar.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigurationVersion {
    pub id: String,
    pub org_id: String,
    pub workspace_id: String,
    pub created_ms: i64,
    pub created_at: String,
    /// The user id of who made it (what a run its upload queues is made by).
    pub created_by: String,
    pub status: UploadStatus,
    /// Why the upload was refused.
    #[serde(default)]
    pub error: Option<String>,
    pub auto_queue_runs: bool,
    pub speculative: bool,
    /// Whether its creator may apply runs: the run its upload queues auto-applies only then.
    #[serde(default)]
    pub creator_may_apply: bool,
    /// The archive, sealed, once it has landed (what `store::owned` deletes with the item).
    #[serde(default)]
    pub sealed: Vec<String>,
    #[serde(default)]
    pub size: u64,
    /// Runs made while it was pending, which its upload starts.
    #[serde(default)]
    pub awaiting: Vec<String>,
    #[serde(default)]
    pub status_timestamps: BTreeMap<String, String>,
    #[serde(default)]
    pub revision: u64,
}

impl pointer::Addressed for ConfigurationVersion {
    const KIND: Kind = Kind::ConfigurationVersion;
}

impl ConfigurationVersion {
    pub fn key(&self) -> Key {
        keys::configuration_version(&self.org_id, &self.workspace_id, self.created_ms, &self.id)
    }

    pub fn to_item(&self) -> Result<Item> {
        Ok(Item::from_value(self.key(), self)?.with_satellites(&[keys::id_pointer(&self.id)]))
    }

    pub fn unchanged(&self) -> Condition {
        Condition::equals("revision", self.revision)
    }

    pub fn next(&self) -> Self {
        Self { revision: self.revision + 1, ..self.clone() }
    }

    pub fn archive(&self) -> Option<&str> {
        self.sealed.first().map(String::as_str)
    }

    /// Whether its upload link has expired (at `now_ms`): a version still pending then never
    /// lands.
    pub fn upload_expired(&self, now_ms: i64) -> bool {
        now_ms > self.created_ms.saturating_add(UPLOAD_LINK_LIFETIME.as_millis() as i64)
    }
}

/// HCP Terraform's run statuses (those a run on Hangar passes through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pending,
    PlanQueued,
    Planning,
    Planned,
    PlannedAndFinished,
    ApplyQueued,
    Applying,
    Applied,
    Discarded,
    Errored,
    Canceled,
    ForceCanceled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::PlanQueued => "plan_queued",
            RunStatus::Planning => "planning",
            RunStatus::Planned => "planned",
            RunStatus::PlannedAndFinished => "planned_and_finished",
            RunStatus::ApplyQueued => "apply_queued",
            RunStatus::Applying => "applying",
            RunStatus::Applied => "applied",
            RunStatus::Discarded => "discarded",
            RunStatus::Errored => "errored",
            RunStatus::Canceled => "canceled",
            RunStatus::ForceCanceled => "force_canceled",
        }
    }

    /// Whether the run is over: nothing more happens to it.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::PlannedAndFinished
                | RunStatus::Applied
                | RunStatus::Discarded
                | RunStatus::Errored
                | RunStatus::Canceled
                | RunStatus::ForceCanceled
        )
    }

    /// Whether it is in its organization's run queue: a job of it waits for an agent or runs.
    pub fn is_in_queue(self) -> bool {
        matches!(self, RunStatus::PlanQueued | RunStatus::Planning | RunStatus::ApplyQueued | RunStatus::Applying)
    }

    /// Whether an agent holds one of its jobs.
    pub fn is_running(self) -> bool {
        matches!(self, RunStatus::Planning | RunStatus::Applying)
    }
}

/// A run's two jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Plan,
    Apply,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Plan => "plan",
            Phase::Apply => "apply",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "plan" => Some(Phase::Plan),
            "apply" => Some(Phase::Apply),
            _ => None,
        }
    }
}

/// What a plan or an apply reports, as HCP's plan and apply resources show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRecord {
    /// `pending`, `queued`, `running`, `finished`, `errored`, `canceled` or `unreachable`.
    pub status: String,
    #[serde(default)]
    pub has_changes: bool,
    #[serde(default)]
    pub additions: u64,
    #[serde(default)]
    pub changes: u64,
    #[serde(default)]
    pub destructions: u64,
    #[serde(default)]
    pub timestamps: BTreeMap<String, String>,
}

impl PhaseRecord {
    fn pending() -> Self {
        Self { status: "pending".into(), ..Self::default() }
    }

    pub fn set_status(&mut self, status: &str) {
        self.status = status.to_owned();
        // HCP names the moment a phase starts running `started-at`.
        let moment = if status == "running" { "started" } else { status };
        self.timestamps.insert(format!("{moment}-at"), timestamp(Utc::now()));
    }

    /// Whether its log is complete: nothing more will be written to it.
    pub fn is_done(&self) -> bool {
        matches!(self.status.as_str(), "finished" | "errored" | "canceled" | "unreachable")
    }
}

/// The job an agent holds: which phase, on which lease, with which token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub phase: Phase,
    pub agent_id: String,
    /// The SHA-256 of the job token's secret (the token's item is keyed by it).
    pub token_hash: String,
    /// When the lease runs out (Unix seconds) unless the agent reports before.
    pub lease_until: i64,
    pub claimed_at: String,
    /// A cancel was asked for: the agent interrupts Terraform when it next reports.
    #[serde(default)]
    pub cancel: bool,
}

/// What a run was asked to do (HCP's run attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub message: String,
    pub is_destroy: bool,
    pub refresh: bool,
    pub refresh_only: bool,
    pub plan_only: bool,
    pub auto_apply: bool,
    #[serde(default)]
    pub target_addrs: Vec<String>,
    #[serde(default)]
    pub replace_addrs: Vec<String>,
    /// Run variables (`key`, HCL `value`), which take precedence over the workspace's.
    #[serde(default)]
    pub variables: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    pub org_id: String,
    pub workspace_id: String,
    pub configuration_version_id: String,
    pub created_ms: i64,
    pub created_at: String,
    /// The user id of who made it.
    pub created_by: String,
    pub operation: Operation,
    /// Plans only and takes no lock (a speculative configuration version, or `plan-only`).
    pub speculative: bool,
    /// The queue its jobs go to: its workspace's agent pool, or `remote` for Hangar's runners.
    pub queue: String,
    pub status: RunStatus,
    #[serde(default)]
    pub status_timestamps: BTreeMap<String, String>,
    pub plan: PhaseRecord,
    pub apply: PhaseRecord,
    #[serde(default)]
    pub job: Option<Job>,
    /// When its current job was queued (the queue entry's time), while it waits for an agent.
    #[serde(default)]
    pub queued_ms: Option<i64>,
    /// It waits for the workspace's lock (has an entry in the workspace's waiting runs).
    #[serde(default)]
    pub waiting: bool,
    /// It holds the workspace's lock.
    #[serde(default)]
    pub holds_lock: bool,
    /// Why it errored, in a sentence a person can act on.
    #[serde(default)]
    pub error: Option<String>,
    /// A cancel was asked for (what makes a force-cancel possible).
    #[serde(default)]
    pub canceled_by: Option<String>,
    /// The saved plan an apply applies, sealed (what `store::owned` deletes with the item).
    #[serde(default)]
    pub sealed: Vec<String>,
    #[serde(default)]
    pub revision: u64,
}

impl pointer::Addressed for Run {
    const KIND: Kind = Kind::Run;
}

/// The id of a run's plan and apply (`plan-…`, `apply-…`): its own random part, so either leads
/// to the run with no record of its own.
pub fn phase_id(run_id: &str, phase: Phase) -> String {
    format!("{}-{}", phase.as_str(), run_id.strip_prefix("run-").unwrap_or(run_id))
}

/// The run a plan or apply id belongs to, and which phase it names.
pub fn run_of_phase(phase_id: &str) -> Option<(String, Phase)> {
    let (prefix, rest) = phase_id.split_once('-')?;
    let phase = Phase::parse(prefix)?;
    (!rest.is_empty()).then(|| (format!("run-{rest}"), phase))
}

impl Run {
    pub fn new(
        workspace_id: &str,
        org_id: &str,
        cv: &ConfigurationVersion,
        operation: Operation,
        queue: String,
        created_by: String,
    ) -> Self {
        let now = Utc::now();
        let mut run = Run {
            id: crate::ids::new_id("run"),
            org_id: org_id.to_owned(),
            workspace_id: workspace_id.to_owned(),
            configuration_version_id: cv.id.clone(),
            created_ms: now.timestamp_millis(),
            created_at: timestamp(now),
            created_by,
            speculative: cv.speculative || operation.plan_only,
            operation,
            queue,
            status: RunStatus::Pending,
            status_timestamps: BTreeMap::new(),
            plan: PhaseRecord::pending(),
            apply: PhaseRecord::pending(),
            job: None,
            queued_ms: None,
            waiting: false,
            holds_lock: false,
            error: None,
            canceled_by: None,
            sealed: Vec::new(),
            revision: 0,
        };
        run.waiting = !run.speculative;
        run.set_status(RunStatus::Pending);
        run
    }

    pub fn key(&self) -> Key {
        keys::run(&self.org_id, &self.workspace_id, self.created_ms, &self.id)
    }

    /// Its entry among the workspace's runs waiting for the lock.
    pub fn waiting_key(&self) -> Key {
        keys::run_waiting(&self.org_id, &self.workspace_id, self.created_ms, &self.id)
    }

    /// Its entry in its queue, while a job of it waits for an agent.
    pub fn queue_key(&self) -> Option<Key> {
        self.queued_ms.map(|at| keys::job_queue_entry(&self.queue, at, &self.id))
    }

    pub fn job_token_key(&self) -> Option<Key> {
        self.job.as_ref().map(|job| keys::token(&job.token_hash))
    }

    /// The item: with the items it owns outside its workspace's data, and on the schedule of
    /// leases while an agent holds a job of it.
    pub fn to_item(&self) -> Result<Item> {
        let mut owned = vec![keys::id_pointer(&self.id)];
        owned.extend(self.queue_key());
        owned.extend(self.job_token_key());
        let mut item = Item::from_value(self.key(), self)?.with_satellites(&owned);
        if let Some(job) = &self.job {
            item = item.with_index(Index::Gsi1, keys::JOB_LEASES, schedule::sort_key(job.lease_until, &self.id));
        }
        if self.status.is_in_queue() {
            let (index, partition, sort) = keys::active_run_index(&self.org_id, self.created_ms, &self.id);
            item = item.with_index(index, partition, sort);
        }
        Ok(item)
    }

    /// The condition that the stored run is the one read.
    pub fn unchanged(&self) -> Condition {
        Condition::equals("revision", self.revision)
    }

    /// The run as its next write stores it.
    pub fn next(&self) -> Self {
        Self { revision: self.revision + 1, ..self.clone() }
    }

    pub fn set_status(&mut self, status: RunStatus) {
        self.status = status;
        self.status_timestamps.insert(format!("{}-at", status.as_str().replace('_', "-")), timestamp(Utc::now()));
    }

    pub fn phase(&self, phase: Phase) -> &PhaseRecord {
        match phase {
            Phase::Plan => &self.plan,
            Phase::Apply => &self.apply,
        }
    }

    pub fn phase_mut(&mut self, phase: Phase) -> &mut PhaseRecord {
        match phase {
            Phase::Plan => &mut self.plan,
            Phase::Apply => &mut self.apply,
        }
    }

    /// The phase its next or current job runs.
    pub fn queued_phase(&self) -> Phase {
        match self.status {
            RunStatus::ApplyQueued | RunStatus::Applying => Phase::Apply,
            _ => Phase::Plan,
        }
    }

    /// The write that puts a job of it in its queue (`queued_ms` set), as the run's write commits.
    pub fn queue_entry(&self) -> Result<Write> {
        let key = self.queue_key().expect("a queued run has a queue entry");
        let entry = QueueEntry { run_key: self.key(), run_id: self.id.clone(), phase: self.queued_phase() };
        Ok(Write::Put { item: Item::from_value(key, &entry)?, condition: Condition::NotExists })
    }

    /// The job token's item for a claim of `phase` by `agent_id`: its secret shown once, to the
    /// agent; it lives until `expires_at`, the job's lease (renewed with it).
    pub fn job_token(&self, phase: Phase, agent_id: &str, secret: &str, expires_at: i64) -> Result<Item> {
        let grant = JobGrant {
            org_id: self.org_id.clone(),
            workspace_id: self.workspace_id.clone(),
            run_id: self.id.clone(),
            phase: phase.as_str().to_owned(),
            agent_id: agent_id.to_owned(),
        };
        let record = TokenRecord {
            hash: hash_secret(secret),
            token_id: format!("job-{}", self.id),
            principal: Principal::Job(grant),
            created_at: timestamp(Utc::now()),
        };
        Ok(record.to_item()?.with_ttl(expires_at))
    }
}

/// The counter attributes of a workspace's [`keys::run_counts`] item: runs and configuration
/// versions it has had, and its runs not over yet.
pub const RUN_COUNT: &str = "runs";
pub const CONFIGURATION_COUNT: &str = "configurations";
pub const ACTIVE_COUNT: &str = "active";

/// The most runs not over yet a workspace holds (each waits for the lock, or an agent).
pub const MAX_ACTIVE_RUNS: i64 = 100;

/// The write that counts one more run or configuration version of a workspace (`counter`).
pub fn counted(org_id: &str, workspace_id: &str, counter: &str) -> Write {
    Write::Update {
        key: keys::run_counts(org_id, workspace_id),
        ops: vec![crate::store::UpdateOp::Add(counter.into(), 1)],
        condition: Condition::Always,
    }
}

/// How many runs or configuration versions (`counter`) a workspace has had.
pub async fn count(
    store: &dyn crate::store::ItemStore,
    org_id: &str,
    workspace_id: &str,
    counter: &str,
) -> Result<usize> {
    let item = store.get(&keys::run_counts(org_id, workspace_id)).await?;
    Ok(item.map(|item| item.count(counter)).transpose()?.unwrap_or(0))
}

/// A job waiting in a queue: which run, and which of its phases.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueEntry {
    pub run_key: Key,
    pub run_id: String,
    pub phase: Phase,
}

/// An entry of the workspace's runs waiting for the lock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitingEntry {
    pub run_id: String,
}

impl WaitingEntry {
    pub fn write(run: &Run) -> Result<Write> {
        let item = Item::from_value(run.waiting_key(), &WaitingEntry { run_id: run.id.clone() })?;
        Ok(Write::Put { item, condition: Condition::NotExists })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_id_leads_back_to_its_run() {
        assert_eq!(phase_id("run-abc", Phase::Plan), "plan-abc");
        assert_eq!(run_of_phase("apply-abc"), Some(("run-abc".into(), Phase::Apply)));
        for other in ["plan-", "run-abc", "nonsense", "apply"] {
            assert_eq!(run_of_phase(other), None, "{other}");
        }
    }

    #[test]
    fn a_configuration_can_be_uploaded_for_an_hour_from_its_creation() {
        let cv = ConfigurationVersion {
            id: "cv-1".into(),
            org_id: "org-1".into(),
            workspace_id: "ws-1".into(),
            created_ms: 1_000,
            created_at: String::new(),
            created_by: String::new(),
            status: UploadStatus::Pending,
            error: None,
            auto_queue_runs: false,
            speculative: false,
            creator_may_apply: false,
            sealed: Vec::new(),
            size: 0,
            awaiting: Vec::new(),
            status_timestamps: BTreeMap::new(),
            revision: 0,
        };
        assert!(!cv.upload_expired(1_000 + 3_600_000));
        assert!(cv.upload_expired(1_001 + 3_600_000));
    }
}
