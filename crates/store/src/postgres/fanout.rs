//! Change notices between nodes. Each node sends the ids of the mailboxes
//! its commits changed on one PostgreSQL channel (`NOTIFY`), and listens
//! on it with one connection of its own (`LISTEN`), waking its IDLE
//! sessions for what other nodes changed. A notice carries ids only, never
//! content: a woken session asks the store what changed since the modseq
//! it knows, so a notice lost or doubled costs nothing but a look.
//!
//! PostgreSQL does not replay notices to a connection that was away: after
//! the listening connection comes back, every watched mailbox is woken
//! once (a resync by modseq). Sessions also look on their own now and
//! then, the slow poll that covers the rest.

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use super::tls::Connector;
use crate::model::MailboxId;
use crate::notify::Watchers;

/// The channel every node listens on.
const CHANNEL: &str = "sluice_mailboxes";

/// PostgreSQL refuses payloads of 8,000 bytes and more.
const MAX_PAYLOAD: usize = 7_900;

/// How long the listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// This node's side of the channel; the tasks stop when it is dropped.
pub(super) struct Fanout {
    outgoing: mpsc::UnboundedSender<MailboxId>,
    /// None for a one-shot command, which has no sessions to wake.
    listener: Option<tokio::task::JoinHandle<()>>,
}

impl Fanout {
    /// Starts the publisher (on the pool) and the listener (on a
    /// connection of its own, made from `config` by `connector`); the
    /// receiver hears when the listener first listens.
    pub(super) fn start(
        pool: Pool,
        config: tokio_postgres::Config,
        connector: Connector,
        watchers: &Arc<Watchers>,
    ) -> (Fanout, oneshot::Receiver<()>) {
        let node = node_id();
        let (outgoing, rx) = mpsc::unbounded_channel();
        tokio::spawn(publish(pool, node.clone(), rx));
        let (ready, listening) = oneshot::channel();
        let listener = tokio::spawn(listen(
            config,
            connector,
            node,
            Arc::downgrade(watchers),
            ready,
        ));
        let fanout = Fanout {
            outgoing,
            listener: Some(listener),
        };
        (fanout, listening)
    }

    /// The publisher alone, for a one-shot command: what it changes (an
    /// import into mailboxes) still wakes the running nodes' sessions.
    pub(super) fn send_only(pool: Pool) -> Fanout {
        let (outgoing, rx) = mpsc::unbounded_channel();
        tokio::spawn(publish(pool, node_id(), rx));
        Fanout {
            outgoing,
            listener: None,
        }
    }

    /// Tells the other nodes these mailboxes changed (after the commit).
    pub(super) fn send(&self, mailboxes: impl IntoIterator<Item = MailboxId>) {
        for m in mailboxes {
            // Only fails once the publisher stopped, when the store goes.
            let _ = self.outgoing.send(m);
        }
    }
}

impl Drop for Fanout {
    fn drop(&mut self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
    }
}

/// A random name for this node's notices, so it knows its own.
fn node_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Sends what `rx` brings, gathering what queued meanwhile into one notice:
/// a burst of deliveries costs a round trip per burst, not per delivery.
async fn publish(pool: Pool, node: String, mut rx: mpsc::UnboundedReceiver<MailboxId>) {
    while let Some(first) = rx.recv().await {
        let mut ids = BTreeSet::from([first]);
        while let Ok(id) = rx.try_recv() {
            ids.insert(id);
        }
        let Ok(client) = pool.get().await else {
            // The database is away: the listeners resync when it is back.
            continue;
        };
        for payload in payloads(&node, &ids) {
            if let Err(e) = client
                .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
                .await
            {
                tracing::debug!(error = %e, "change notice not sent");
            }
        }
    }
}

/// `node id,id,...` payloads, each under PostgreSQL's limit.
fn payloads(node: &str, ids: &BTreeSet<MailboxId>) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for id in ids {
        let id = id.to_string();
        if !current.is_empty() && current.len() + 1 + id.len() > MAX_PAYLOAD {
            out.push(std::mem::take(&mut current));
        }
        if current.is_empty() {
            current = format!("{node} {id}");
        } else {
            current.push(',');
            current.push_str(&id);
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The mailboxes a notice from another node names; `None` for this node's
/// own notices (its sessions were woken at the commit) and for anything
/// malformed.
fn parse(payload: &str, node: &str) -> Option<Vec<MailboxId>> {
    let (from, ids) = payload.split_once(' ')?;
    if from == node {
        return None;
    }
    ids.split(',').map(|id| id.parse().ok()).collect()
}

/// Listens until the store goes, connecting again whenever the connection
/// drops.
async fn listen(
    config: tokio_postgres::Config,
    connector: Connector,
    node: String,
    watchers: Weak<Watchers>,
    ready: oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut resync = false;
    loop {
        let (tx, mut notices) = mpsc::unbounded_channel();
        match connector.connect(&config, Some(tx)).await {
            Ok((client, driver)) => {
                let driver = tokio::spawn(driver);
                if client
                    .batch_execute(&format!("LISTEN {CHANNEL}"))
                    .await
                    .is_ok()
                {
                    if resync {
                        let Some(w) = watchers.upgrade() else { return };
                        w.notify_all();
                    }
                    resync = true;
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    while let Some(payload) = notices.recv().await {
                        let Some(w) = watchers.upgrade() else { return };
                        if let Some(ids) = parse(&payload, &node) {
                            w.notify(ids);
                        }
                    }
                }
                driver.abort();
                tracing::warn!(
                    "the PostgreSQL connection for change notices dropped; connecting again"
                );
            }
            Err(e) => {
                if watchers.strong_count() == 0 {
                    return;
                }
                tracing::debug!(error = %super::describe(&e), "cannot connect for change notices");
                resync = true;
            }
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_name_mailboxes_and_stay_under_the_limit() {
        let ids: BTreeSet<MailboxId> = (1_000_000..1_002_000).collect();
        let sent = payloads("n1", &ids);
        assert!(sent.len() > 1, "2,000 ids need several notices");
        let mut back = Vec::new();
        for p in &sent {
            assert!(p.len() < 8000, "{}", p.len());
            back.extend(parse(p, "n2").unwrap());
        }
        assert_eq!(back, ids.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn a_nodes_own_notices_and_malformed_ones_are_ignored() {
        assert_eq!(parse("n1 4,5", "n1"), None);
        assert_eq!(parse("n1 4,5", "n2"), Some(vec![4, 5]));
        assert_eq!(parse("n1 4,x", "n2"), None);
        assert_eq!(parse("garbage", "n2"), None);
    }
}
