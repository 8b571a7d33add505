//! A store opened for a one-shot command (`PgOptions::tool`): no
//! change-notice listener, yet what the command changes reaches the nodes.

use std::time::Duration;

use store::{PgOptions, PgStore, Store};

use super::{deliver, open_with_account, woken, Fixture};

/// The store's database's backends with this application name.
fn backends(f: &Fixture, name: &str) -> i64 {
    f.sql(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND application_name = '{name}'",
        f.db
    ))
    .parse()
    .unwrap()
}

/// Backends of the store's database listening for change notices.
fn listening(f: &Fixture) -> i64 {
    f.sql(&format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND query LIKE 'LISTEN %'",
        f.db
    ))
    .parse()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_starts_no_listener_and_its_changes_still_reach_the_nodes() {
    let (f, _account, inbox) = open_with_account().await;
    // The node listens: what is looked at below shows a listener.
    assert_eq!(backends(&f, "sluice listen"), 1);
    assert_eq!(listening(&f), 1);

    let mut options = PgOptions::new(&f.pg.url(&f.db));
    options.tool = true;
    let tool = PgStore::connect(options).await.unwrap();
    assert!(backends(&f, "sluice tool") >= 1);
    assert_eq!(backends(&f, "sluice listen"), 1, "the node's alone");
    assert_eq!(listening(&f), 1, "the node's alone");

    // A message the tool delivers (an import) wakes the node's sessions.
    let mut on_node = f.store.watch_mailbox(inbox);
    deliver(&tool, inbox, b"Subject: imported\r\n\r\nhi\r\n").await;
    assert!(
        woken(&mut on_node, Duration::from_secs(10)).await.is_some(),
        "the node was not told of the tool's delivery"
    );
    // A directory edit moves the serial the nodes poll.
    let serial = f.store.directory_serial().await.unwrap();
    tool.add_account("b@example.org", "pw").await.unwrap();
    assert!(f.store.directory_serial().await.unwrap() > serial);

    // Its pool closes with its last handle: nothing of it lingers.
    drop(tool);
    assert!(sluice_testkit::wait_until(Duration::from_secs(10), || {
        backends(&f, "sluice tool") == 0
    }));
}
