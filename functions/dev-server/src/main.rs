//! `cargo run -p dev-server`: every Hangar family on one local port.

use clap::Parser;
use dev_server::{install_crypto_provider, start, Options};

/// dev-server serves many requests from one process, each allocating and freeing the items and
/// JSON it handles: under load glibc's malloc and free were a fifth of its samples
/// (BENCHMARKS.md, "Warm requests"). The functions keep the system allocator, for their size.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match serve().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The reason as a sentence, e.g. the data directory another dev-server holds.
            eprintln!("dev-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let log = hangar::app::init_buffered_tracing(false);
    install_crypto_provider();
    let options = Options::parse();
    let config = hangar::config::Config::from_env()?;
    let running = start(options, config).await?;
    if let Some(token) = &running.generated_admin_token {
        println!("Site-admin token (shown once, only its hash is stored): {token}");
        println!("  Lost it? Restart with HANGAR_ADMIN_TOKEN set to a new value: it replaces this one.");
    }
    if let Some(token) = &running.generated_root_token {
        println!("Root service token for /v1 (shown once, only its hash is stored): {token}");
        println!("  Lost it? Restart with HANGAR_ROOT_SERVICE_TOKEN set to a new value: it replaces this one.");
    }
    if let Some(cert) = &running.certificate {
        println!("Serving https with a self-signed certificate; trust it with SSL_CERT_FILE={}", cert.display());
    }
    println!("The web console: {}/app (sign in with a token)", running.url);
    // Last: clients wait for this line to know the address (tests/clients/conftest.py).
    println!("Hangar is listening on {}", running.url);
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.stop().await?;
    // Every line of the requests served is written before the process exits.
    drop(log);
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}
