//! `hangar-agent`: configured by its environment (`HANGAR_ADDRESS`, `HANGAR_AGENT_TOKEN`,
//! `HANGAR_AGENT_NAME`, `HANGAR_TERRAFORM`); `--single` takes one job, then exits.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

#[derive(Parser)]
#[command(name = "hangar-agent", about = "Runs Hangar's plans and applies for an agent pool.")]
struct Options {
    /// Hangar's address.
    #[arg(long, env = "HANGAR_ADDRESS")]
    address: String,
    /// The agent pool's token.
    #[arg(long, env = "HANGAR_AGENT_TOKEN", hide_env_values = true)]
    token: String,
    /// The agent's name (the host's name by default).
    #[arg(long, env = "HANGAR_AGENT_NAME")]
    name: Option<String>,
    /// The Terraform binary to run: Hangar never downloads one.
    #[arg(long, env = "HANGAR_TERRAFORM", default_value = "terraform")]
    terraform: PathBuf,
    /// Where jobs' working directories go (the system's temporary directory by default).
    #[arg(long, env = "HANGAR_AGENT_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// Take one job, then exit.
    #[arg(long)]
    single: bool,
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "hangar-agent".to_owned())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_target(false).init();
    // Terraform runs as this user: undumpable, this process's memory and its environment (the
    // pool's token, `/proc/<pid>/environ`) are not its to read.
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %e, "the agent could not make itself undumpable");
    }
    let options = Options::parse();
    let settings = hangar_agent::Settings {
        address: options.address,
        token: options.token,
        name: options.name.unwrap_or_else(host_name),
        terraform: options.terraform,
        single: options.single,
        work_dir: options.work_dir,
        poll: Duration::from_secs(1),
        ca_file: None,
    };
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = stop_tx.send(true);
    });
    match hangar_agent::run(settings, stop).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hangar-agent: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
