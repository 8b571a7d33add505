//! Each workload, briefly, against a real server: the reported counts
//! must match what arrived.

use clap::Parser;
use sluice_testkit::{Dovecot, Server, DOMAIN};

/// The password of the bench's accounts: `bench`'s default.
const PASSWORD: &str = "password";

/// The accounts `user1@example.org` … `user{users}@example.org`.
fn addresses(users: usize) -> Vec<String> {
    (1..=users).map(|i| format!("user{i}@{DOMAIN}")).collect()
}

/// A running Sluice with `users` accounts, there before it starts.
fn sluice(users: usize) -> Server {
    let addresses = addresses(users);
    let accounts: Vec<(&str, &str)> = addresses.iter().map(|a| (a.as_str(), PASSWORD)).collect();
    Server::start_seeded("", &accounts)
}

/// Dovecot (IMAP only) with the same accounts.
fn dovecot(users: usize) -> Dovecot {
    let addresses = addresses(users);
    let accounts: Vec<(&str, &str)> = addresses.iter().map(|a| (a.as_str(), PASSWORD)).collect();
    Dovecot::start(&accounts)
}

/// Parses `args` as a `bench` command line and returns its JSON report.
fn bench(args: &[&str]) -> serde_json::Value {
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: bench::Command,
    }
    let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("bad bench arguments {args:?}: {e}"));
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench::report(cli.cmd))
        .unwrap_or_else(|e| panic!("bench {args:?} failed: {e:#}"))
}

/// The number at `path` (`a.b.c`) of a JSON report.
fn at(v: &serde_json::Value, path: &str) -> f64 {
    let mut cur = v;
    for part in path.split('.') {
        cur = match part.parse::<usize>() {
            Ok(i) => &cur[i],
            Err(_) => &cur[part],
        };
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

#[test]
fn smtp_closed_model_counts_match_what_arrived() {
    let s = sluice(5);
    let smtp = s.smtp.to_string();
    let pop3 = s.pop3.to_string();
    let r = bench(&[
        "smtp",
        "--server",
        &smtp,
        "--user-count",
        "5",
        "--connections",
        "4",
        "--messages",
        "300",
        "--duration",
        "120",
        "--recipients",
        "1-3",
        "--per-connection",
        "1-3",
        "--size",
        "realistic",
        "--bounce-ratio",
        "0.3",
        "--unfinished-ratio",
        "0.1",
        "--sources",
        "40",
        "--per-prefix",
        "8",
        "--verify-pop3",
        &pop3,
    ]);
    let run = &r["runs"][0];
    assert_eq!(at(run, "good"), 300.0, "{run:#}");
    assert_eq!(at(run, "accepted"), 300.0);
    assert_eq!(at(run, "unknown_accepted"), 0.0);
    let deliveries = at(run, "deliveries");
    assert!((300.0..=900.0).contains(&deliveries));
    assert_eq!(at(run, "verified.expected"), deliveries);
    assert_eq!(at(run, "verified.arrived"), deliveries, "{run:#}");
    // The session shares hold of all sessions.
    let (legit, bounce, unfinished) = (
        at(run, "sessions.legit"),
        at(run, "sessions.bounce"),
        at(run, "sessions.unfinished"),
    );
    let total = legit + bounce + unfinished;
    assert!((bounce - 0.3 * total).abs() <= 2.0, "{run:#}");
    assert!((unfinished - 0.1 * total).abs() <= 1.0, "{run:#}");
    // Every bounce transaction's recipients were refused, nothing else failed.
    let errors = run["errors"].as_object().unwrap();
    assert!(
        errors.keys().all(|k| k.starts_with("RCPT 550 (unknown)")),
        "{errors:?}"
    );
    assert!(run["pipelining"].as_bool().unwrap());
    assert_eq!(at(run, "message_latency.count"), 300.0);
}

#[test]
fn smtp_open_model_and_sweep_without_pipelining() {
    let s = sluice(3);
    let smtp = s.smtp.to_string();
    let pop3 = s.pop3.to_string();
    let r = bench(&[
        "smtp",
        "--server",
        &smtp,
        "--user-count",
        "3",
        "--rate",
        "100",
        "--legit-rate",
        "--duration",
        "1",
        "--bounce-ratio",
        "0,0.5",
        "--no-pipelining",
        "--size",
        "0-5k",
        "--verify-pop3",
        &pop3,
    ]);
    let runs = r["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert!(!run["pipelining"].as_bool().unwrap());
        assert_eq!(
            at(run, "verified.arrived"),
            at(run, "deliveries"),
            "{run:#}"
        );
        // Every legitimate session sent its message, unless the run's end
        // overtook it before it could (a loaded machine): the server
        // refused or dropped none, so no error but the bounces' refusals.
        assert_eq!(
            at(run, "good") + at(run, "sessions.legit_cut_at_end"),
            at(run, "sessions.legit"),
            "{run:#}"
        );
        let errors = run["errors"].as_object().unwrap();
        assert!(
            errors.keys().all(|k| k.starts_with("RCPT 550 (unknown)")),
            "{errors:?}"
        );
    }
    assert_eq!(at(&runs[0], "sessions.bounce"), 0.0);
    assert!(at(&runs[1], "sessions.bounce") >= 1.0);
}

#[test]
fn smtp_submission_logs_in_over_starttls_and_implicit_tls() {
    let s = sluice(3);
    let ca = s.data_dir().join("tls/cert.pem");
    let ca = ca.to_str().unwrap();
    let pop3 = s.pop3.to_string();
    let submission = s.addr("submission").to_string();
    let submissions = s.addr("submissions").to_string();
    let run = |server: &str, tls: &str, duration: &str, extra: &[&str]| {
        let mut args = vec![
            "smtp",
            "--server",
            server,
            "--user-count",
            "3",
            "--connections",
            "3",
            "--messages",
            "30",
            "--duration",
            duration,
            "--recipients",
            "1-2",
            "--auth",
            tls,
        ];
        args.extend_from_slice(extra);
        bench(&args)
    };
    // Each session logs in as one account and sends as it: the server's
    // sender check and the POP3 count agree with the report.
    for (server, tls) in [(&submission, "--starttls"), (&submissions, "--tls")] {
        let r = run(server, tls, "60", &["--ca", ca, "--verify-pop3", &pop3]);
        let run = &r["runs"][0];
        assert_eq!(at(run, "good"), 30.0, "{tls}: {run:#}");
        assert!(run["errors"].as_object().unwrap().is_empty(), "{run:#}");
        assert_eq!(
            at(run, "verified.arrived"),
            at(run, "deliveries"),
            "{run:#}"
        );
    }
    // Without the server's certificate among the trusted ones, no session
    // gets past the handshake and nothing is sent.
    let r = run(&submissions, "--tls", "1", &[]);
    let run = &r["runs"][0];
    assert_eq!(at(run, "accepted"), 0.0, "{run:#}");
    let errors = run["errors"].as_object().unwrap();
    assert!(
        !errors.is_empty() && errors.keys().all(|k| k.starts_with("io:")),
        "{errors:?}"
    );
}

#[test]
fn pop3_retrieves_and_deletes_everything_it_reports() {
    let s = sluice(4);
    let smtp = s.smtp.to_string();
    let pop3 = s.pop3.to_string();
    let r = bench(&[
        "pop3",
        "--server",
        &pop3,
        "--user-count",
        "4",
        "--clients",
        "2",
        "--retrieve",
        "3",
        "--fill",
        "10",
        "--smtp",
        &smtp,
        "--until-empty",
        "--duration",
        "120",
    ]);
    assert_eq!(at(&r, "filled"), 40.0);
    assert_eq!(at(&r, "retrieved"), 40.0, "{r:#}");
    assert_eq!(at(&r, "deleted"), 40.0);
    assert!(at(&r, "bytes") > 0.0);
    assert!(at(&r, "sessions") >= 16.0);
    assert!(r["errors"].as_object().unwrap().is_empty(), "{r:#}");
    // A second pass finds every mailbox empty (the deletions were committed).
    let again = bench(&[
        "pop3",
        "--server",
        &pop3,
        "--user-count",
        "4",
        "--clients",
        "1",
        "--sessions",
        "4",
        "--keep",
        "--auth-plain",
        "--duration",
        "60",
    ]);
    assert_eq!(at(&again, "retrieved"), 0.0, "{again:#}");
    assert_eq!(at(&again, "sessions"), 4.0);
    assert_eq!(at(&again, "empty_sessions"), 4.0);
}

#[test]
fn imap_seven_requests_against_sluice() {
    let s = sluice(1);
    seven_requests(&s.imap.to_string());
}

#[test]
fn imap_seven_requests_against_dovecot() {
    let d = dovecot(1);
    seven_requests(&d.imap.to_string());
}

#[test]
fn imap_long_session_mix_against_sluice_and_dovecot() {
    let s = sluice(1);
    let d = dovecot(1);
    for imap in [s.imap.to_string(), d.imap.to_string()] {
        for search in ["text", "header"] {
            long_session_mix(&imap, search);
        }
    }
}

/// Only the concurrent mix, on 100 loaded messages: every kind of command
/// ran, none failed, and the seven requests did not run.
fn long_session_mix(imap: &str, search: &str) {
    let r = bench(&[
        "imap",
        "--server",
        imap,
        "--user",
        "user1@example.org",
        "--load",
        "100",
        "--mix-only",
        "--clients",
        "3",
        "--duration",
        "2",
        "--mix-search",
        search,
    ]);
    assert!(r["requests"].as_array().unwrap().is_empty(), "{r:#}");
    let c = &r["concurrent"];
    let kinds: Vec<&str> = c["latency"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        kinds,
        ["APPEND", "EXPUNGE", "FETCH", "SEARCH", "SELECT", "STORE"],
        "{imap} {search}: {c:#}"
    );
    assert!(
        c["errors"].as_object().unwrap().is_empty(),
        "{imap} {search}: {c:#}"
    );
}

/// The seven requests on 300 loaded messages, with exact result counts,
/// then a short concurrent mix.
fn seven_requests(imap: &str) {
    let r = bench(&[
        "imap",
        "--server",
        imap,
        "--user",
        "user1@example.org",
        "--load",
        "300",
        "--repeat",
        "2",
        "--clients",
        "2",
        "--duration",
        "1",
    ]);
    assert_eq!(at(&r, "messages"), 300.0);
    let requests = r["requests"].as_array().unwrap();
    let names: Vec<&str> = requests
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "headers",
            "text-1%",
            "text-25%",
            "text-infix",
            "body-2char",
            "from",
            "date",
            "expunge-1%",
            "expunge-20%"
        ]
    );
    for q in requests {
        // Substring rows have no expected count.
        if !q["expected"].is_null() {
            assert_eq!(at(q, "got"), at(q, "expected"), "{q:#}");
        }
    }
    assert_eq!(at(&requests[1], "got"), 3.0);
    assert_eq!(at(&requests[2], "got"), 75.0);
    // Every message with the 1% word holds its middle, and others may.
    assert!(at(&requests[3], "got") >= 3.0, "{:#}", requests[3]);
    assert!(at(&requests[4], "got") >= 75.0, "{:#}", requests[4]);
    assert_eq!(at(&requests[7], "got"), 3.0);
    assert_eq!(at(&requests[8], "got"), 59.0);
    assert_eq!(requests[0]["warm_ms"].as_array().unwrap().len(), 2);
    let c = &r["concurrent"];
    assert!(at(c, "ops_per_s") > 0.0);
    assert!(c["errors"].as_object().unwrap().is_empty(), "{c:#}");
}

#[test]
fn imap_cold_runs_restart_through_the_command() {
    let d = dovecot(1);
    let imap = d.imap.to_string();
    // A cold command that only drops this client's connection state;
    // what matters is that each request then runs once cold first.
    let r = bench(&[
        "imap",
        "--server",
        &imap,
        "--user",
        "user1@example.org",
        "--load",
        "50",
        "--repeat",
        "1",
        "--no-expunge",
        "--cold-cmd",
        "true",
    ]);
    for q in r["requests"].as_array().unwrap() {
        assert!(q["cold_ms"].as_f64().is_some(), "{q:#}");
        if !q["expected"].is_null() {
            assert_eq!(at(q, "got"), at(q, "expected"));
        }
    }
}

#[test]
fn corpus_writes_files_with_exact_marker_counts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eml");
    let r = bench(&[
        "corpus",
        "--count",
        "400",
        "--seed",
        "9",
        "--out",
        out.to_str().unwrap(),
        "--dir",
        "--marker",
        "happy:0.01",
        "--marker",
        "free:0.25",
        "--marker",
        "zebra:0.5",
    ]);
    assert_eq!(at(&r, "count"), 400.0);
    let files: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(files.len(), 400);
    let mut counts = [0usize; 3];
    for f in files {
        let text = std::fs::read_to_string(f.unwrap().path())
            .unwrap()
            .to_ascii_lowercase();
        for (k, w) in ["happy", "free", "zebra"].iter().enumerate() {
            counts[k] += usize::from(text.contains(w));
        }
    }
    assert_eq!(counts, [4, 100, 200]);
    assert_eq!(r["markers"][2][1].as_u64(), Some(200));
    // The same seed writes the same mbox twice.
    let a = dir.path().join("a.mbox");
    let b = dir.path().join("b.mbox");
    bench(&["corpus", "--count", "50", "--out", a.to_str().unwrap()]);
    bench(&["corpus", "--count", "50", "--out", b.to_str().unwrap()]);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}
