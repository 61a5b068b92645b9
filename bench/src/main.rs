//! Hangar's benchmark harness. `bench/run` builds everything and runs `bench all`; each figure
//! can also be run alone. Figures are printed as Markdown, for BENCHMARKS.md.

mod agent_cost;
mod api;
mod aws_delay;
mod cold;
mod cold_response;
mod counting;
mod endpoints;
mod fake_cloud;
mod ingest;
mod jwt_login;
mod load;
mod local;
mod nginx;
mod prod_path;
mod readme_page;
mod rotation;
mod run_queue;
mod server;
mod sizes;
mod state_pull;
mod stats;
mod store_cost;
mod warm;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Hangar's benchmarks; `bench/run` runs them all")]
struct Cli {
    #[command(subcommand)]
    figure: Figure,
}

#[derive(Subcommand)]
enum Figure {
    /// Every figure, in order.
    All {
        /// Where `cargo lambda build --output-format zip` put the packages.
        #[arg(long)]
        lambda_dir: PathBuf,
        /// Where cargo put the release binaries.
        #[arg(long)]
        bin_dir: PathBuf,
        /// Where cargo put dev-server and hello-hyper built with the `speed` profile.
        #[arg(long)]
        server_dir: PathBuf,
        #[arg(long, default_value = "x86_64")]
        target: String,
        #[arg(long)]
        moto: String,
        /// Added to every AWS call of the production-path figures (a same-region round trip).
        #[arg(long, default_value_t = prod_path::DEFAULT_DELAY_MS)]
        aws_delay_ms: u64,
    },
    /// Zipped and raw release binary sizes.
    Sizes {
        #[arg(long)]
        lambda_dir: PathBuf,
        #[arg(long, default_value = "x86_64")]
        target: String,
    },
    /// Cold init against a local Runtime API stand-in.
    Cold {
        #[arg(long)]
        bin_dir: PathBuf,
    },
    /// Warm request latency and throughput against dev-server.
    Warm {
        /// Where dev-server and hello-hyper are (bench/run builds them with the `speed` profile).
        #[arg(long)]
        bin_dir: PathBuf,
        #[arg(long)]
        moto: String,
    },
    /// Warm GET module throughput against nginx serving the same bytes (wrk); also part of
    /// `warm`.
    Nginx {
        #[arg(long)]
        bin_dir: PathBuf,
    },
    /// Reads on DynamoDB (moto behind a delaying, counting proxy): AWS calls and latency per
    /// request against one raw GetItem; and registry-api's cold first response.
    ProdPath {
        #[arg(long)]
        bin_dir: PathBuf,
        #[arg(long)]
        moto: String,
        /// Added to every AWS call (a same-region round trip).
        #[arg(long, default_value_t = prod_path::DEFAULT_DELAY_MS)]
        aws_delay_ms: u64,
    },
    /// `terraform state pull` of a 10 MB state on DynamoDB and S3 (moto behind the delaying
    /// proxy) against a raw S3 GET of the same bytes.
    StatePull {
        #[arg(long)]
        bin_dir: PathBuf,
        #[arg(long)]
        moto: String,
        #[arg(long, default_value_t = prod_path::DEFAULT_DELAY_MS)]
        aws_delay_ms: u64,
    },
    /// Store items per request, at 100 and 10,000 modules.
    StoreCost,
    /// Store calls of agent operations, at HANGAR_MAX_AGENTS 1 and 1,000,000.
    AgentCost,
    /// A claim's store cost at 1 and 10,000 queued jobs; 500 runs drained by 10 agents.
    RunQueue,
    /// A JWT login's store cost with 1 and 64 auth methods, and its time beside lookup-self.
    JwtLogin,
    /// Archive ingest against raw gunzip.
    Ingest,
    /// A rotation run with 10,000 static roles, 100 due.
    Rotation,
    /// The worst module page a README can make against a plain one, and ping beside it.
    ReadmePage,
    #[command(hide = true)]
    IngestChild { archive: PathBuf },
    #[command(hide = true)]
    GunzipChild { archive: PathBuf },
}

#[tokio::main]
async fn main() {
    // No log subscriber: the harness's output is the figures, which a request log would drown.
    let figure = match Cli::parse().figure {
        // Each figure is printed as soon as it is measured, so a later one that fails loses
        // none of those before it.
        Figure::All { lambda_dir, bin_dir, server_dir, target, moto, aws_delay_ms } => {
            show(sizes::run(&lambda_dir, &target));
            show(cold::run(&bin_dir).await);
            show(warm::run(&server_dir, &moto).await);
            show(prod_path::run(&bin_dir, &moto, Duration::from_millis(aws_delay_ms)).await);
            show(state_pull::run(&bin_dir, &moto, Duration::from_millis(aws_delay_ms)).await);
            show(store_cost::run().await);
            show(agent_cost::run().await);
            show(run_queue::run().await);
            show(jwt_login::run().await);
            show(ingest::run().await);
            show(rotation::run().await);
            show(readme_page::run().await);
            return;
        }
        Figure::Sizes { lambda_dir, target } => sizes::run(&lambda_dir, &target),
        Figure::Cold { bin_dir } => cold::run(&bin_dir).await,
        Figure::Warm { bin_dir, moto } => warm::run(&bin_dir, &moto).await,
        Figure::Nginx { bin_dir } => nginx::alone(&bin_dir).await,
        Figure::ProdPath { bin_dir, moto, aws_delay_ms } => {
            prod_path::run(&bin_dir, &moto, Duration::from_millis(aws_delay_ms)).await
        }
        Figure::StatePull { bin_dir, moto, aws_delay_ms } => {
            state_pull::run(&bin_dir, &moto, Duration::from_millis(aws_delay_ms)).await
        }
        Figure::StoreCost => store_cost::run().await,
        Figure::AgentCost => agent_cost::run().await,
        Figure::RunQueue => run_queue::run().await,
        Figure::JwtLogin => jwt_login::run().await,
        Figure::Ingest => ingest::run().await,
        Figure::Rotation => rotation::run().await,
        Figure::ReadmePage => readme_page::run().await,
        Figure::IngestChild { archive } => return ingest::ingest_child(archive).await,
        Figure::GunzipChild { archive } => return ingest::gunzip_child(archive),
    };
    show(figure);
}

fn show(figure: String) {
    println!("{figure}\n");
}
