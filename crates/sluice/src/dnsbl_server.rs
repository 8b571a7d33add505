//! `sluice dnsbl serve --listen ADDR --zone NAME=FILE...`: a DNSBL server
//! for rbldnsd `ip4set` lists, answering classic and /25 bitmap queries.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand};

/// `sluice dnsbl ...`.
#[derive(Subcommand)]
pub enum DnsblCommand {
    /// Serve blocklists over DNS (UDP and TCP).
    Serve(ServeArgs),
}

/// Arguments of `sluice dnsbl serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Address to answer on, e.g. 127.0.0.1:5353.
    #[arg(long)]
    listen: SocketAddr,
    /// A zone and its list file (rbldnsd ip4set format); may be repeated.
    #[arg(long = "zone", value_name = "NAME=FILE", required = true)]
    zones: Vec<String>,
}

fn zone(spec: &str) -> anyhow::Result<(String, PathBuf)> {
    let (name, file) = spec
        .split_once('=')
        .ok_or_else(|| anyhow!("--zone {spec:?}: expected NAME=FILE"))?;
    if name.is_empty() || file.is_empty() {
        return Err(anyhow!("--zone {spec:?}: expected NAME=FILE"));
    }
    Ok((name.to_string(), PathBuf::from(file)))
}

/// Runs the server until SIGTERM or Ctrl-C; SIGHUP re-reads the lists
/// (changed files are also picked up on their own).
pub async fn run(command: DnsblCommand) -> anyhow::Result<()> {
    let DnsblCommand::Serve(args) = command;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        ))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
    let zones = args
        .zones
        .iter()
        .map(|z| zone(z))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let server = dnsbl::Server::start(dnsbl::ServerConfig::new(args.listen, zones))
        .await
        .context("cannot start the DNSBL server")?;
    tracing::info!(listener = "dnsbl", addr = %server.local_addr(), "listening");
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => server.reload(),
        }
    }
    let stats = server.stats();
    tracing::info!(?stats, "stopping");
    server.shutdown().await;
    Ok(())
}
