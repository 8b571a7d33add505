//! Runs the bench commands standalone, as `sluice bench` will:
//! `cargo run --example bench -- smtp --server 127.0.0.1:2525 ...`.
#![forbid(unsafe_code)]

use clap::Parser;

/// Sluice's load generator.
#[derive(Parser)]
#[command(name = "bench")]
struct Cli {
    #[command(subcommand)]
    cmd: bench::Command,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    bench::run(Cli::parse().cmd).await
}
