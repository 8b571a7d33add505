//! `sluice import` and `sluice export`: mail in and out of an account as
//! mbox or Maildir, streamed piece by piece, so a 10 GB mbox costs the
//! same memory as a small one.
//!
//! - mbox (mboxrd): a message starts at a `From ` line at the start of the
//!   file or after an empty line; `>From ` lines lose one `>`; the empty
//!   line before the next `From ` is the separator, not message text. Its
//!   date is the internal date; `Status:` (R) and `X-Status:` (A, F, T, D)
//!   give the flags, as mutt, Thunderbird and Dovecot write them.
//! - Maildir (and Maildir++ folders, `.Sent`, `.Lists.rust`...): every
//!   file of `new/` and `cur/`, its flags from the `:2,` info (S, R, F, T,
//!   D), its internal date from the file's modification time.
//!
//! Lines end in CRLF in the store, whatever they ended in on disk. An
//! import can be run again after an interruption: what it delivered is
//! noted in the data directory and skipped (`--again` imports anew).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context as _};
use store::{
    AccountId, Delivery, MailboxInfo, MessageWriter, Store, FLAG_ANSWERED, FLAG_DELETED,
    FLAG_DRAFT, FLAG_FLAGGED, FLAG_SEEN,
};

use smtp::LineEnds;

use crate::admin::open;
use crate::config::Config;

/// Longest piece of a line handled at once; longer lines pass in pieces.
const PIECE: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Mbox,
    Maildir,
    /// A live IMAP server: PATH is `imap://user@host[:port]` (loopback
    /// only) or `imaps://user@host[:port]`.
    Imap,
}

/// Arguments of `sluice import`.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// The account the mail goes to.
    pub address: String,
    pub format: Format,
    /// The mbox file, the Maildir directory, or the IMAP URL.
    pub path: PathBuf,
    /// For mbox: the mailbox to fill (default INBOX; created if missing).
    #[arg(long)]
    pub mailbox: Option<String>,
    /// Import everything again, forgetting what an earlier run delivered.
    #[arg(long)]
    pub again: bool,
    /// For IMAP: a file whose first line is the password (else it is read
    /// from the SLUICE_IMPORT_PASSWORD environment variable).
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// For imaps://: CA certificates (PEM) trusted besides the web PKI
    /// roots, for a server with a private CA.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
}

/// Arguments of `sluice export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// The account whose mail is written out.
    pub address: String,
    pub format: Format,
    /// The mbox file (`-` for standard output) or the Maildir directory
    /// (created; it must not exist).
    pub path: PathBuf,
    /// For mbox: the mailbox to write (default INBOX).
    #[arg(long)]
    pub mailbox: Option<String>,
}

/// Counts and shows progress on standard error.
pub(crate) struct Progress {
    messages: u64,
    bytes: u64,
    started: Instant,
    shown: Instant,
    verb: &'static str,
}

impl Progress {
    fn new(verb: &'static str) -> Progress {
        Progress {
            messages: 0,
            bytes: 0,
            started: Instant::now(),
            shown: Instant::now(),
            verb,
        }
    }

    pub(crate) fn add(&mut self, bytes: u64) {
        self.messages += 1;
        self.bytes += bytes;
        if self.shown.elapsed().as_secs() >= 2 {
            self.shown = Instant::now();
            self.print();
        }
    }

    fn print(&self) {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        // ru_maxrss is in KiB on Linux.
        let peak_kib = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
            .map(|u| u.max_rss())
            .unwrap_or(0);
        eprintln!(
            "sluice: {} {} messages, {:.1} MB ({:.0} messages/s, {:.1} MB/s), peak memory {} KiB",
            self.verb,
            self.messages,
            self.bytes as f64 / 1e6,
            self.messages as f64 / secs,
            self.bytes as f64 / 1e6 / secs,
            peak_kib
        );
    }
}

/// What an earlier run of the same import delivered, kept in the data
/// directory: for mbox the offset after the last delivered message, for a
/// Maildir the names of the files delivered.
pub(crate) struct Journal {
    path: PathBuf,
}

impl Journal {
    fn new(config: &Config, args: &ImportArgs) -> anyhow::Result<Journal> {
        let source = match args.format {
            Format::Imap => args.path.clone(),
            _ => std::fs::canonicalize(&args.path)
                .with_context(|| format!("cannot read {}", args.path.display()))?,
        };
        let key = format!(
            "{}\n{}\n{}",
            args.address.to_lowercase(),
            source.display(),
            args.mailbox.as_deref().unwrap_or("")
        );
        // FNV-1a: a stable name for this source, address and mailbox.
        let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let name = format!("import-{hash:016x}.journal");
        let path = config.data_dir.join(name);
        if args.again {
            let _ = std::fs::remove_file(&path);
        }
        Ok(Journal { path })
    }

    pub(crate) fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap_or_default()
    }

    /// The names an earlier run delivered, said on standard error when
    /// there are some.
    pub(crate) fn done_names(&self) -> HashSet<String> {
        let done: HashSet<String> = self.read().lines().map(String::from).collect();
        if !done.is_empty() {
            eprintln!(
                "sluice: resuming: {} messages already imported (--again starts over)",
                done.len()
            );
        }
        done
    }

    fn set_offset(&self, offset: u64) -> std::io::Result<()> {
        std::fs::write(&self.path, offset.to_string())
    }

    pub(crate) fn add_name(&self, name: &str) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        writeln!(f, "{name}")
    }
}

async fn account_of(store: &dyn Store, address: &str) -> anyhow::Result<AccountId> {
    let directory = store.load_directory().await?;
    match directory.account(address) {
        Some(a) => Ok(a.id),
        None => bail!("no account {address}"),
    }
}

pub(crate) async fn mailbox_named(
    store: &dyn Store,
    account: AccountId,
    name: &str,
) -> anyhow::Result<MailboxInfo> {
    if let Some(m) = store.mailbox(account, name).await? {
        return Ok(m);
    }
    let made = store.create_mailbox(account, name, None).await?;
    // Subscribed, so clients that show only subscribed mailboxes show the
    // imported ones.
    store.set_subscribed(account, &made.name, true).await?;
    Ok(made)
}

pub async fn import(config: &Config, args: ImportArgs) -> anyhow::Result<()> {
    let store = open(config).await?;
    let account = account_of(&*store, &args.address).await?;
    let journal = Journal::new(config, &args)?;
    let mut progress = Progress::new("imported");
    match args.format {
        Format::Mbox => {
            let name = args.mailbox.as_deref().unwrap_or("INBOX");
            let mailbox = mailbox_named(&*store, account, name).await?;
            import_mbox(&*store, &mailbox, &args.path, &journal, &mut progress).await?;
        }
        Format::Maildir => {
            if args.mailbox.is_some() {
                bail!("--mailbox is for mbox: a Maildir's folders name their mailboxes");
            }
            import_maildir(&*store, account, &args.path, &journal, &mut progress).await?;
        }
        Format::Imap => {
            if args.mailbox.is_some() {
                bail!("--mailbox is for mbox: the server's mailboxes keep their names");
            }
            let url = args.path.to_string_lossy();
            let source = crate::import_imap::Source::parse(&url)?;
            let password = match &args.password_file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                None => std::env::var("SLUICE_IMPORT_PASSWORD").map_err(|_| {
                    anyhow::anyhow!(
                        "give the password with --password-file or SLUICE_IMPORT_PASSWORD"
                    )
                })?,
            };
            crate::import_imap::import(
                &*store,
                account,
                &source,
                &password,
                args.ca_file.as_deref(),
                &journal,
                &mut progress,
            )
            .await?;
        }
    }
    progress.print();
    Ok(())
}

/// One message of an mbox being read.
struct MboxMessage {
    writer: Box<dyn MessageWriter>,
    date: Option<i64>,
    flags: u32,
    in_header: bool,
    crlf: LineEnds,
}

/// The internal date of a `From ` line (`From sender Www Mmm dd hh:mm:ss
/// yyyy`, asctime as the mbox writers use it, in UTC).
fn from_line_date(line: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(line).ok()?;
    let words: Vec<&str> = text.split_whitespace().collect();
    // From, sender, weekday, month, day, time, year (a zone may follow).
    let at = words.iter().position(|w| {
        matches!(
            *w,
            "Jan"
                | "Feb"
                | "Mar"
                | "Apr"
                | "May"
                | "Jun"
                | "Jul"
                | "Aug"
                | "Sep"
                | "Oct"
                | "Nov"
                | "Dec"
        )
    })?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == words[at])? as u8
        + 1;
    let day: u8 = words.get(at + 1)?.parse().ok()?;
    let mut hms = words.get(at + 2)?.split(':').map(|p| p.parse::<u8>());
    let (h, m, s) = (
        hms.next()?.ok()?,
        hms.next()?.ok()?,
        hms.next().unwrap_or(Ok(0)).ok()?,
    );
    let year: i32 = words
        .get(at + 3..)?
        .iter()
        .find_map(|w| w.parse().ok().filter(|y: &i32| *y > 1900))?;
    let date =
        time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()?;
    Some(date.with_hms(h, m, s).ok()?.assume_utc().unix_timestamp())
}

/// Flags named by a `Status:` or `X-Status:` header line.
fn status_flags(line: &[u8]) -> u32 {
    let lower = line.to_ascii_lowercase();
    let (letters, table): (&[u8], &[(u8, u32)]) = if let Some(v) = lower.strip_prefix(b"status:") {
        (v, &[(b'r', FLAG_SEEN)])
    } else if let Some(v) = lower.strip_prefix(b"x-status:") {
        (
            v,
            &[
                (b'a', FLAG_ANSWERED),
                (b'f', FLAG_FLAGGED),
                (b't', FLAG_DRAFT),
                (b'd', FLAG_DELETED),
            ],
        )
    } else {
        return 0;
    };
    table
        .iter()
        .filter(|(c, _)| letters.contains(c))
        .fold(0, |acc, (_, f)| acc | f)
}

/// Reads a line, or a piece of at most [`PIECE`] bytes of a longer one;
/// returns whether it ends the line. Empty at the end of the input.
fn read_piece(reader: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<bool> {
    out.clear();
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(false);
        }
        let room = PIECE - out.len();
        let take = buf.len().min(room);
        match memchr::memchr(b'\n', &buf[..take]) {
            Some(i) => {
                out.extend_from_slice(&buf[..=i]);
                reader.consume(i + 1);
                return Ok(true);
            }
            None => {
                out.extend_from_slice(&buf[..take]);
                reader.consume(take);
                if out.len() >= PIECE {
                    return Ok(false);
                }
            }
        }
    }
}

fn is_blank(line: &[u8]) -> bool {
    line == b"\n" || line == b"\r\n"
}

async fn import_mbox(
    store: &dyn Store,
    mailbox: &MailboxInfo,
    path: &Path,
    journal: &Journal,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let resume: u64 = journal.read().trim().parse().unwrap_or(0);
    if resume > 0 {
        file.seek(SeekFrom::Start(resume))?;
        eprintln!("sluice: resuming at byte {resume} (--again starts over)");
    }
    let mut reader = BufReader::with_capacity(PIECE, file);
    let mut offset = resume;
    let mut line = Vec::with_capacity(PIECE);
    let mut out = Vec::with_capacity(PIECE * 2);
    let mut current: Option<MboxMessage> = None;
    // At the start of a line; the line before was empty (or none).
    let mut line_start = true;
    let mut after_blank = true;
    // An empty line held back: the separator if a From line follows.
    let mut held_blank = false;
    let mut started_any = false;
    loop {
        let ends_line = read_piece(&mut reader, &mut line)?;
        if line.is_empty() {
            break;
        }
        let piece_start = offset;
        offset += line.len() as u64;
        let at_start = line_start;
        line_start = ends_line;
        if at_start && after_blank && line.starts_with(b"From ") {
            if let Some(m) = current.take() {
                finish_mbox_message(m, mailbox, progress).await?;
                journal.set_offset(piece_start)?;
            }
            current = Some(MboxMessage {
                writer: store.message_writer(),
                date: from_line_date(&line),
                flags: 0,
                in_header: true,
                crlf: LineEnds::default(),
            });
            started_any = true;
            held_blank = false;
            after_blank = false;
            if !ends_line {
                // A From line longer than a piece: skip its rest.
                while !read_piece(&mut reader, &mut line)? && !line.is_empty() {
                    offset += line.len() as u64;
                }
                offset += line.len() as u64;
                line_start = true;
            }
            continue;
        }
        let Some(m) = current.as_mut() else {
            if !started_any && !line.iter().all(|b| b.is_ascii_whitespace()) {
                bail!(
                    "{} is not an mbox: it does not start with a From line",
                    path.display()
                );
            }
            after_blank = at_start && is_blank(&line);
            continue;
        };
        out.clear();
        if held_blank {
            m.crlf.push(b"\n", &mut out);
            held_blank = false;
        }
        if at_start && ends_line && is_blank(&line) {
            m.in_header = false;
            held_blank = true;
            after_blank = true;
        } else {
            after_blank = false;
            let mut text: &[u8] = &line;
            if at_start {
                if m.in_header {
                    m.flags |= status_flags(text);
                }
                // mboxrd: one `>` comes off a quoted From line.
                let quotes = text.iter().take_while(|&&b| b == b'>').count();
                if quotes > 0 && text[quotes..].starts_with(b"From ") {
                    text = &text[1..];
                }
            }
            m.crlf.push(text, &mut out);
        }
        if !out.is_empty() {
            m.writer.write(&out).await?;
        }
    }
    if let Some(m) = current.take() {
        finish_mbox_message(m, mailbox, progress).await?;
        journal.set_offset(offset)?;
    }
    Ok(())
}

async fn finish_mbox_message(
    mut m: MboxMessage,
    mailbox: &MailboxInfo,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut tail = Vec::new();
    m.crlf.finish(&mut tail);
    if !tail.is_empty() {
        m.writer.write(&tail).await?;
    }
    let size = m.writer.size();
    m.writer
        .deliver(Delivery {
            mailboxes: vec![mailbox.id],
            internal_date: m.date,
            flags: m.flags,
            ..Delivery::default()
        })
        .await?;
    progress.add(size);
    Ok(())
}

/// Flags of a Maildir file name's `:2,` info.
fn maildir_flags(name: &str) -> u32 {
    let Some((_, info)) = name.rsplit_once(":2,").or_else(|| name.rsplit_once("!2,")) else {
        return 0;
    };
    [
        ('S', FLAG_SEEN),
        ('R', FLAG_ANSWERED),
        ('F', FLAG_FLAGGED),
        ('T', FLAG_DELETED),
        ('D', FLAG_DRAFT),
    ]
    .iter()
    .filter(|(c, _)| info.contains(*c))
    .fold(0, |acc, (_, f)| acc | f)
}

/// The mailboxes of a Maildir++ tree: the root is INBOX, `.A.B` is `A/B`.
fn maildir_folders(root: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let is_maildir = |p: &Path| p.join("cur").is_dir() || p.join("new").is_dir();
    if !is_maildir(root) {
        bail!("{} is not a Maildir (no cur/ or new/)", root.display());
    }
    let mut folders = vec![("INBOX".to_string(), root.to_path_buf())];
    let mut subs: Vec<(String, PathBuf)> = std::fs::read_dir(root)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let folder = name.strip_prefix('.')?;
            (!folder.is_empty() && folder != "." && is_maildir(&e.path()))
                .then(|| (folder.replace('.', "/"), e.path()))
        })
        .collect();
    subs.sort();
    folders.extend(subs);
    Ok(folders)
}

async fn import_maildir(
    store: &dyn Store,
    account: AccountId,
    root: &Path,
    journal: &Journal,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let done = journal.done_names();
    for (name, dir) in maildir_folders(root)? {
        let mailbox = mailbox_named(store, account, &name).await?;
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for sub in ["new", "cur"] {
            let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
                continue;
            };
            for e in entries.filter_map(|e| e.ok()) {
                if e.file_type().map(|t| t.is_file()).unwrap_or(false) {
                    let file = e.file_name().to_string_lossy().into_owned();
                    files.push((format!("{sub}/{file}"), e.path()));
                }
            }
        }
        // Maildir names start with the delivery time: name order is
        // arrival order, which the UIDs keep.
        files.sort_by(|a, b| a.0.rsplit('/').next().cmp(&b.0.rsplit('/').next()));
        for (rel, path) in files {
            let key = format!("{name}/{rel}");
            if done.contains(&key) {
                continue;
            }
            import_file(store, &mailbox, &path, progress).await?;
            journal.add_name(&key)?;
        }
    }
    Ok(())
}

async fn import_file(
    store: &dyn Store,
    mailbox: &MailboxInfo,
    path: &Path,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let date = file
        .metadata()?
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut reader = BufReader::with_capacity(PIECE, file);
    let mut writer = store.message_writer();
    let mut crlf = LineEnds::default();
    let mut buf = vec![0u8; PIECE];
    let mut out = Vec::with_capacity(PIECE * 2);
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.clear();
        crlf.push(&buf[..n], &mut out);
        writer.write(&out).await?;
    }
    out.clear();
    crlf.finish(&mut out);
    if !out.is_empty() {
        writer.write(&out).await?;
    }
    let size = writer.size();
    writer
        .deliver(Delivery {
            mailboxes: vec![mailbox.id],
            internal_date: date,
            flags: maildir_flags(&name),
            ..Delivery::default()
        })
        .await?;
    progress.add(size);
    Ok(())
}

pub async fn export(config: &Config, args: ExportArgs) -> anyhow::Result<()> {
    let store = open(config).await?;
    let account = account_of(&*store, &args.address).await?;
    let mut progress = Progress::new("exported");
    match args.format {
        Format::Imap => bail!("export writes an mbox file or a Maildir"),
        Format::Mbox => {
            let name = args.mailbox.as_deref().unwrap_or("INBOX");
            let Some(mailbox) = store.mailbox(account, name).await? else {
                bail!("{} has no mailbox {name}", args.address);
            };
            if args.path.as_os_str() == "-" {
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                export_mbox(&*store, &mailbox, &mut out, &mut progress).await?;
                out.flush()?;
            } else {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&args.path)
                    .with_context(|| format!("cannot create {}", args.path.display()))?;
                let mut out = std::io::BufWriter::new(file);
                export_mbox(&*store, &mailbox, &mut out, &mut progress).await?;
                out.flush()?;
            }
        }
        Format::Maildir => {
            if args.mailbox.is_some() {
                bail!("--mailbox is for mbox: a Maildir export holds every mailbox");
            }
            export_maildir(&*store, account, &args.path, &mut progress).await?;
        }
    }
    progress.print();
    Ok(())
}

/// Writes the stored text of a message, CRLF turned into LF (mbox and
/// Maildir files use the local line end), From lines quoted for mbox.
async fn write_message(
    store: &dyn Store,
    blob: store::BlobId,
    out: &mut impl Write,
    mbox: bool,
) -> anyhow::Result<u64> {
    let mut seq = 0;
    let mut at_line_start = true;
    let mut total = 0u64;
    let mut pending_cr = false;
    let mut buf = Vec::new();
    while let Some(piece) = store.read_chunk(blob, seq).await? {
        seq += 1;
        total += piece.len() as u64;
        buf.clear();
        for &b in &piece {
            if pending_cr {
                pending_cr = false;
                if b != b'\n' {
                    buf.push(b'\r');
                }
            }
            if b == b'\r' {
                pending_cr = true;
                continue;
            }
            buf.push(b);
        }
        if mbox {
            quote_from_lines(&mut buf, at_line_start);
        }
        if let Some(&last) = buf.last() {
            at_line_start = last == b'\n';
        }
        out.write_all(&buf)?;
    }
    if pending_cr {
        out.write_all(b"\r")?;
    }
    Ok(total)
}

/// mboxrd: a line that is `>*From ` gets one more `>`. `starts_line`
/// says whether `buf` starts a line (a line may span pieces; a `From `
/// cut by a piece boundary at a line start is too rare to look for).
fn quote_from_lines(buf: &mut Vec<u8>, starts_line: bool) {
    let mut out = Vec::with_capacity(buf.len() + 16);
    for (i, line) in buf.split_inclusive(|&b| b == b'\n').enumerate() {
        let quotes = line.iter().take_while(|&&b| b == b'>').count();
        if (i > 0 || starts_line) && line[quotes..].starts_with(b"From ") {
            out.push(b'>');
        }
        out.extend_from_slice(line);
    }
    *buf = out;
}

fn asctime(unix: i64) -> String {
    let t =
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let weekday = &t.weekday().to_string()[..3];
    let month = &t.month().to_string()[..3];
    format!(
        "{weekday} {month} {:2} {:02}:{:02}:{:02} {}",
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.year()
    )
}

async fn export_mbox(
    store: &dyn Store,
    mailbox: &MailboxInfo,
    out: &mut impl Write,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    for entry in store.list_messages(mailbox.id).await? {
        writeln!(out, "From MAILER-DAEMON {}", asctime(entry.internal_date))?;
        let mut status = String::new();
        if entry.flags & FLAG_SEEN != 0 {
            status.push_str("RO");
        } else {
            status.push('O');
        }
        let mut x_status = String::new();
        for (bit, c) in [
            (FLAG_ANSWERED, 'A'),
            (FLAG_FLAGGED, 'F'),
            (FLAG_DRAFT, 'T'),
            (FLAG_DELETED, 'D'),
        ] {
            if entry.flags & bit != 0 {
                x_status.push(c);
            }
        }
        writeln!(out, "Status: {status}")?;
        if !x_status.is_empty() {
            writeln!(out, "X-Status: {x_status}")?;
        }
        let size = write_message(store, entry.blob, out, true).await?;
        out.write_all(b"\n")?;
        progress.add(size);
    }
    Ok(())
}

async fn export_maildir(
    store: &dyn Store,
    account: AccountId,
    root: &Path,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    if root.exists() {
        bail!("{} exists; export writes a new Maildir", root.display());
    }
    let host = "sluice";
    for mailbox in store.list_mailboxes(account).await? {
        let dir = if mailbox.name == "INBOX" {
            root.to_path_buf()
        } else {
            root.join(format!(".{}", mailbox.name.replace('/', ".")))
        };
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        for entry in store.list_messages(mailbox.id).await? {
            let mut info = String::new();
            for (bit, c) in [
                (FLAG_DRAFT, 'D'),
                (FLAG_FLAGGED, 'F'),
                (FLAG_ANSWERED, 'R'),
                (FLAG_SEEN, 'S'),
                (FLAG_DELETED, 'T'),
            ] {
                if entry.flags & bit != 0 {
                    info.push(c);
                }
            }
            let name = format!(
                "{}.U{}V{}.{host}:2,{info}",
                entry.internal_date, entry.uid, mailbox.uid_validity
            );
            let path = dir.join("cur").join(name);
            let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
            let size = write_message(store, entry.blob, &mut file, false).await?;
            file.flush()?;
            drop(file);
            let when = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(entry.internal_date.max(0) as u64);
            std::fs::File::options()
                .write(true)
                .open(&path)?
                .set_modified(when)?;
            progress.add(size);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_lines_give_their_dates() {
        assert_eq!(
            from_line_date(b"From MAILER-DAEMON Fri Jul  8 12:08:34 2011\n"),
            Some(1_310_126_914)
        );
        assert_eq!(
            from_line_date(b"From a@b.example Mon Jan  1 00:00:00 2024 +0000\n"),
            Some(1_704_067_200)
        );
        assert_eq!(from_line_date(b"From nobody\n"), None);
        assert_eq!(
            asctime(1_310_126_914),
            "Fri Jul  8 12:08:34 2011".to_string()
        );
    }

    #[test]
    fn status_and_maildir_flags() {
        assert_eq!(status_flags(b"Status: RO\n"), FLAG_SEEN);
        assert_eq!(
            status_flags(b"X-Status: AF\n"),
            FLAG_ANSWERED | FLAG_FLAGGED
        );
        assert_eq!(status_flags(b"Subject: R\n"), 0);
        assert_eq!(
            maildir_flags("1700000000.M1P2.host:2,FRS"),
            FLAG_FLAGGED | FLAG_ANSWERED | FLAG_SEEN
        );
        assert_eq!(maildir_flags("1700000000.M1P2.host"), 0);
    }

    #[test]
    fn long_lines_come_in_pieces() {
        let mut text = vec![b'x'; PIECE + 10];
        text.extend_from_slice(b"\nnext\n");
        let mut r = BufReader::with_capacity(1000, &text[..]);
        let mut piece = Vec::new();
        assert!(!read_piece(&mut r, &mut piece).unwrap());
        assert_eq!(piece.len(), PIECE);
        assert!(read_piece(&mut r, &mut piece).unwrap());
        assert_eq!(piece.len(), 11);
        assert!(read_piece(&mut r, &mut piece).unwrap());
        assert_eq!(piece, b"next\n");
        assert!(!read_piece(&mut r, &mut piece).unwrap());
        assert!(piece.is_empty());
    }

    #[test]
    fn quoting_adds_one_angle_bracket() {
        let mut b = b"From x\n>From y\nFromage\n".to_vec();
        quote_from_lines(&mut b, true);
        assert_eq!(b, b">From x\n>>From y\nFromage\n");
        let mut b = b"From x\nFrom y\n".to_vec();
        quote_from_lines(&mut b, false);
        assert_eq!(b, b"From x\n>From y\n");
    }
}
