//! Giving up root after binding the ports (`[server] user`).
//!
//! Started as root, `sluice serve` binds its listeners (ports below 1024
//! need it), then becomes `[server] user` (and its group, or
//! `[server] group`) before it opens the data directory, so every file
//! it creates belongs to that user. It does not go on as root unless told
//! to: without a user, root may serve only on loopback addresses (a
//! local trial), or anywhere with `run_as_root = true`.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{bail, Context as _};
use nix::unistd::{Gid, Group, Uid, User};

/// The `[server]` configuration section.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The user to run as after binding, when started as root.
    pub user: Option<String>,
    /// Its group; default: the user's primary group.
    pub group: Option<String>,
    /// Stay root when started as root without a `user` (not advised).
    pub run_as_root: bool,
}

/// Drops root for the configured user, or refuses to go on as root
/// where that was not asked for. `listening` are the bound addresses.
pub fn drop_root(
    config: &ServerConfig,
    listening: &[SocketAddr],
    data_dir: &Path,
) -> anyhow::Result<()> {
    if !Uid::effective().is_root() {
        if config.user.is_some() {
            tracing::debug!("not started as root: [server] user has nothing to do");
        }
        return Ok(());
    }
    let Some(name) = &config.user else {
        if may_stay_root(config, listening) {
            tracing::warn!("running as root ([server] user is not set)");
            return Ok(());
        }
        bail!(
            "started as root with listeners beyond loopback: set [server] user = \"...\" \
             (the account to run as after binding), or run_as_root = true"
        );
    };
    let user = User::from_name(name)
        .with_context(|| format!("[server] user: cannot look up {name}"))?
        .with_context(|| format!("[server] user: no user {name}"))?;
    let gid = match &config.group {
        Some(g) => {
            Group::from_name(g)
                .with_context(|| format!("[server] group: cannot look up {g}"))?
                .with_context(|| format!("[server] group: no group {g}"))?
                .gid
        }
        None => user.gid,
    };
    if user.uid.is_root() {
        bail!("[server] user {name} is root; name an unprivileged account");
    }
    become_user(user.uid, gid)?;
    check_writable(data_dir, name)?;
    tracing::info!(user = %name, uid = %user.uid, gid = %gid, "dropped root");
    Ok(())
}

/// Without a user to become: root stays only when told to, or when
/// nothing listens beyond loopback (a local trial).
fn may_stay_root(config: &ServerConfig, listening: &[SocketAddr]) -> bool {
    config.run_as_root || listening.iter().all(|a| a.ip().is_loopback())
}

fn become_user(uid: Uid, gid: Gid) -> anyhow::Result<()> {
    // Groups first: once the uid changes, they can no longer be changed.
    nix::unistd::setgroups(&[gid]).context("setgroups")?;
    nix::unistd::setgid(gid).context("setgid")?;
    nix::unistd::setuid(uid).context("setuid")?;
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() {
        bail!("root could be taken back after dropping it");
    }
    Ok(())
}

/// The data directory must be writable by the user now running.
fn check_writable(dir: &Path, user: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "data directory {} cannot be created by user {user}",
            dir.display()
        )
    })?;
    let probe = dir.join(".write-test");
    std::fs::write(&probe, b"").with_context(|| {
        format!(
            "data directory {} is not writable by user {user} (chown it)",
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_stays_only_on_loopback_or_when_told() {
        let loopback: Vec<SocketAddr> = vec![
            "127.0.0.1:25".parse().unwrap(),
            "[::1]:143".parse().unwrap(),
        ];
        let public: Vec<SocketAddr> = vec![
            "127.0.0.1:25".parse().unwrap(),
            "0.0.0.0:25".parse().unwrap(),
        ];
        let default = ServerConfig::default();
        assert!(may_stay_root(&default, &loopback));
        assert!(!may_stay_root(&default, &public));
        let told = ServerConfig {
            run_as_root: true,
            ..ServerConfig::default()
        };
        assert!(may_stay_root(&told, &public));
    }
}
