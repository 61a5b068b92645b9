//! `hangar-agent`: registers with a Hangar agent pool, claims one job at a time (pull, never
//! push), runs Terraform for it, and reports as it goes. dev-server's built-in runners run the
//! same loop in its own process.

pub mod client;
mod credentials;
mod job;
mod log;
mod workdir;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use client::{Client, ClientError};

/// What an agent is told by its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Hangar's address (`https://hangar.example.com`).
    pub address: String,
    /// An agent pool's token.
    pub token: String,
    pub name: String,
    /// The Terraform binary to run (a path, or a name looked up on the `PATH`).
    pub terraform: PathBuf,
    /// Take one job, then exit.
    pub single: bool,
    /// Where jobs' working directories go (the system's temporary directory by default).
    pub work_dir: Option<PathBuf>,
    /// How long an idle agent waits between two looks at its queue.
    pub poll: Duration,
    /// A certificate authority to trust beside the platform's (dev-server's own certificate, for
    /// its built-in runners); Terraform is given it too (`SSL_CERT_FILE`).
    pub ca_file: Option<PathBuf>,
}

/// Runs the agent until `stop` turns true (then it reports `exited`), or after one job with
/// `single`.
pub async fn run(settings: Settings, mut stop: watch::Receiver<bool>) -> Result<(), ClientError> {
    let client = Client::new(&settings.address, &settings.token, settings.ca_file.as_deref())?;
    let Some((mut agent_id, mut report_in)) = register(&client, &settings.name, &mut stop).await? else {
        return Ok(());
    };
    let mut reported = Instant::now();
    loop {
        let stopping = *stop.borrow();
        if stopping {
            let _ = client.report(&agent_id, "exited").await;
            return Ok(());
        }
        if reported.elapsed() >= Duration::from_secs(report_in) {
            match client.report(&agent_id, "idle").await {
                Ok(next) => report_in = next,
                // Released while it could not report (silent past the errored window, deleted):
                // it registers again.
                Err(ClientError::Refused { status, .. }) if status.as_u16() == 409 || status.as_u16() == 404 => {
                    let Some(registered) = register(&client, &settings.name, &mut stop).await? else { return Ok(()) };
                    (agent_id, report_in) = registered;
                }
                Err(e) => tracing::warn!(error = %e, "reporting failed; retried"),
            }
            reported = Instant::now();
        }
        let claimed = match client.claim(&agent_id).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "claiming a job failed; retried");
                None
            }
        };
        let Some(claim) = claimed else {
            tokio::select! {
                _ = tokio::time::sleep(settings.poll) => {}
                _ = stop.changed() => {}
            }
            continue;
        };
        tracing::info!(run = %claim.run, phase = %claim.phase, "job claimed");
        let _ = client.report(&agent_id, "busy").await;
        let runner = job::Runner {
            client: &client,
            agent_id: &agent_id,
            terraform: &settings.terraform,
            work_parent: settings.work_dir.as_deref(),
            ca_file: settings.ca_file.as_deref(),
        };
        if let Err(e) = runner.run(&claim).await {
            tracing::warn!(run = %claim.run, error = %e, "the job's end could not be reported");
        }
        tracing::info!(run = %claim.run, phase = %claim.phase, "job done");
        report_in = client.report(&agent_id, "idle").await.unwrap_or(report_in);
        reported = Instant::now();
        if settings.single {
            let _ = client.report(&agent_id, "exited").await;
            return Ok(());
        }
    }
}

/// Registers the agent, trying again (every 1 to 30 seconds) while Hangar cannot be reached or
/// refuses for a reason that may pass (its live-agent limit); a token Hangar does not know stops
/// it. `None` when told to stop first.
async fn register(
    client: &Client,
    name: &str,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<(String, u64)>, ClientError> {
    let mut wait = Duration::from_secs(1);
    loop {
        match client.register(name).await {
            Ok((id, report_in)) => {
                tracing::info!(agent = %id, name, "registered");
                return Ok(Some((id, report_in)));
            }
            Err(e @ ClientError::Refused { status, .. }) if status.as_u16() == 401 => return Err(e),
            Err(e) => tracing::warn!(error = %e, "registering failed; retried in {}s", wait.as_secs()),
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.changed() => {}
        }
        let stopping = *stop.borrow();
        if stopping {
            return Ok(None);
        }
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}
