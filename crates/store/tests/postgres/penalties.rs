//! PostgreSQL: the penalty book of failed logins, shared by every node.
//! Two stores on one database stand for two nodes; the memory book is the
//! reference the shared one must answer like.

use std::sync::Arc;
use std::time::Duration;

use store::{MemoryPenalties, PenaltyBook, PenaltyKey, Schedule, Store, Turn, PENALTY_WINDOW};

use super::{open, second_node};

/// A moment on the books' clocks (any will do: every call is given it).
const T0: i64 = 1_800_000_000_000;
const WINDOW: i64 = PENALTY_WINDOW.as_millis() as i64;

fn client(ip: &str) -> PenaltyKey {
    PenaltyKey::client(ip.parse().unwrap())
}

/// What a turn was, for comparing books: the wait, or -1 when refused,
/// and the keys that had failures, sorted.
fn shape(turn: Turn) -> (i64, Vec<PenaltyKey>) {
    match turn {
        Turn::Granted {
            wait,
            mut penalised,
        } => {
            penalised.sort();
            (wait, penalised)
        }
        Turn::Refused => (-1, vec![]),
    }
}

/// One step of a script run against a book.
enum Step {
    Turn(i64, Vec<PenaltyKey>),
    Fail(i64, Vec<PenaltyKey>),
    Clear(PenaltyKey),
    Count(i64, PenaltyKey),
}

/// Runs `steps`, alternating between `books` (one node after another);
/// every answer, as text.
async fn run(books: &[Arc<dyn PenaltyBook>], schedule: &Schedule, steps: &[Step]) -> Vec<String> {
    let mut answers = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let book = &books[i % books.len()];
        answers.push(match step {
            Step::Turn(at, keys) => {
                format!(
                    "turn {:?}",
                    shape(book.take_turn(keys, *at, schedule).await.unwrap())
                )
            }
            Step::Fail(at, keys) => format!(
                "fail {:?}",
                book.record_failure(keys, *at, schedule).await.unwrap()
            ),
            Step::Clear(key) => {
                book.clear(key).await.unwrap();
                "clear".to_string()
            }
            Step::Count(at, key) => {
                format!("count {}", book.recent_failures(key, *at).await.unwrap())
            }
        });
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_on_one_node_hold_back_the_other_and_a_success_clears_the_account_only() {
    let f = open().await;
    let b = second_node(&f).await;
    let (on_a, on_b) = (f.store.penalty_book().unwrap(), b.penalty_book().unwrap());
    assert!(!on_a.local());
    let s = Schedule::new(Duration::from_secs(2));
    let ip = client("192.0.2.7");
    let account = PenaltyKey::account("a@example.org");
    let keys = [ip.clone(), account.clone()];

    // Nobody penalised: no wait, on either node.
    assert_eq!(
        on_b.take_turn(&keys, T0, &s).await.unwrap(),
        Turn::Granted {
            wait: 0,
            penalised: vec![]
        }
    );
    assert_eq!(on_a.record_failure(&keys, T0, &s).await.unwrap(), [1, 1]);
    assert_eq!(
        on_b.record_failure(&keys, T0 + 10, &s).await.unwrap(),
        [2, 2]
    );
    // B sees both failures; its next attempt waits for A's and its own.
    assert_eq!(on_b.recent_failures(&account, T0 + 20).await.unwrap(), 2);
    assert_eq!(
        shape(on_b.take_turn(&keys, T0 + 20, &s).await.unwrap()),
        (
            T0 + 10 + 4000 - (T0 + 20),
            vec![ip.clone(), account.clone()]
        )
    );
    // Another client trying the same account on A waits behind that turn.
    let other = client("198.51.100.1");
    let (wait, penalised) = shape(
        on_a.take_turn(&[other.clone(), account.clone()], T0 + 20, &s)
            .await
            .unwrap(),
    );
    assert!(wait > 4000, "{wait}");
    assert_eq!(penalised, std::slice::from_ref(&account));

    // A success on A clears the account for B too, never the address.
    on_a.clear(&account).await.unwrap();
    assert_eq!(on_b.recent_failures(&account, T0 + 30).await.unwrap(), 0);
    assert_eq!(on_b.recent_failures(&ip, T0 + 30).await.unwrap(), 2);
    let (_, penalised) = shape(
        on_b.take_turn(&[other, account.clone()], T0 + 30, &s)
            .await
            .unwrap(),
    );
    assert!(penalised.is_empty(), "{penalised:?}");
    let (wait, penalised) = shape(on_b.take_turn(&keys, T0 + 30, &s).await.unwrap());
    assert!(wait > 0);
    assert_eq!(penalised, [ip]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_book_keeps_the_memory_books_schedule() {
    let f = open().await;
    let b = second_node(&f).await;
    let shared = [f.store.penalty_book().unwrap(), b.penalty_book().unwrap()];
    let memory: [Arc<dyn PenaltyBook>; 1] = [Arc::new(MemoryPenalties::default())];
    let ip = client("2001:db8:7:7::1");
    let same_64 = client("2001:db8:7:7:ffff::2");
    let account = PenaltyKey::account("victim@example.org");
    let other = client("192.0.2.99");
    let fresh = PenaltyKey::account("fresh@example.org");
    let both = vec![ip.clone(), account.clone()];
    let mut steps = vec![Step::Turn(T0, both.clone()), Step::Fail(T0, both.clone())];
    // Twenty attempts at once: turns one delay apart, then refusals.
    for _ in 0..20 {
        steps.push(Step::Turn(T0 + 5, both.clone()));
    }
    steps.extend([
        Step::Turn(T0 + 5, vec![other.clone(), account.clone()]),
        Step::Turn(T0 + 5, vec![other.clone(), fresh.clone()]),
        Step::Turn(T0 + 5, vec![same_64.clone(), fresh.clone()]),
    ]);
    // Failures later on: the counts and delays grow, to the cap.
    for i in 0..10 {
        let at = T0 + 40_000 + i * 20_000;
        steps.push(Step::Fail(at, vec![same_64.clone(), account.clone()]));
        steps.push(Step::Turn(at + 1, both.clone()));
    }
    steps.extend([
        Step::Count(T0 + 300_000, ip.clone()),
        Step::Clear(account.clone()),
        Step::Count(T0 + 300_000, account.clone()),
        Step::Turn(T0 + 300_000, vec![other.clone(), account.clone()]),
        Step::Turn(T0 + 300_000, both.clone()),
        // Past the window nothing counts, and a new failure counts one.
        Step::Count(T0 + 220_000 + WINDOW, ip.clone()),
        Step::Turn(T0 + 220_000 + WINDOW, both.clone()),
        Step::Fail(T0 + 220_000 + WINDOW, both.clone()),
        Step::Turn(T0 + 220_000 + WINDOW, both.clone()),
    ]);
    for base in [Duration::from_secs(4), Duration::from_millis(1500)] {
        let s = Schedule::new(base);
        // A fresh prefix of keys per round: the books start empty.
        let expected = run(&memory, &s, &steps).await;
        let got = run(&shared, &s, &steps).await;
        assert_eq!(got, expected, "base delay {base:?}");
        // Not trivially equal: there were waits and refusals.
        assert!(expected.iter().any(|a| a.starts_with("turn (-1")));
        assert!(expected.iter().any(|a| a.starts_with("fail [10, ")));
        f.sql("TRUNCATE auth_penalties");
        for book in &memory {
            for key in [&ip, &account, &other, &fresh] {
                book.clear(key).await.unwrap();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_at_once_on_two_nodes_take_distinct_turns() {
    let f = open().await;
    let b = second_node(&f).await;
    let books = [f.store.penalty_book().unwrap(), b.penalty_book().unwrap()];
    let s = Schedule::new(Duration::from_secs(4));
    let keys = vec![client("203.0.113.5"), PenaltyKey::account("a@example.org")];
    books[0].record_failure(&keys, T0, &s).await.unwrap();
    let attempts: Vec<_> = (0..20)
        .map(|i| {
            let book = Arc::clone(&books[i % 2]);
            let (keys, s) = (keys.clone(), s);
            tokio::spawn(async move { book.take_turn(&keys, T0, &s).await.unwrap() })
        })
        .collect();
    let mut waits = Vec::new();
    for a in attempts {
        waits.push(shape(a.await.unwrap()).0);
    }
    waits.sort();
    // Seven turns 4 s apart, whichever node asked; the rest refused.
    let mut expected = vec![-1; 13];
    expected.extend([4000, 8000, 12000, 16000, 20000, 24000, 28000]);
    assert_eq!(waits, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_that_no_longer_count_are_forgotten() {
    let f = open().await;
    let book = f.store.penalty_book().unwrap();
    let s = Schedule::new(Duration::from_secs(1));
    let old = client("192.0.2.1");
    let recent = client("192.0.2.2");
    book.record_failure(std::slice::from_ref(&old), T0, &s)
        .await
        .unwrap();
    book.record_failure(std::slice::from_ref(&recent), T0 + WINDOW / 2, &s)
        .await
        .unwrap();
    assert_eq!(
        f.store.forget_old_penalties(T0 + WINDOW - 1).await.unwrap(),
        0
    );
    assert_eq!(
        f.store.forget_old_penalties(T0 + WINDOW + 1).await.unwrap(),
        1
    );
    assert_eq!(f.sql("SELECT key FROM auth_penalties"), "client 192.0.2.2");
}
