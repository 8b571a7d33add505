//! PostgreSQL: the spam models (a message trained twice counts once,
//! moving back retrains, the global model apart, counts never below 0),
//! the training queue, and an account's own threshold.

use store::{SpamModel, SpamTraining, Store, StoreError};

use super::{open, Fixture};

/// A store with the account `ann@example.org`, made with SQL so these
/// checks do not lean on the directory's methods; the account's id.
async fn with_account() -> (Fixture, i64) {
    let f = open().await;
    let id = f.sql(
        "INSERT INTO domains (name) VALUES ('example.org');
         INSERT INTO accounts (address, domain_id, password_hash, created)
         VALUES ('ann@example.org', (SELECT id FROM domains), 'x', 0) RETURNING id",
    );
    (f, id.parse().unwrap())
}

fn tokens(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn serial(f: &Fixture) -> i64 {
    f.sql("SELECT value FROM meta WHERE key = 'directory_serial'")
        .parse()
        .unwrap()
}

/// The (token, spam, ham) rows of a model, in token order.
async fn counts(f: &Fixture, account: Option<i64>) -> Vec<(String, u32, u32)> {
    f.store
        .spam_token_rows(account)
        .await
        .unwrap()
        .into_iter()
        .map(|(token, spam, ham, _)| (token, spam, ham))
        .collect()
}

fn row(token: &str, spam: u32, ham: u32) -> (String, u32, u32) {
    (token.to_string(), spam, ham)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_trained_twice_counts_once_and_moving_back_retrains() {
    let (f, ann) = with_account().await;
    let store = &f.store;
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
    assert_eq!(
        f.sql("SELECT account_id || ':' || blob_id || ':' || spam FROM spam_trained"),
        format!("{ann}:7:true")
    );

    // Moved back out of Junk: untrained as spam, trained as ham.
    assert!(store
        .train_spam(Some(ann), blob, words.clone(), false, None)
        .await
        .unwrap());
    let model = store.spam_model(Some(ann), words.clone()).await.unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (0, 1));
    assert_eq!(model.counts.get("pills"), Some(&(0, 1)));
    assert_eq!(
        f.sql("SELECT spam FROM spam_trained WHERE blob_id = 7"),
        "f"
    );

    // The global model is apart.
    let global = store.spam_model(None, words.clone()).await.unwrap();
    assert_eq!(global, SpamModel::default());
    assert_eq!(store.spam_token_count(None).await.unwrap(), 0);
    assert_eq!(store.spam_token_count(Some(ann)).await.unwrap(), 2);
    store
        .forget_spam_tokens(Some(ann), tokens(&["cheap"]))
        .await
        .unwrap();
    assert_eq!(counts(&f, Some(ann)).await, [row("pills", 0, 1)]);
    assert_eq!(store.spam_token_count(Some(ann)).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_model_is_account_zero_and_learns_without_a_blob_each_time() {
    let (f, ann) = with_account().await;
    let store = &f.store;
    for _ in 0..2 {
        assert!(store
            .train_spam(None, None, tokens(&["viagra", "win"]), true, None)
            .await
            .unwrap());
    }
    assert!(store
        .train_spam(None, None, tokens(&["win", "meeting"]), false, None)
        .await
        .unwrap());
    let model = store
        .spam_model(None, tokens(&["win", "meeting", "absent"]))
        .await
        .unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (2, 1));
    assert_eq!(model.counts.len(), 2);
    assert_eq!(model.counts["win"], (2, 1));
    assert_eq!(model.counts["meeting"], (0, 1));
    assert_eq!(
        f.sql("SELECT account_id || ':' || spam || ':' || ham FROM spam_totals"),
        "0:2:1"
    );
    assert_eq!(f.sql("SELECT count(*) FROM spam_trained"), "0");
    assert_eq!(
        store.spam_model(Some(ann), tokens(&["win"])).await.unwrap(),
        SpamModel::default()
    );
    assert_eq!(
        counts(&f, None).await,
        [row("meeting", 0, 1), row("viagra", 2, 0), row("win", 2, 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_given_twice_counts_twice_and_untraining_stops_at_zero() {
    let (f, ann) = with_account().await;
    let store = &f.store;
    let a = Some(ann);
    store
        .train_spam(a, Some(1), tokens(&["buy", "buy", "now"]), true, None)
        .await
        .unwrap();
    store
        .train_spam(a, Some(2), tokens(&["now"]), true, None)
        .await
        .unwrap();
    assert_eq!(counts(&f, a).await, [row("buy", 2, 0), row("now", 2, 0)]);

    // Retraining 1 as ham with other tokens than it was trained with:
    // the spam counts of those tokens go down, never below 0, and tokens
    // left with no counts go.
    f.sql("UPDATE spam_tokens SET spam = 1 WHERE token = 'buy'");
    store
        .train_spam(
            a,
            Some(1),
            tokens(&["buy", "buy", "buy", "new"]),
            false,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        counts(&f, a).await,
        [row("buy", 0, 3), row("new", 0, 1), row("now", 2, 0)]
    );
    store
        .train_spam(a, Some(1), tokens(&["buy", "new", "else"]), true, None)
        .await
        .unwrap();
    assert_eq!(
        counts(&f, a).await,
        [
            row("buy", 1, 2),
            row("else", 1, 0),
            row("new", 1, 0),
            row("now", 2, 0)
        ]
    );
    let model = store.spam_model(a, tokens(&["buy"])).await.unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_totals_never_go_below_zero() {
    let (f, ann) = with_account().await;
    let a = Some(ann);
    f.store
        .train_spam(a, Some(3), tokens(&["x"]), true, None)
        .await
        .unwrap();
    f.sql("UPDATE spam_totals SET spam = 0");
    f.store
        .train_spam(a, Some(3), tokens(&["x"]), false, None)
        .await
        .unwrap();
    let model = f.store.spam_model(a, tokens(&["x"])).await.unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (0, 1));
    assert_eq!(model.counts["x"], (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_with_no_messages_answers_no_counts() {
    let (f, ann) = with_account().await;
    f.sql(&format!(
        "INSERT INTO spam_tokens (account_id, token, spam, ham, seen) VALUES ({ann}, 'x', 3, 1, 0)"
    ));
    let model = f.store.spam_model(Some(ann), tokens(&["x"])).await.unwrap();
    assert_eq!(model, SpamModel::default());
    f.store
        .train_spam(Some(ann), None, tokens(&["y"]), false, None)
        .await
        .unwrap();
    let model = f
        .store
        .spam_model(Some(ann), tokens(&["x", "x", "y"]))
        .await
        .unwrap();
    assert_eq!(model.counts.len(), 2);
    assert_eq!(model.counts["x"], (3, 1));
    assert_eq!(model.counts["y"], (0, 1));
    let model = f.store.spam_model(Some(ann), vec![]).await.unwrap();
    assert_eq!((model.ham_messages, model.counts.len()), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_rows_say_when_each_token_was_last_trained() {
    let (f, ann) = with_account().await;
    let a = Some(ann);
    f.store
        .train_spam(a, None, tokens(&["b", "a"]), true, None)
        .await
        .unwrap();
    f.sql("UPDATE spam_tokens SET seen = 5");
    f.store
        .train_spam(a, None, tokens(&["b", "c"]), false, None)
        .await
        .unwrap();
    let rows = f.store.spam_token_rows(a).await.unwrap();
    let now = now();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0].0.as_str(), rows[0].1, rows[0].2, rows[0].3),
        ("a", 1, 0, 5)
    );
    for (token, _, _, seen) in &rows[1..] {
        assert!((now - seen).abs() < 60, "{token}: {seen}");
    }
    assert_eq!((rows[1].1, rows[1].2, rows[2].1, rows[2].2), (1, 1, 0, 1));

    // Pruning: unknown tokens are no matter; the totals stay.
    f.store
        .forget_spam_tokens(a, tokens(&["a", "c", "zz"]))
        .await
        .unwrap();
    assert_eq!(counts(&f, a).await, [row("b", 1, 1)]);
    f.store.forget_spam_tokens(a, vec![]).await.unwrap();
    f.store
        .forget_spam_tokens(None, tokens(&["b"]))
        .await
        .unwrap();
    assert_eq!(f.store.spam_token_count(a).await.unwrap(), 1);
    let model = f.store.spam_model(a, vec![]).await.unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_training_queue_goes_oldest_first_and_training_settles_an_item() {
    let (f, ann) = with_account().await;
    f.sql(&format!(
        "INSERT INTO spam_training (account_id, blob_id, spam) VALUES
         ({ann}, 10, true), ({ann}, 11, false), ({ann}, 10, true), ({ann}, 12, true)"
    ));
    let batch = f.store.spam_training_batch(3).await.unwrap();
    let ids: Vec<i64> = batch.iter().map(|t| t.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let seen: Vec<_> = batch.iter().map(|t| (t.account, t.blob, t.spam)).collect();
    assert_eq!(seen, [(ann, 10, true), (ann, 11, false), (ann, 10, true)]);

    // The first settles its item and learns; the second, the same message
    // as the same class, settles its item and learns nothing.
    let first = batch[0].clone();
    assert!(f
        .store
        .train_spam(Some(ann), Some(10), tokens(&["t"]), true, Some(first.id))
        .await
        .unwrap());
    assert!(!f
        .store
        .train_spam(Some(ann), Some(10), tokens(&["t"]), true, Some(batch[2].id))
        .await
        .unwrap());
    f.store.drop_spam_training(batch[1].id).await.unwrap();
    f.store.drop_spam_training(9999).await.unwrap();
    let left = f.store.spam_training_batch(10).await.unwrap();
    assert_eq!(
        left,
        [SpamTraining {
            id: left[0].id,
            account: ann,
            blob: 12,
            spam: true
        }]
    );
    assert!(left[0].id > batch[2].id);
    assert_eq!(counts(&f, Some(ann)).await, [row("t", 1, 0)]);
    assert!(f.store.spam_training_batch(0).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_model_learnt_from_a_blob_goes_with_the_blob() {
    let (f, ann) = with_account().await;
    let blob: i64 = f
        .sql("INSERT INTO blobs (created, complete) VALUES (0, true) RETURNING id")
        .parse()
        .unwrap();
    f.sql(&format!(
        "INSERT INTO spam_training (account_id, blob_id, spam) VALUES ({ann}, {blob}, false)"
    ));
    assert!(f
        .store
        .train_spam(Some(ann), Some(blob), tokens(&["t"]), true, None)
        .await
        .unwrap());
    f.sql(&format!("DELETE FROM blobs WHERE id = {blob}"));
    assert!(f.store.spam_training_batch(10).await.unwrap().is_empty());
    // A new blob under the same id is a new message to the model.
    assert!(f
        .store
        .train_spam(Some(ann), Some(blob), tokens(&["t"]), true, None)
        .await
        .unwrap());
    assert_eq!(counts(&f, Some(ann)).await, [row("t", 2, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_trainings_of_one_model_all_count() {
    let (f, ann) = with_account().await;
    let mut tasks = Vec::new();
    for i in 0..12i64 {
        let store = f.store.clone();
        // Overlapping tokens in different orders.
        let mut words = tokens(&["a", "b", "c", "d", "e", "f"]);
        words.rotate_left(i as usize % 6);
        if i % 2 == 1 {
            words.reverse();
        }
        tasks.push(tokio::spawn(async move {
            store
                .train_spam(Some(ann), Some(100 + i), words, i % 3 != 0, None)
                .await
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap().unwrap());
    }
    let model = f
        .store
        .spam_model(Some(ann), tokens(&["a", "f"]))
        .await
        .unwrap();
    assert_eq!((model.spam_messages, model.ham_messages), (8, 4));
    assert_eq!(model.counts["a"], (8, 4));
    assert_eq!(model.counts["f"], (8, 4));
    assert_eq!(f.sql("SELECT count(*) FROM spam_trained"), "12");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_threshold_is_set_and_cleared() {
    let (f, _ann) = with_account().await;
    let start = serial(&f);
    f.store
        .set_spam_threshold("Ann@Example.ORG", Some(0.75))
        .await
        .unwrap();
    assert_eq!(f.sql("SELECT spam_threshold FROM accounts"), "0.75");
    assert_eq!(serial(&f), start + 1);
    f.store
        .set_spam_threshold("ann@example.org", None)
        .await
        .unwrap();
    assert_eq!(f.sql("SELECT spam_threshold IS NULL FROM accounts"), "t");
    assert_eq!(serial(&f), start + 2);

    let err = f
        .store
        .set_spam_threshold("bob@example.org", Some(0.5))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    for bad in [f32::NAN, f32::INFINITY] {
        let err = f
            .store
            .set_spam_threshold("ann@example.org", Some(bad))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    }
    let err = f
        .store
        .set_spam_threshold("not an address", Some(0.5))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert_eq!(serial(&f), start + 2);
    assert_eq!(f.sql("SELECT spam_threshold IS NULL FROM accounts"), "t");
}
