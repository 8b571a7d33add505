//! The ManageSieve server over real TCP on 127.0.0.1, with a real SQLite
//! store in a temp directory and a stand-in compiler (the real one is
//! handed in by `sluice serve`).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use managesieve::{Context, Language, ManageSieveConfig};
use net::{ConnLimiter, Shutdown};
use store::{Authenticator, DirectoryWatch, ScriptOwner, SqliteOptions, SqliteStore, Store};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const USER: &str = "ann@example.org";
const PASSWORD: &str = "secret pw";

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    account: i64,
    addr: std::net::SocketAddr,
    shutdown: Shutdown,
}

/// A script "compiles" unless it contains `error`.
fn language() -> Language {
    Language {
        check: Arc::new(|source: &str| match source.find("error") {
            Some(_) => Err("line 2, column 5: unknown command \"error\"".into()),
            None => Ok(()),
        }),
        extensions: vec!["fileinto".into(), "vacation".into()],
        max_redirects: Some(4),
    }
}

async fn start(config: ManageSieveConfig) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    sqlite.add_domain("example.org").await.unwrap();
    let account = sqlite.add_account(USER, PASSWORD).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(sqlite);
    let directory = DirectoryWatch::start(Arc::clone(&store), Duration::from_millis(100))
        .await
        .unwrap();
    let shutdown = Shutdown::default();
    let ctx = Arc::new(Context {
        hostname: "mx.example.org".into(),
        limiter: ConnLimiter::with_total(config.max_connections_per_ip, config.max_connections),
        config,
        store: Arc::clone(&store),
        auth: Arc::new(Authenticator::new(directory, Duration::from_millis(10))),
        tls: None,
        shutdown: shutdown.clone(),
        language: language(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(managesieve::serve(listener, ctx));
    Fixture {
        _dir: dir,
        store,
        account,
        addr,
        shutdown,
    }
}

struct Client {
    io: BufReader<TcpStream>,
}

impl Client {
    async fn connect(f: &Fixture) -> (Client, String) {
        let io = BufReader::new(TcpStream::connect(f.addr).await.unwrap());
        let mut c = Client { io };
        let greeting = c.response().await;
        (c, greeting)
    }

    async fn send(&mut self, data: &[u8]) {
        self.io.get_mut().write_all(data).await.unwrap();
    }

    /// Everything up to and including the next OK, NO or BYE line, with
    /// literals read whole.
    async fn response(&mut self) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            let n = tokio::time::timeout(Duration::from_secs(10), self.io.read_line(&mut line))
                .await
                .expect("server answers")
                .unwrap();
            if n == 0 {
                return all;
            }
            all.push_str(&line);
            let body = line.trim_end();
            if let Some(size) = body
                .rsplit_once('{')
                .and_then(|(_, r)| r.strip_suffix('}'))
                .and_then(|n| n.parse::<usize>().ok())
            {
                let mut data = vec![0; size];
                self.io.read_exact(&mut data).await.unwrap();
                all.push_str(&String::from_utf8_lossy(&data));
                continue;
            }
            if ["OK", "NO", "BYE"]
                .iter()
                .any(|s| body == *s || body.starts_with(&format!("{s} ")))
            {
                return all;
            }
        }
    }

    async fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes()).await;
        self.response().await
    }

    async fn login(f: &Fixture) -> Client {
        let (mut c, _) = Client::connect(f).await;
        let r = c
            .cmd(&format!(
                "AUTHENTICATE \"PLAIN\" \"{}\"",
                plain(USER, PASSWORD)
            ))
            .await;
        assert!(r.starts_with("OK"), "{r}");
        c
    }
}

fn plain(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"))
}

#[tokio::test]
async fn greeting_lists_capabilities() {
    let f = start(ManageSieveConfig::default()).await;
    let (mut c, greeting) = Client::connect(&f).await;
    for cap in [
        "\"IMPLEMENTATION\" \"Sluice\"",
        "\"SASL\" \"PLAIN\"",
        "\"SIEVE\" \"fileinto vacation\"",
        "\"MAXREDIRECTS\" \"4\"",
        "\"UNAUTHENTICATE\"",
        "\"VERSION\" \"1.0\"",
    ] {
        assert!(greeting.contains(cap), "{cap} in {greeting}");
    }
    // No TLS configured: no STARTTLS.
    assert!(!greeting.contains("STARTTLS"), "{greeting}");
    assert!(greeting.lines().last().unwrap().starts_with("OK"));
    let r = c.cmd("CAPABILITY").await;
    assert!(r.contains("\"VERSION\" \"1.0\""), "{r}");
    let r = c.cmd("NOOP \"tag 1\"").await;
    assert_eq!(r, "OK (TAG \"tag 1\") \"Done\"\r\n");
    let r = c.cmd("LISTSCRIPTS").await;
    assert!(r.starts_with("NO"), "scripts need a login: {r}");
    let r = c.cmd("LOGOUT").await;
    assert!(r.starts_with("OK"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn authenticate_in_every_form() {
    let f = start(ManageSieveConfig::default()).await;
    // Continuation with a quoted string.
    let (mut c, _) = Client::connect(&f).await;
    c.send(b"AUTHENTICATE \"PLAIN\"\r\n").await;
    let mut challenge = String::new();
    c.io.read_line(&mut challenge).await.unwrap();
    assert_eq!(challenge, "\"\"\r\n");
    let r = c.cmd(&format!("\"{}\"", plain(USER, PASSWORD))).await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("CAPABILITY").await;
    assert!(r.contains(&format!("\"OWNER\" \"{USER}\"")), "{r}");
    // UNAUTHENTICATE goes back to the start.
    let r = c.cmd("UNAUTHENTICATE").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("LISTSCRIPTS").await;
    assert!(r.starts_with("NO"), "{r}");
    // Continuation answered with a literal, initial response as a
    // literal (as sieve-connect sends it).
    c.send(b"AUTHENTICATE \"PLAIN\"\r\n").await;
    let mut challenge = String::new();
    c.io.read_line(&mut challenge).await.unwrap();
    let b64 = plain(USER, PASSWORD);
    let r = c.cmd(&format!("{{{}+}}\r\n{b64}", b64.len())).await;
    assert!(r.starts_with("OK"), "{r}");
    c.cmd("UNAUTHENTICATE").await;
    let r = c
        .cmd(&format!(
            "AUTHENTICATE \"PLAIN\" {{{}+}}\r\n{b64}",
            b64.len()
        ))
        .await;
    assert!(r.starts_with("OK"), "{r}");
    c.cmd("UNAUTHENTICATE").await;
    // Cancelled, another authorization identity, a wrong password.
    c.send(b"AUTHENTICATE \"PLAIN\"\r\n").await;
    let mut challenge = String::new();
    c.io.read_line(&mut challenge).await.unwrap();
    let r = c.cmd("\"*\"").await;
    assert!(r.starts_with("NO"), "{r}");
    let other = base64::engine::general_purpose::STANDARD
        .encode(format!("bob@example.org\0{USER}\0{PASSWORD}"));
    let r = c.cmd(&format!("AUTHENTICATE \"PLAIN\" \"{other}\"")).await;
    assert!(r.starts_with("NO") && r.contains("Authorization"), "{r}");
    let r = c
        .cmd(&format!(
            "AUTHENTICATE \"PLAIN\" \"{}\"",
            plain(USER, "wrong")
        ))
        .await;
    assert_eq!(r, "NO \"Authentication failed\"\r\n");
    let r = c
        .cmd(&format!(
            "AUTHENTICATE \"DIGEST-MD5\" \"{}\"",
            plain(USER, PASSWORD)
        ))
        .await;
    assert!(r.starts_with("NO"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn too_many_failed_logins_close_the_session() {
    let f = start(ManageSieveConfig::default()).await;
    let (mut c, _) = Client::connect(&f).await;
    for _ in 0..2 {
        let r = c
            .cmd(&format!("AUTHENTICATE \"PLAIN\" \"{}\"", plain(USER, "x")))
            .await;
        assert!(r.starts_with("NO"), "{r}");
    }
    let r = c
        .cmd(&format!("AUTHENTICATE \"PLAIN\" \"{}\"", plain(USER, "x")))
        .await;
    assert!(r.starts_with("NO"), "{r}");
    let r = c.response().await;
    assert!(r.starts_with("BYE"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn scripts_from_upload_to_deletion() {
    let f = start(ManageSieveConfig::default()).await;
    let mut c = Client::login(&f).await;
    let script = "require \"fileinto\";\r\nfileinto \"Lists\";\r\n";
    // Both literal forms.
    let r = c
        .cmd(&format!(
            "PUTSCRIPT \"lists\" {{{}+}}\r\n{script}",
            script.len()
        ))
        .await;
    assert_eq!(r, "OK \"Script stored\"\r\n");
    let r = c
        .cmd(&format!(
            "PUTSCRIPT \"other\" {{{}}}\r\n{script}",
            script.len()
        ))
        .await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("PUTSCRIPT \"quoted\" \"keep;\"").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("SETACTIVE \"lists\"").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("LISTSCRIPTS").await;
    assert_eq!(
        r,
        "\"lists\" ACTIVE\r\n\"other\"\r\n\"quoted\"\r\nOK \"Listscripts completed\"\r\n"
    );
    let r = c.cmd("GETSCRIPT \"lists\"").await;
    assert_eq!(
        r,
        format!(
            "{{{}}}\r\n{script}\r\nOK \"Getscript completed\"\r\n",
            script.len()
        )
    );
    let r = c.cmd("GETSCRIPT \"nope\"").await;
    assert!(r.starts_with("NO (NONEXISTENT)"), "{r}");
    // The active one cannot go; a taken name cannot be renamed to.
    let r = c.cmd("DELETESCRIPT \"lists\"").await;
    assert!(r.starts_with("NO (ACTIVE)"), "{r}");
    let r = c.cmd("DELETESCRIPT \"nope\"").await;
    assert!(r.starts_with("NO (NONEXISTENT)"), "{r}");
    let r = c.cmd("RENAMESCRIPT \"other\" \"quoted\"").await;
    assert!(r.starts_with("NO (ALREADYEXISTS)"), "{r}");
    let r = c.cmd("RENAMESCRIPT \"lists\" \"filters\"").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("RENAMESCRIPT \"nope\" \"x\"").await;
    assert!(r.starts_with("NO (NONEXISTENT)"), "{r}");
    let r = c.cmd("SETACTIVE \"nope\"").await;
    assert!(r.starts_with("NO (NONEXISTENT)"), "{r}");
    let me = ScriptOwner::Account(f.account);
    let list = f.store.sieve_scripts(me).await.unwrap();
    assert!(list.iter().any(|s| s.name == "filters" && s.active));
    // Deactivate, then delete.
    let r = c.cmd("SETACTIVE \"\"").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("DELETESCRIPT \"filters\"").await;
    assert!(r.starts_with("OK"), "{r}");
    let list = f.store.sieve_scripts(me).await.unwrap();
    let names: Vec<_> = list.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "quoted"]);
    assert!(list.iter().all(|s| !s.active));
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn broken_scripts_are_refused_with_their_position() {
    let f = start(ManageSieveConfig::default()).await;
    let mut c = Client::login(&f).await;
    let script = "keep;\r\n    error;\r\n";
    let r = c
        .cmd(&format!(
            "PUTSCRIPT \"bad\" {{{}+}}\r\n{script}",
            script.len()
        ))
        .await;
    assert!(r.starts_with("NO") && r.contains("line 2, column 5"), "{r}");
    assert!(f
        .store
        .sieve_scripts(ScriptOwner::Account(f.account))
        .await
        .unwrap()
        .is_empty());
    let r = c
        .cmd(&format!("CHECKSCRIPT {{{}+}}\r\n{script}", script.len()))
        .await;
    assert!(r.starts_with("NO") && r.contains("line 2, column 5"), "{r}");
    let r = c.cmd("CHECKSCRIPT \"keep;\"").await;
    assert!(r.starts_with("OK"), "{r}");
    // Not UTF-8.
    c.send(b"PUTSCRIPT \"latin1\" {3+}\r\n\xe9t\xe9\r\n").await;
    let r = c.response().await;
    assert!(r.starts_with("NO"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn quotas_are_told_before_and_kept_on_upload() {
    let f = start(ManageSieveConfig {
        max_script_size: 100,
        max_scripts: 2,
        ..ManageSieveConfig::default()
    })
    .await;
    let mut c = Client::login(&f).await;
    let r = c.cmd("HAVESPACE \"a\" 100").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("HAVESPACE \"a\" 101").await;
    assert!(r.starts_with("NO (QUOTA/MAXSIZE)"), "{r}");
    let r = c.cmd("HAVESPACE \"a\" x").await;
    assert!(r.starts_with("NO"), "{r}");
    // A literal over the limit is read and dropped: the session goes on.
    let big = "#".repeat(5000);
    let r = c
        .cmd(&format!("PUTSCRIPT \"big\" {{{}+}}\r\n{big}", big.len()))
        .await;
    assert!(r.starts_with("NO (QUOTA/MAXSIZE)"), "{r}");
    let r = c.cmd("NOOP").await;
    assert!(r.starts_with("OK"), "{r}");
    for name in ["a", "b"] {
        let r = c.cmd(&format!("PUTSCRIPT \"{name}\" \"keep;\"")).await;
        assert!(r.starts_with("OK"), "{r}");
    }
    let r = c.cmd("HAVESPACE \"c\" 10").await;
    assert!(r.starts_with("NO (QUOTA/MAXSCRIPTS)"), "{r}");
    let r = c.cmd("PUTSCRIPT \"c\" \"keep;\"").await;
    assert!(r.starts_with("NO (QUOTA/MAXSCRIPTS)"), "{r}");
    // Replacing one is not one more.
    let r = c.cmd("HAVESPACE \"b\" 10").await;
    assert!(r.starts_with("OK"), "{r}");
    let r = c.cmd("PUTSCRIPT \"b\" \"discard;\"").await;
    assert!(r.starts_with("OK"), "{r}");
    // A literal beyond reason ends the session.
    c.send(b"PUTSCRIPT \"huge\" {999999999999+}\r\n").await;
    let r = c.response().await;
    assert!(r.starts_with("BYE"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn malformed_commands_leave_the_session_in_step() {
    let f = start(ManageSieveConfig::default()).await;
    let mut c = Client::login(&f).await;
    // A malformed line whose literal still comes: skipped whole.
    c.send(b"PUTSCRIPT x\"y {6+}\r\nNOOP\r\n\r\n").await;
    let r = c.response().await;
    assert!(r.starts_with("NO \"Syntax error"), "{r}");
    let r = c.cmd("NOOP \"after\"").await;
    assert!(r.starts_with("OK (TAG \"after\")"), "{r}");
    let r = c.cmd("FROBNICATE").await;
    assert!(r.starts_with("NO"), "{r}");
    let long = "x".repeat(10_000);
    let r = c.cmd(&format!("NOOP \"{long}\"")).await;
    assert!(r.starts_with("NO"), "{r}");
    let r = c.cmd("noop").await;
    assert!(r.starts_with("OK"), "{r}");
    f.shutdown.token.cancel();
}

#[tokio::test]
async fn no_login_in_time_closes_the_session() {
    let f = start(ManageSieveConfig {
        login_timeout_secs: 1,
        ..ManageSieveConfig::default()
    })
    .await;
    let (mut c, _) = Client::connect(&f).await;
    let r = c.response().await;
    assert!(r.starts_with("BYE"), "{r}");
    f.shutdown.token.cancel();
}
