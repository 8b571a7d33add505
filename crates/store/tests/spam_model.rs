//! The spam models in the store: moves into and out of Junk queue
//! training, a message moved back and forth counts once, and the counts
//! a classifier reads back.

use store::{Delivery, SqliteOptions, SqliteStore, Store};

async fn open() -> (tempfile::TempDir, SqliteStore, i64) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let id = store.add_account("ann@example.org", "pw").await.unwrap();
    (dir, store, id)
}

fn tokens(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[tokio::test]
async fn moves_into_and_out_of_junk_queue_training() {
    let (_dir, store, ann) = open().await;
    let inbox = store.mailbox(ann, "INBOX").await.unwrap().unwrap().id;
    let junk = store.special_use_of(&[inbox], "\\Junk").await.unwrap()[0];
    assert_ne!(junk, inbox, "accounts start with a Junk mailbox");
    let trash = store.special_use_of(&[inbox], "\\Trash").await.unwrap()[0];
    let mut w = store.message_writer();
    w.write(b"Subject: cheap pills\r\n\r\nbuy\r\n")
        .await
        .unwrap();
    let receipt = w
        .deliver(Delivery {
            mailboxes: vec![inbox],
            ..Default::default()
        })
        .await
        .unwrap();
    let uid = receipt.entries[0].1;

    let map = store.move_messages(inbox, &[uid], junk).await.unwrap();
    let queued = store.spam_training_batch(10).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert!(queued[0].spam);
    assert_eq!((queued[0].account, queued[0].blob), (ann, receipt.blob));

    // Throwing it away from Junk says nothing; copying it out says ham.
    store.copy_messages(junk, &[map[0].1], trash).await.unwrap();
    assert_eq!(store.spam_training_batch(10).await.unwrap().len(), 1);
    store.copy_messages(junk, &[map[0].1], inbox).await.unwrap();
    let queued = store.spam_training_batch(10).await.unwrap();
    assert_eq!(queued.len(), 2);
    assert!(!queued[1].spam);
}

#[tokio::test]
async fn a_message_trained_twice_counts_once_and_moving_back_retrains() {
    let (_dir, store, ann) = open().await;
    let blob = Some(7);
    let words = tokens(&["cheap", "pills"]);
    assert!(store
        .train_spam(Some(ann), blob, words.clone(), true, None)
        .await
        .unwrap());
    assert!(!store
        .train_spam(Some(ann), blob, words.clone(), true, None)
        .await
        .unwrap());
    let model = store
        .spam_model(Some(ann), tokens(&["cheap", "x"]))
        .await
        .unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (1, 0));
    assert_eq!(model.counts.get("cheap"), Some(&(1, 0)));
    assert!(!model.counts.contains_key("x"));

    // Moved back out of Junk: untrained as spam, trained as ham.
    store
        .train_spam(Some(ann), blob, words.clone(), false, None)
        .await
        .unwrap();
    let model = store.spam_model(Some(ann), words.clone()).await.unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (0, 1));
    assert_eq!(model.counts.get("pills"), Some(&(0, 1)));

    // The global model is apart.
    let global = store.spam_model(None, words.clone()).await.unwrap();
    assert_eq!(global, store::SpamModel::default());
    assert_eq!(store.spam_token_count(Some(ann)).await.unwrap(), 2);
    store
        .forget_spam_tokens(Some(ann), tokens(&["cheap"]))
        .await
        .unwrap();
    assert_eq!(store.spam_token_rows(Some(ann)).await.unwrap().len(), 1);
}
