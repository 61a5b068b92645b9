//! One job: a run's plan or apply, in a fresh working directory removed at the end. The plan
//! runs `init`, `plan -out` and `show -json` (what it reports: whether anything changes, and how
//! much), and saves the plan for the apply; the apply runs `init` and applies that plan, sending
//! the state to the workspace whenever it changes. Output goes to the log as it comes; a cancel
//! sends SIGINT to Terraform, and a job that is over for this agent (force-canceled, its lease
//! lost) kills it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use tokio::sync::{mpsc, watch, Mutex};

use crate::client::{Claim, Client, ClientError};
use crate::credentials;
use crate::log::LogWriter;
use crate::workdir::{self, Workdir};

/// Removes a directory and what it holds when dropped (a job's credentials, however it ends).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(path = %self.0.display(), error = %e, "the job's credentials could not be removed");
            }
            _ => {}
        }
    }
}

/// What the job's reports ask of the running Terraform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Run,
    /// A cancel: SIGINT, and the job ends `canceled` once Terraform exits.
    Interrupt,
    /// The job is no longer this agent's: stop at once, report nothing.
    Kill,
}

/// Where and how a job runs.
pub struct Runner<'a> {
    pub client: &'a Client,
    pub agent_id: &'a str,
    pub terraform: &'a Path,
    pub work_parent: Option<&'a Path>,
    pub ca_file: Option<&'a Path>,
}

/// Why a job did not finish.
#[derive(Debug)]
enum Failure {
    /// Terraform or the preparation failed: the run errors with this message.
    Errored(String),
    Canceled,
    /// The job is over for this agent.
    Over,
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::JobOver(_) => Failure::Over,
            other => Failure::Errored(other.to_string()),
        }
    }
}

/// What a finished job reports.
#[derive(Debug, Default, Clone, Copy)]
struct Changes {
    has_changes: bool,
    additions: u64,
    changes: u64,
    destructions: u64,
}

impl Runner<'_> {
    /// Runs the claimed job to its end and reports how it ended.
    pub async fn run(&self, claim: &Claim) -> Result<(), ClientError> {
        let token = claim.token.as_str();
        let (control_tx, control) = watch::channel(Control::Run);
        let beats = tokio::spawn(heartbeat(
            self.client.clone(),
            token.to_owned(),
            self.agent_id.to_owned(),
            claim.report_in,
            control_tx,
        ));
        let log = LogWriter::start(self.client.clone(), token.to_owned());
        let result = self.execute(claim, &log, control).await;
        let outcome = match &result {
            Ok(changes) => json!({
                "status": "finished",
                "has-changes": changes.has_changes,
                "resource-additions": changes.additions,
                "resource-changes": changes.changes,
                "resource-destructions": changes.destructions,
            }),
            Err(Failure::Errored(why)) => {
                log.line(&format!("\nError: {why}"));
                json!({ "status": "errored", "error": why })
            }
            Err(Failure::Canceled) => {
                log.line("\nThe run was canceled.");
                json!({ "status": "canceled" })
            }
            Err(Failure::Over) => json!(null),
        };
        log.close().await;
        beats.abort();
        if outcome.is_null() {
            tracing::warn!(run = %claim.run, "the job is no longer this agent's: stopped");
            return Ok(());
        }
        match self.client.finish(token, &outcome).await {
            Err(ClientError::JobOver(_)) => Ok(()),
            other => other,
        }
    }

    async fn execute(
        &self,
        claim: &Claim,
        log: &LogWriter,
        control: watch::Receiver<Control>,
    ) -> Result<Changes, Failure> {
        let token = claim.token.as_str();
        let spec = self.client.job(token).await?;
        // Three lines first, as HCP's logs have: the CLI skips an apply log's first three.
        log.line(&format!("Hangar agent {} (hangar-agent {})", self.agent_id, env!("CARGO_PKG_VERSION")));
        log.line(&format!("Run {}, its {}", claim.run, claim.phase));
        log.line(&format!(
            "Workspace {}/{}",
            spec["organization"].as_str().unwrap_or_default(),
            spec["workspace"]["name"].as_str().unwrap_or_default()
        ));
        if !self.terraform_exists() {
            return Err(Failure::Errored(format!(
                "No Terraform binary at `{}` on this agent: set HANGAR_TERRAFORM to one (Hangar never downloads Terraform).",
                self.terraform.display()
            )));
        }
        let archive = self.client.job_bytes(token, "/api/agent/job/configuration").await?;
        let working_directory = spec["workspace"]["working-directory"].as_str().unwrap_or_default();
        let workdir = workdir::unpack(self.work_parent, &archive, working_directory)
            .map_err(|e| Failure::Errored(e.to_string()))?;
        let prepare = |e: std::io::Error| Failure::Errored(format!("the working directory could not be prepared: {e}"));
        workdir::override_backend(&workdir).map_err(prepare)?;
        let empty = Vec::new();
        let variables = spec["variables"].as_array().unwrap_or(&empty);
        let run_variables = spec["operation"]["variables"].as_array().unwrap_or(&empty);
        workdir::write_variables(&workdir, variables, run_variables).map_err(prepare)?;
        let host = host_of(self.client.address());
        workdir::write_cli_config(&workdir, &host, token).map_err(prepare)?;
        let workspace_id = spec["workspace"]["id"].as_str().unwrap_or_default();
        if let Some(state) = self.client.current_state(token, workspace_id).await? {
            std::fs::write(workdir.state_file(), &state).map_err(prepare)?;
        }
        let env: Vec<(String, String)> = variables
            .iter()
            .filter(|v| v["category"] == "env")
            .filter_map(|v| Some((v["key"].as_str()?.to_owned(), v["value"].as_str()?.to_owned())))
            .collect();
        let mut env = env;
        if let Some(ca_file) = self.ca_file {
            env.push(("SSL_CERT_FILE".into(), ca_file.to_string_lossy().into_owned()));
        }
        // One path per run, the same in its plan and its apply: a saved plan keeps the
        // `tfc_*_dynamic_credentials` values its plan job was given, paths included.
        let credentials_dir = self.credentials_dir(&claim.run)?;
        // What a job of the run that was killed left behind goes first.
        drop(RemoveOnDrop(credentials_dir.clone()));
        let _remove_credentials = RemoveOnDrop(credentials_dir.clone());
        let prepared =
            credentials::prepare(self.client, &credentials_dir, &workdir.terraform_dir, &spec["credentials"])
                .await
                .map_err(|why| Failure::Errored(format!("dynamic credentials: {why}")))?;
        for note in &prepared.notes {
            log.line(note);
        }
        env.extend(prepared.env.iter().cloned());
        let hidden = prepared.hidden.clone();
        let terraform = Terraform { binary: self.terraform, workdir: &workdir, env, hidden, log: log.sender() };
        let ran = self.terraform_phase(claim, &spec, &terraform, &workdir, control).await;
        for failure in credentials::release(prepared).await {
            log.line(&format!("Warning: {failure}"));
        }
        ran
    }

    /// Terraform's part of the job: `init`, then the plan or the apply.
    async fn terraform_phase(
        &self,
        claim: &Claim,
        spec: &Value,
        terraform: &Terraform<'_>,
        workdir: &Workdir,
        control: watch::Receiver<Control>,
    ) -> Result<Changes, Failure> {
        let token = claim.token.as_str();
        let workspace_id = spec["workspace"]["id"].as_str().unwrap_or_default();
        let prepare = |e: std::io::Error| Failure::Errored(format!("the working directory could not be prepared: {e}"));
        let mut control = control;
        terraform.run(&["init", "-input=false", "-no-color"], &mut control).await?;
        let plan = workdir.plan_file().to_string_lossy().into_owned();
        match claim.phase.as_str() {
            "apply" => {
                let saved = self.client.job_bytes(token, "/api/agent/job/plan").await?;
                std::fs::write(&plan, &saved).map_err(prepare)?;
                let changes = terraform.changes(&plan).await?;
                let sent = Arc::new(Mutex::new(None));
                let watcher = tokio::spawn(watch_state(
                    self.client.clone(),
                    token.to_owned(),
                    workspace_id.to_owned(),
                    workdir.state_file(),
                    Arc::clone(&sent),
                ));
                let applied = terraform.run(&["apply", "-input=false", "-no-color", &plan], &mut control).await;
                watcher.abort();
                // Whatever Terraform wrote last, applied or not, is the workspace's state now; a
                // state Hangar refuses errors the run, saying why.
                let mut sent = sent.lock().await;
                upload_if_changed(self.client, token, workspace_id, &workdir.state_file(), &mut sent).await.map_err(
                    |e| match e {
                        ClientError::JobOver(_) => Failure::Over,
                        other => Failure::Errored(format!("the state Terraform wrote could not be saved: {other}")),
                    },
                )?;
                applied?;
                Ok(changes)
            }
            _ => {
                let mut args =
                    vec!["plan".to_owned(), "-input=false".into(), "-no-color".into(), format!("-out={plan}")];
                args.extend(plan_flags(&spec["operation"]));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                terraform.run(&args, &mut control).await?;
                let changes = terraform.changes(&plan).await?;
                let saved = std::fs::read(&plan).map_err(prepare)?;
                self.client.put_plan(token, saved).await?;
                Ok(changes)
            }
        }
    }

    /// Where a run's credentials go: beside the jobs' directories, named by the run.
    fn credentials_dir(&self, run_id: &str) -> Result<PathBuf, Failure> {
        if run_id.is_empty() || !run_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(Failure::Errored(format!("`{run_id}` is not a run id")));
        }
        let parent = self.work_parent.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        Ok(parent.join(format!("hangar-{run_id}-credentials")))
    }

    fn terraform_exists(&self) -> bool {
        if self.terraform.components().count() > 1 {
            return self.terraform.is_file();
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).any(|dir| dir.join(self.terraform).is_file())
    }
}

/// `-destroy`, `-refresh=false`, `-refresh-only`, `-target=…`, `-replace=…` as the run asks.
fn plan_flags(operation: &Value) -> Vec<String> {
    let mut flags = Vec::new();
    if operation["is-destroy"].as_bool() == Some(true) {
        flags.push("-destroy".to_owned());
    }
    if operation["refresh-only"].as_bool() == Some(true) {
        flags.push("-refresh-only".to_owned());
    } else if operation["refresh"].as_bool() == Some(false) {
        flags.push("-refresh=false".to_owned());
    }
    for (name, flag) in [("target-addrs", "-target"), ("replace-addrs", "-replace")] {
        for address in operation[name].as_array().into_iter().flatten().filter_map(Value::as_str) {
            flags.push(format!("{flag}={address}"));
        }
    }
    flags
}

/// The host (and port) Terraform names Hangar by in module sources and credentials.
fn host_of(address: &str) -> String {
    let rest = address.split_once("://").map_or(address, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

struct Terraform<'a> {
    binary: &'a Path,
    workdir: &'a Workdir,
    env: Vec<(String, String)>,
    /// Inherited settings it must not see.
    hidden: Vec<String>,
    log: mpsc::UnboundedSender<Vec<u8>>,
}

impl Terraform<'_> {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(self.binary);
        command
            .args(args)
            .current_dir(&self.workdir.terraform_dir)
            // Terraform inherits the agent's environment (its trust, proxies, credentials), but
            // for the agent's own settings: its pool token above all, which the configuration's
            // code (an external data source, a provisioner) could otherwise read.
            .env_clear()
            .envs(std::env::vars_os().filter(|(name, _)| {
                let name = name.to_string_lossy();
                !name.starts_with("HANGAR_") && !self.hidden.iter().any(|hidden| *hidden == name)
            }))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("TF_CLI_CONFIG_FILE", self.workdir.cli_config())
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_DATA_DIR", self.workdir.root().join(".terraform"))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs Terraform with its output going to the log, obeying the job's control.
    async fn run(&self, args: &[&str], control: &mut watch::Receiver<Control>) -> Result<(), Failure> {
        let _ = self.log.send(format!("$ terraform {}\n", args.join(" ")).into_bytes());
        let mut child = self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| {
            Failure::Errored(format!("Terraform could not be started ({}): {e}", self.binary.display()))
        })?;
        let readers = [
            child.stdout.take().map(|out| tokio::spawn(copy(out, self.log.clone()))),
            child.stderr.take().map(|err| tokio::spawn(copy(err, self.log.clone()))),
        ];
        let mut interrupted = false;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                changed = control.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    let now = *control.borrow_and_update();
                    match now {
                        Control::Interrupt if !interrupted => {
                            interrupted = true;
                            if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
                                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT);
                            }
                        }
                        Control::Kill => {
                            let _ = child.start_kill();
                            let _ = child.wait().await;
                            return Err(Failure::Over);
                        }
                        _ => {}
                    }
                }
            }
        };
        for reader in readers.into_iter().flatten() {
            let _ = reader.await;
        }
        let status = status.map_err(|e| Failure::Errored(format!("Terraform could not be waited for: {e}")))?;
        let asked = *control.borrow();
        if interrupted || asked == Control::Interrupt {
            return Err(Failure::Canceled);
        }
        match status.success() {
            true => Ok(()),
            false => Err(Failure::Errored(format!("`terraform {}` failed ({status}).", args[0]))),
        }
    }

    /// What the saved plan changes, as `terraform show -json` reports it (not logged).
    async fn changes(&self, plan: &str) -> Result<Changes, Failure> {
        let output = self
            .command(&["show", "-json", plan])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .output()
            .await
            .map_err(|e| Failure::Errored(format!("`terraform show` could not be run: {e}")))?;
        let shown: Value = serde_json::from_slice(&output.stdout)
            .map_err(|_| Failure::Errored("`terraform show -json` did not describe the plan.".into()))?;
        Ok(counted(&shown))
    }
}

/// The changes a plan's JSON describes: resources created, updated, deleted (a replacement is
/// one of each), and root outputs that change.
fn counted(plan: &Value) -> Changes {
    let mut changes = Changes::default();
    for resource in plan["resource_changes"].as_array().into_iter().flatten() {
        let actions: Vec<&str> =
            resource["change"]["actions"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        for action in &actions {
            match *action {
                "create" => changes.additions += 1,
                "update" => changes.changes += 1,
                "delete" => changes.destructions += 1,
                _ => {}
            }
        }
    }
    let outputs_change = plan["output_changes"]
        .as_object()
        .into_iter()
        .flatten()
        .any(|(_, change)| change["actions"].as_array().is_some_and(|a| a.iter().any(|a| a != "no-op")));
    changes.has_changes = changes.additions + changes.changes + changes.destructions > 0 || outputs_change;
    changes
}

async fn copy(mut from: impl tokio::io::AsyncRead + Unpin, to: mpsc::UnboundedSender<Vec<u8>>) {
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read) = from.read(&mut buffer).await {
        if read == 0 || to.send(buffer[..read].to_vec()).is_err() {
            break;
        }
    }
}

/// Renews the job's lease (and reports the agent busy) every `report_in` seconds; a cancel
/// interrupts Terraform, and a job that is over stops it.
async fn heartbeat(
    client: Client,
    token: String,
    agent_id: String,
    mut report_in: u64,
    control: watch::Sender<Control>,
) {
    loop {
        tokio::time::sleep(Duration::from_secs(report_in.max(1))).await;
        match client.heartbeat(&token).await {
            Ok(beat) => {
                report_in = beat.report_in;
                if beat.cancel {
                    control.send_if_modified(|now| {
                        let changed = *now == Control::Run;
                        if changed {
                            *now = Control::Interrupt;
                        }
                        changed
                    });
                }
            }
            Err(ClientError::JobOver(_)) => {
                let _ = control.send(Control::Kill);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "the job's report failed; retried"),
        }
        let _ = client.report(&agent_id, "busy").await;
    }
}

/// Sends the state file to the workspace each time it changes while Terraform applies; `sent`
/// is what Hangar kept last, which the apply's final upload reads.
async fn watch_state(
    client: Client,
    token: String,
    workspace_id: String,
    state: PathBuf,
    sent: Arc<Mutex<Option<Vec<u8>>>>,
) {
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut sent = sent.lock().await;
        if let Err(e) = upload_if_changed(&client, &token, &workspace_id, &state, &mut sent).await {
            tracing::warn!(error = %e, "the state could not be sent; retried");
        }
    }
}

/// Sends the state file if it holds something other than what was sent (or read) last.
async fn upload_if_changed(
    client: &Client,
    token: &str,
    workspace_id: &str,
    state: &Path,
    sent: &mut Option<Vec<u8>>,
) -> Result<(), ClientError> {
    let Ok(current) = std::fs::read(state) else { return Ok(()) };
    if sent.as_deref() == Some(current.as_slice()) || serde_json::from_slice::<Value>(&current).is_err() {
        return Ok(());
    }
    match client.put_state(token, workspace_id, &current).await {
        // This serial is the workspace's current one already: sent before, its answer lost.
        Err(ClientError::Refused { status: reqwest::StatusCode::CONFLICT, body }) if is_current_serial(&body) => {}
        other => other?,
    }
    *sent = Some(current);
    Ok(())
}

/// Whether Hangar refused a state because its serial is the workspace's current one ("The
/// state's serial N does not advance the workspace's current serial N."), not a higher one
/// someone else wrote.
fn is_current_serial(body: &str) -> bool {
    let serial_after = |marker: &str| {
        let at = body.find(marker)? + marker.len();
        body[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u64>().ok()
    };
    match (serial_after("state's serial "), serial_after("current serial ")) {
        (Some(sent), Some(current)) => body.contains("does not advance") && sent == current,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_current_serial_sent_again_is_taken_as_kept() {
        let refusal = |sent: u64, current: u64| {
            format!("{{\"errors\":[{{\"detail\":\"The state's serial {sent} does not advance the workspace's current serial {current}.\"}}]}}")
        };
        assert!(is_current_serial(&refusal(4, 4)));
        assert!(!is_current_serial(&refusal(4, 9)), "someone else wrote a later state");
        assert!(!is_current_serial("The workspace is locked by User x"));
    }

    #[test]
    fn a_plan_counts_each_action_and_output_changes() {
        let plan = json!({
            "resource_changes": [
                {"change": {"actions": ["create"]}},
                {"change": {"actions": ["delete", "create"]}},
                {"change": {"actions": ["no-op"]}},
            ],
            "output_changes": {"a": {"actions": ["no-op"]}},
        });
        let changes = counted(&plan);
        assert_eq!((changes.additions, changes.changes, changes.destructions), (2, 0, 1));
        assert!(changes.has_changes);
        let outputs_only = json!({"output_changes": {"a": {"actions": ["create"]}}});
        assert!(counted(&outputs_only).has_changes);
        assert!(!counted(&json!({"output_changes": {"a": {"actions": ["no-op"]}}})).has_changes);
    }

    #[test]
    fn the_host_is_what_terraform_names() {
        assert_eq!(host_of("https://localhost:8443/"), "localhost:8443");
        assert_eq!(host_of("https://hangar.example.com"), "hangar.example.com");
    }
}
