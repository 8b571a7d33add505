//! Accuracy and speed of Sluice's Bayes classifier on a labelled corpus,
//! optionally next to SpamAssassin's Bayes trained on the same messages.
//!
//! ```text
//! accuracy CORPUS [--spamassassin] [--holdout N] [--train N] [--max-tokens N]
//! ```
//!
//! CORPUS holds directories of messages, one file each: a directory whose
//! name contains "spam" holds spam, one whose name contains "ham" holds ham
//! (the SpamAssassin public corpus's layout). A leading mbox `From ` line
//! is dropped. Within each class, sorted by path, every Nth message
//! (default 4th) is held out and the rest train, so the split is the same
//! on every run. `--train N` trains on only the first N messages of each
//! class (a young model); `--max-tokens N` prunes Sluice's model to that
//! bound with [`spam::prune`] before classifying.
//!
//! With `--spamassassin`, `sa-learn` trains a fresh database (in a temp
//! directory, through a configuration that loads only the Bayes plugin and
//! its rules, so only Bayes is compared) and `spamassassin --mbox -L`
//! scores the held-out messages in one process; its `_BAYES_` probability
//! is read from a header it adds.
//!
//! Printed: false positive rate (ham called spam) and false negative rate
//! (spam missed) at probability thresholds 0.5 and 0.9, and for Sluice also
//! at the default score threshold with Bayes as the only evidence;
//! training time and classification time per message.
//!
//! `bench/probes/spam_accuracy.sh` fetches the corpus and runs this.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use std::{env, fs, io};

use spam::{
    classify, prune, score, tokenize, train, Class, Counts, Delta, Evidence, Totals,
    DEFAULT_THRESHOLD,
};

struct Message {
    class: Class,
    raw: Vec<u8>,
}

fn main() -> io::Result<()> {
    let mut args = env::args().skip(1);
    let mut corpus = None;
    let mut with_sa = false;
    let mut holdout = 4usize;
    let mut per_class = usize::MAX;
    let mut max_tokens = usize::MAX;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--spamassassin" => with_sa = true,
            "--holdout" => {
                holdout = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 2)
                    .expect("--holdout N, N >= 2")
            }
            "--train" => per_class = args.next().and_then(|n| n.parse().ok()).expect("--train N"),
            "--max-tokens" => {
                max_tokens = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--max-tokens N")
            }
            _ => corpus = Some(PathBuf::from(a)),
        }
    }
    let corpus = corpus.expect(
        "usage: accuracy CORPUS [--spamassassin] [--holdout N] [--train N] [--max-tokens N]",
    );
    let (mut train_set, held_out) = load(&corpus, holdout)?;
    // The first N of each class only: how a young model does.
    let mut taken: HashMap<bool, usize> = HashMap::new();
    train_set.retain(|m| {
        let n = taken.entry(m.class == Class::Spam).or_default();
        *n += 1;
        *n <= per_class
    });
    let count = |set: &[Message], c: Class| set.iter().filter(|m| m.class == c).count();
    println!(
        "corpus {}: training {} spam + {} ham, held out {} spam + {} ham",
        corpus.display(),
        count(&train_set, Class::Spam),
        count(&train_set, Class::Ham),
        count(&held_out, Class::Spam),
        count(&held_out, Class::Ham),
    );

    // Sluice.
    let mut counts: HashMap<String, Counts> = HashMap::new();
    let mut totals = Totals::default();
    let start = Instant::now();
    for m in &train_set {
        train(
            &mut counts,
            &mut totals,
            &tokenize(&m.raw),
            m.class,
            Delta::Learn,
        );
    }
    let train_time = start.elapsed();
    if counts.len() > max_tokens {
        // Pruning as the store would: every token last seen "now" except
        // that older messages' tokens are older; training order stands in
        // for time.
        let mut last_seen: HashMap<&str, i64> = HashMap::new();
        let token_lists: Vec<_> = train_set.iter().map(|m| tokenize(&m.raw)).collect();
        for (i, tokens) in token_lists.iter().enumerate() {
            for t in tokens.iter() {
                last_seen.insert(t, i as i64);
            }
        }
        let rows: Vec<(String, Counts, i64)> = counts
            .iter()
            .map(|(t, c)| {
                (
                    t.clone(),
                    *c,
                    last_seen.get(t.as_str()).copied().unwrap_or(0),
                )
            })
            .collect();
        let before = counts.len();
        for t in prune(&rows, max_tokens) {
            counts.remove(&t);
        }
        println!("pruned the model from {before} to {} tokens", counts.len());
    }
    let start = Instant::now();
    let mut sluice = Vec::with_capacity(held_out.len());
    for m in &held_out {
        let bayes = classify(&tokenize(&m.raw), totals, &counts);
        // Too little training: no verdict, so not spam.
        sluice.push(bayes.map_or(0.0, |b| b.probability));
    }
    let classify_time = start.elapsed();
    println!("\nSluice ({} tokens in the model)", counts.len());
    report(&held_out, &sluice);
    let by_score: Vec<bool> = sluice
        .iter()
        .map(|p| {
            let b = spam::Bayes {
                probability: *p,
                significant: vec![],
            };
            score(&Evidence {
                bayes: Some(b),
                ..Default::default()
            })
            .is_spam(DEFAULT_THRESHOLD)
        })
        .collect();
    rates(&held_out, &by_score, "score >= 5 (Bayes alone)");
    timing(train_time, train_set.len(), classify_time, held_out.len());

    if with_sa {
        let (sa, train_time, classify_time) = spamassassin(&train_set, &held_out)?;
        println!("\nSpamAssassin Bayes (sa-learn, spamassassin --mbox -L)");
        report(&held_out, &sa);
        timing(train_time, train_set.len(), classify_time, held_out.len());
    }
    Ok(())
}

/// Reads the corpus and splits it: within each class, sorted by path,
/// every `holdout`th message is held out.
fn load(corpus: &Path, holdout: usize) -> io::Result<(Vec<Message>, Vec<Message>)> {
    let mut files: Vec<(Class, PathBuf)> = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(corpus)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        let class = if name.contains("spam") {
            Class::Spam
        } else if name.contains("ham") {
            Class::Ham
        } else {
            continue;
        };
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            // The stdlib package has each message as .txt and as .json.
            if p.is_file() && p.extension().is_none_or(|x| x != "json") {
                files.push((class, p));
            }
        }
    }
    files.sort_by(|a, b| a.1.cmp(&b.1));
    let (mut train_set, mut held_out) = (Vec::new(), Vec::new());
    let mut seen: HashMap<bool, usize> = HashMap::new();
    for (class, path) in files {
        let mut raw = fs::read(&path)?;
        if raw.starts_with(b"From ") {
            let line = raw
                .iter()
                .position(|b| *b == b'\n')
                .map_or(raw.len(), |i| i + 1);
            raw.drain(..line);
        }
        let i = seen.entry(class == Class::Spam).or_default();
        *i += 1;
        let m = Message { class, raw };
        if i.is_multiple_of(holdout) {
            held_out.push(m);
        } else {
            train_set.push(m);
        }
    }
    Ok((train_set, held_out))
}

fn report(held_out: &[Message], probabilities: &[f64]) {
    for threshold in [0.5, 0.9] {
        let verdicts: Vec<bool> = probabilities.iter().map(|p| *p >= threshold).collect();
        rates(held_out, &verdicts, &format!("probability >= {threshold}"));
    }
}

fn rates(held_out: &[Message], is_spam: &[bool], label: &str) {
    let (mut fp, mut fneg, mut ham, mut spam) = (0, 0, 0, 0);
    for (m, verdict) in held_out.iter().zip(is_spam) {
        match m.class {
            Class::Ham => {
                ham += 1;
                fp += usize::from(*verdict);
            }
            Class::Spam => {
                spam += 1;
                fneg += usize::from(!*verdict);
            }
        }
    }
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    println!(
        "  {label:<26} false positives {fp:>4}/{ham} ({:.2}%)  false negatives {fneg:>4}/{spam} ({:.2}%)",
        pct(fp, ham),
        pct(fneg, spam)
    );
}

fn timing(train: Duration, trained: usize, classify: Duration, classified: usize) {
    let per = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    println!(
        "  training {:.2} s ({:.0} µs/message), classifying {:.2} s ({:.0} µs/message)",
        train.as_secs_f64(),
        per(train, trained),
        classify.as_secs_f64(),
        per(classify, classified)
    );
}

/// Trains SpamAssassin's Bayes with `sa-learn` and scores the held-out set
/// with `spamassassin`: the probabilities (in held-out order) and the
/// wall-clock times, process start-up included.
fn spamassassin(
    train_set: &[Message],
    held_out: &[Message],
) -> io::Result<(Vec<f64>, Duration, Duration)> {
    let dir = env::temp_dir().join(format!("sluice-spam-accuracy-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let (cf, db) = (dir.join("cf"), dir.join("db"));
    for d in [&cf, &db, &dir.join("spam"), &dir.join("ham")] {
        fs::create_dir_all(d)?;
    }
    fs::write(
        cf.join("init.pre"),
        "loadplugin Mail::SpamAssassin::Plugin::Check\nloadplugin Mail::SpamAssassin::Plugin::Bayes\n",
    )?;
    // Only Bayes: no other rule is loaded. SpamAssassin's minimum training
    // (200 of each class) is lowered to 1 so that it answers for a young
    // model too (`--train`); otherwise it would say 0.5 for everything.
    let mut config = format!(
        "use_bayes 1\nuse_bayes_rules 1\nbayes_auto_learn 0\nbayes_auto_expire 0\n\
         bayes_min_ham_num 1\nbayes_min_spam_num 1\n\
         bayes_path {}/bayes\nreport_safe 0\nrequired_score 5\n\
         add_header all Bayes _BAYES_\n",
        db.display()
    );
    for (name, lo, hi) in [
        ("BAYES_00", "0.00", "0.01"),
        ("BAYES_05", "0.01", "0.05"),
        ("BAYES_20", "0.05", "0.20"),
        ("BAYES_40", "0.20", "0.40"),
        ("BAYES_50", "0.40", "0.60"),
        ("BAYES_60", "0.60", "0.80"),
        ("BAYES_80", "0.80", "0.95"),
        ("BAYES_95", "0.95", "0.99"),
        ("BAYES_99", "0.99", "1.00"),
    ] {
        config.push_str(&format!("body {name} eval:check_bayes('{lo}', '{hi}')\n"));
    }
    fs::write(cf.join("bayes.cf"), config)?;
    // The registry-boundary (TLD) lists, which Bayes's URI tokens use.
    let tlds = Path::new("/usr/share/spamassassin/20_aux_tlds.cf");
    if tlds.exists() {
        fs::copy(tlds, cf.join("20_aux_tlds.cf"))?;
    }
    let prefs = dir.join("prefs");
    fs::write(&prefs, "")?;
    for (i, m) in train_set.iter().enumerate() {
        let sub = if m.class == Class::Spam {
            "spam"
        } else {
            "ham"
        };
        fs::write(dir.join(sub).join(format!("{i:06}")), &m.raw)?;
    }
    let common = |cmd: &mut Command| {
        cmd.arg("-C")
            .arg(&cf)
            .arg("--siteconfigpath")
            .arg(&cf)
            .arg("-p")
            .arg(&prefs)
            .arg("-L");
    };

    let start = Instant::now();
    for class in ["spam", "ham"] {
        let mut cmd = Command::new("sa-learn");
        common(&mut cmd);
        cmd.arg("--dbpath")
            .arg(&db)
            .arg(format!("--{class}"))
            .arg(dir.join(class))
            .stdout(Stdio::null());
        let status = cmd.status()?;
        if !status.success() {
            return Err(io::Error::other(format!("sa-learn --{class}: {status}")));
        }
    }
    let train_time = start.elapsed();

    // One mbox (mboxrd quoting) so one process scores all messages. The
    // separator line carries the message's index: spamassassin writes the
    // messages out sorted by date, not in the order they came in.
    let mut mbox = Vec::new();
    for (i, m) in held_out.iter().enumerate() {
        mbox.extend_from_slice(
            format!("From corpus-{i}@example.invalid Thu Jan  1 00:00:00 2004\n").as_bytes(),
        );
        for line in m.raw.split_inclusive(|b| *b == b'\n') {
            let stripped: &[u8] = {
                let mut l = line;
                while let Some(rest) = l.strip_prefix(b">") {
                    l = rest;
                }
                l
            };
            if stripped.starts_with(b"From ") {
                mbox.push(b'>');
            }
            mbox.extend_from_slice(line);
        }
        if !mbox.ends_with(b"\n") {
            mbox.push(b'\n');
        }
        mbox.push(b'\n');
    }
    let mbox_path = dir.join("held-out.mbox");
    fs::write(&mbox_path, &mbox)?;
    let start = Instant::now();
    let mut cmd = Command::new("spamassassin");
    common(&mut cmd);
    let out = cmd
        .arg("--mbox")
        .stdin(fs::File::open(&mbox_path)?)
        .stderr(Stdio::null())
        .output()?;
    let classify_time = start.elapsed();
    let mut probabilities: Vec<Option<f64>> = vec![None; held_out.len()];
    let mut current = None;
    for line in out.stdout.split(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"From corpus-") {
            let end = rest.iter().position(|b| *b == b'@').unwrap_or(0);
            current = std::str::from_utf8(&rest[..end])
                .ok()
                .and_then(|n| n.parse::<usize>().ok());
        } else if let (Some(i), Some(v)) = (current, line.strip_prefix(b"X-Spam-Bayes: ")) {
            if let Some(slot) = probabilities.get_mut(i) {
                *slot = String::from_utf8_lossy(v).trim().parse().ok();
            }
            current = None;
        }
    }
    let _ = fs::remove_dir_all(&dir);
    let scored = probabilities.iter().flatten().count();
    if scored != held_out.len() {
        return Err(io::Error::other(format!(
            "spamassassin scored {scored} messages of {}",
            held_out.len()
        )));
    }
    Ok((
        probabilities.into_iter().flatten().collect(),
        train_time,
        classify_time,
    ))
}
