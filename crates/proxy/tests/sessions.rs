//! The proxy's sessions against scripted upstream servers on loopback:
//! what exactly reaches the upstream (SMTP) and the client (POP3).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

fn check() -> Arc<proxy::ContentCheck> {
    Arc::new(proxy::ContentCheck {
        engine: scan::Engine::Builtin(scan::Scanner::new(
            Arc::new(scan::Database::builtin()),
            scan::Limits::default(),
        )),
        reject_limit: true,
        reject_encrypted: true,
    })
}

/// Starts a proxy for `protocol` in front of `upstream`; returns where it listens.
async fn start_proxy(protocol: &str, upstream: SocketAddr) -> SocketAddr {
    start_proxy_with(protocol, upstream, net::Shutdown::default(), "").await
}

async fn start_proxy_with(
    protocol: &str,
    upstream: SocketAddr,
    shutdown: net::Shutdown,
    more: &str,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config: proxy::ProxyConfig = toml::from_str(&format!(
        "protocol = \"{protocol}\"\nlisten = \"{addr}\"\nupstream = \"{upstream}\"\ntls = \"none\"\ntimeout_secs = 10\n{more}"
    ))
    .unwrap();
    let ctx = Arc::new(proxy::Context {
        limiter: proxy::Context::limiter_for(&config),
        config,
        hostname: "proxy.test".into(),
        tls: None,
        upstream_tls: None,
        scan: Some(check()),
        shutdown,
    });
    tokio::spawn(proxy::serve(listener, ctx));
    addr
}

/// An SMTP upstream that answers everything positively and records every
/// byte it receives, per connection. Except: `RCPT TO:<refused@...>` gets
/// 550, DATA after `MAIL FROM:<nodata@...>` gets 554, and the first `EHLO
/// vanish` is met by closing the connection.
async fn smtp_upstream() -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let record = Arc::clone(&seen);
    let vanished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let record = Arc::clone(&record);
            let vanished = Arc::clone(&vanished);
            let index = {
                let mut r = record.lock().unwrap();
                r.push(Vec::new());
                r.len() - 1
            };
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = BufReader::new(read);
                write.write_all(b"220 upstream ESMTP\r\n").await.unwrap();
                let mut in_data = false;
                let mut refuse_data = false;
                loop {
                    let mut line = Vec::new();
                    if read.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    record.lock().unwrap()[index].extend_from_slice(&line);
                    if in_data {
                        if line == b".\r\n" {
                            in_data = false;
                            write.write_all(b"250 2.0.0 queued\r\n").await.unwrap();
                        }
                        continue;
                    }
                    let verb = String::from_utf8_lossy(&line).to_ascii_uppercase();
                    if verb == "EHLO VANISH\r\n"
                        && !vanished.swap(true, std::sync::atomic::Ordering::SeqCst)
                    {
                        return;
                    }
                    if verb.starts_with("MAIL FROM:") {
                        refuse_data = verb.starts_with("MAIL FROM:<NODATA@");
                    }
                    let reply: &[u8] = if verb.starts_with("EHLO") {
                        b"250-upstream\r\n250-PIPELINING\r\n250-VRFY\r\n250 8BITMIME\r\n"
                    } else if verb.starts_with("DATA") && refuse_data {
                        b"554 5.7.1 no data today\r\n"
                    } else if verb.starts_with("DATA") {
                        in_data = true;
                        b"354 go ahead\r\n"
                    } else if verb.starts_with("QUIT") {
                        b"221 bye\r\n"
                    } else if verb.starts_with("RCPT TO:<REFUSED@") {
                        b"550 5.1.1 no such user\r\n"
                    } else if verb.starts_with("AUTH") {
                        b"235 2.7.0 ok\r\n"
                    } else {
                        b"250 ok\r\n"
                    };
                    write.write_all(reply).await.unwrap();
                }
            });
        }
    });
    (addr, seen)
}

/// Sends `commands` and reads `replies` reply lines.
async fn exchange(stream: &mut BufReader<TcpStream>, commands: &[u8], replies: usize) -> String {
    stream.get_mut().write_all(commands).await.unwrap();
    let mut out = String::new();
    for _ in 0..replies {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_line(&mut line))
            .await
            .expect("a reply in time")
            .unwrap();
        out.push_str(&line);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtp_upstream_gets_the_stuffed_text_and_no_end_for_a_virus() {
    let (upstream, seen) = smtp_upstream().await;
    let addr = start_proxy("smtp", upstream).await;
    let mut client = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut greeting = String::new();
    client.read_line(&mut greeting).await.unwrap();
    assert!(greeting.starts_with("220 upstream"), "{greeting}");
    let ehlo = exchange(&mut client, b"EHLO client\r\n", 3).await;
    assert_eq!(ehlo, "250-upstream\r\n250-PIPELINING\r\n250 8BITMIME\r\n");
    // A clean message with a dot line and a bare LF: the upstream gets it
    // stuffed, with the bare LF made CRLF (what the scanner saw).
    let r = exchange(
        &mut client,
        b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n",
        3,
    )
    .await;
    assert!(
        r.ends_with("354 End data with <CR><LF>.<CR><LF>\r\n"),
        "{r}"
    );
    let r = exchange(
        &mut client,
        b"Subject: hi\r\n\r\n..dot\r\nbare\nlf\r\n.\r\n",
        1,
    )
    .await;
    assert_eq!(r, "250 2.0.0 queued\r\n");
    // An infected one: refused, and the upstream connection it went on
    // is closed before its end.
    exchange(
        &mut client,
        b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n",
        3,
    )
    .await;
    let mut infected = b"Subject: bad\r\n\r\n".to_vec();
    infected.extend_from_slice(scan::EICAR);
    infected.extend_from_slice(b"\r\n");
    infected.extend_from_slice(&b"padding line\r\n".repeat(20_000));
    infected.extend_from_slice(b".\r\n");
    let r = exchange(&mut client, &infected, 1).await;
    assert!(
        r.starts_with("554 5.7.1 ") && r.contains(scan::EICAR_NAME),
        "{r}"
    );
    // The session goes on, on a new upstream connection (which is kept
    // for the next client: the proxy answers QUIT).
    let r = exchange(&mut client, b"NOOP\r\nQUIT\r\n", 2).await;
    assert_eq!(r, "250 ok\r\n221 2.0.0 Bye\r\n");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        2,
        "one more upstream connection after the refusal"
    );
    let first = String::from_utf8_lossy(&seen[0]).to_string();
    assert!(
        first.contains("DATA\r\nSubject: hi\r\n\r\n..dot\r\nbare\r\nlf\r\n.\r\n"),
        "{first:?}"
    );
    let tail = &first[first.rfind("DATA\r\n").unwrap()..];
    assert!(
        !tail.contains("\r\n.\r\n"),
        "the infected message had no end upstream"
    );
    assert!(
        tail.len() < infected.len() / 2,
        "the upstream was dropped as soon as the virus was seen ({} bytes went)",
        tail.len()
    );
    let second = String::from_utf8_lossy(&seen[1]).to_string();
    assert!(
        second.starts_with("EHLO client\r\n"),
        "EHLO replayed: {second:?}"
    );
}

/// A POP3 upstream with one message, answering RETR 1, NOOP and QUIT.
async fn pop3_upstream(message: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let (read, mut write) = socket.into_split();
        let mut read = BufReader::new(read);
        write.write_all(b"+OK upstream ready\r\n").await.unwrap();
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            match line.trim() {
                "RETR 1" => {
                    let mut out = format!("+OK {} octets\r\n", message.len()).into_bytes();
                    for l in message.split_inclusive(|b| *b == b'\n') {
                        if l.starts_with(b".") {
                            out.push(b'.');
                        }
                        out.extend_from_slice(l);
                    }
                    out.extend_from_slice(b".\r\n");
                    write.write_all(&out).await.unwrap();
                }
                "QUIT" => {
                    write.write_all(b"+OK bye\r\n").await.unwrap();
                    return;
                }
                _ => write.write_all(b"+OK\r\n").await.unwrap(),
            }
        }
    });
    addr
}

fn base64_lines(data: &[u8]) -> String {
    let text = base64::engine::general_purpose::STANDARD.encode(data);
    text.as_bytes()
        .chunks(76)
        .map(|c| format!("{}\r\n", std::str::from_utf8(c).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pop3_cuts_a_long_infected_part_in_the_middle_and_closes_the_message() {
    // A 200 KB file with EICAR at its start: the scanner finds it long
    // before the part ends.
    let mut file = scan::EICAR.to_vec();
    file.extend(std::iter::repeat_n(b'A', 200_000));
    let message = format!(
        "Subject: t\r\nContent-Type: multipart/mixed; boundary=\"out\"\r\n\r\n\
         --out\r\nContent-Type: text/plain\r\n\r\n.hello\r\n\
         --out\r\nContent-Type: multipart/alternative; boundary=in\r\n\r\n\
         --in\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n\
         {}--in--\r\n--out\r\nContent-Type: text/plain\r\n\r\nlater part\r\n--out--\r\n",
        base64_lines(&file)
    );
    let upstream = pop3_upstream(message.clone().into_bytes()).await;
    let addr = start_proxy("pop3", upstream).await;
    let mut client = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    client.read_line(&mut line).await.unwrap();
    client.get_mut().write_all(b"RETR 1\r\n").await.unwrap();
    let mut got = Vec::new();
    loop {
        let mut l = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), client.read_until(b'\n', &mut l))
            .await
            .unwrap()
            .unwrap();
        if l == b".\r\n" {
            break;
        }
        got.extend_from_slice(&l);
    }
    let got = String::from_utf8(got).unwrap();
    assert!(got.starts_with("+OK "));
    let body = &got[got.find("\r\n").unwrap() + 2..];
    // Stuffing kept, the cut well before the end of the part.
    assert!(body.contains("\r\n..hello\r\n"));
    assert!(
        body.len() < message.len() / 2,
        "{} of {}",
        body.len(),
        message.len()
    );
    assert!(!body.contains("later part"));
    assert!(
        body.ends_with("\r\n--in--\r\n--out--\r\n"),
        "{}",
        &body[body.len().saturating_sub(300)..]
    );
    let notice = &body[body.rfind("\r\n--in\r\n").unwrap()..];
    assert!(notice.contains("removed-by-sluice.txt") && notice.contains(scan::EICAR_NAME));
    // The rest of the upstream's answer was read and dropped: the next
    // command gets its own reply.
    client.get_mut().write_all(b"NOOP\r\n").await.unwrap();
    let mut reply = String::new();
    client.read_line(&mut reply).await.unwrap();
    assert_eq!(reply, "+OK\r\n");
    let mut rest = Vec::new();
    client.get_mut().write_all(b"QUIT\r\n").await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest)).await;
    assert_eq!(rest, b"+OK bye\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signal_closes_idle_sessions_with_421() {
    let (upstream, _) = smtp_upstream().await;
    let shutdown = net::Shutdown::default();
    let addr = start_proxy_with("smtp", upstream, shutdown.clone(), "").await;
    let mut client = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut greeting = String::new();
    client.read_line(&mut greeting).await.unwrap();
    exchange(&mut client, b"EHLO client\r\n", 3).await;
    shutdown.token.cancel();
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), client.read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    assert!(line.starts_with("421 4.3.0 "), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_address_are_limited() {
    let (upstream, _) = smtp_upstream().await;
    let addr = start_proxy_with(
        "smtp",
        upstream,
        net::Shutdown::default(),
        "max_connections_per_ip = 1\n",
    )
    .await;
    let mut first = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    first.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("220 "), "{line}");
    let mut second = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut refused = String::new();
    tokio::time::timeout(Duration::from_secs(10), second.read_line(&mut refused))
        .await
        .unwrap()
        .unwrap();
    assert!(refused.starts_with("421 4.7.0 "), "{refused}");
}

/// An SMTP upstream that stops reading once DATA is accepted.
async fn stalling_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let (read, mut write) = socket.into_split();
        let mut read = BufReader::new(read);
        write.write_all(b"220 slow\r\n").await.unwrap();
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line.starts_with("DATA") {
                write.write_all(b"354 go ahead\r\n").await.unwrap();
                // Never reads again, but keeps the connection.
                std::future::pending::<()>().await;
            }
            write.write_all(b"250 ok\r\n").await.unwrap();
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_upstream_stops_the_client_instead_of_filling_memory() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let upstream = stalling_upstream().await;
    let addr = start_proxy("smtp", upstream).await;
    let mut client = BufReader::new(TcpStream::connect(addr).await.unwrap());
    let mut line = String::new();
    client.read_line(&mut line).await.unwrap();
    let r = exchange(
        &mut client,
        b"HELO c\r\nMAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n",
        4,
    )
    .await;
    assert!(
        r.ends_with("354 End data with <CR><LF>.<CR><LF>\r\n"),
        "{r}"
    );
    const TOTAL: usize = 256 * 1024 * 1024;
    let written = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&written);
    let mut stream = client.into_inner();
    let writer = tokio::spawn(async move {
        let chunk = [&b"x".repeat(998)[..], b"\r\n"].concat().repeat(64);
        while count.load(Ordering::Relaxed) < TOTAL {
            if stream.write_all(&chunk).await.is_err() {
                return;
            }
            count.fetch_add(chunk.len(), Ordering::Relaxed);
        }
    });
    // Wait until the client can write no more: the socket buffers on
    // both sides are full and the proxy holds only its fixed buffers.
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = written.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        assert!(
            now < TOTAL,
            "the client wrote everything: nothing held it back"
        );
        last = now;
    }
    assert!(
        last < 64 * 1024 * 1024,
        "{last} bytes went before the client was held back"
    );
    println!("the client was held back after {last} bytes");
    writer.abort();
}

/// One client session: greeting, EHLO `name`, a message to `rcpt` (or
/// AUTH first when `auth`), QUIT. Returns the greeting and the replies.
async fn one_session(proxy: SocketAddr, name: &str, rcpt: &str, auth: bool) -> (String, String) {
    let mut client = BufReader::new(TcpStream::connect(proxy).await.unwrap());
    let mut greeting = String::new();
    client.read_line(&mut greeting).await.unwrap();
    let mut replies = exchange(&mut client, format!("EHLO {name}\r\n").as_bytes(), 3).await;
    if auth {
        replies += &exchange(&mut client, b"AUTH PLAIN AGEAYg==\r\n", 1).await;
    }
    let rcpt_reply = exchange(
        &mut client,
        format!("MAIL FROM:<a@x>\r\nRCPT TO:<{rcpt}>\r\n").as_bytes(),
        2,
    )
    .await;
    replies += &rcpt_reply;
    if rcpt_reply.ends_with("250 ok\r\n") {
        replies += &exchange(&mut client, b"DATA\r\n", 1).await;
        replies += &exchange(&mut client, b"Subject: s\r\n\r\nbody\r\n.\r\n", 1).await;
    } else {
        replies += &exchange(&mut client, b"RSET\r\n", 1).await;
    }
    replies += &exchange(&mut client, b"QUIT\r\n", 1).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut rest))
        .await
        .expect("the proxy closes after QUIT")
        .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    (greeting, replies)
}

fn connection_text(seen: &Arc<Mutex<Vec<Vec<u8>>>>, i: usize) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()[i]).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_sessions_share_an_upstream_connection_one_after_another() {
    let (upstream, seen) = smtp_upstream().await;
    let proxy = start_proxy("smtp", upstream).await;
    // Two clean sessions: the second is served on the first's connection,
    // with the upstream's greeting, and the proxy answers both QUITs.
    for name in ["one", "two"] {
        let (greeting, replies) = one_session(proxy, name, "b@y", false).await;
        assert_eq!(greeting, "220 upstream ESMTP\r\n");
        assert!(replies.contains("250 2.0.0 queued\r\n"), "{replies}");
        assert!(replies.ends_with("221 2.0.0 Bye\r\n"), "{replies}");
    }
    assert_eq!(seen.lock().unwrap().len(), 1, "one upstream connection");
    let text = connection_text(&seen, 0);
    assert!(text.starts_with("EHLO one\r\n"), "{text}");
    assert!(
        text.contains("\r\n.\r\nEHLO two\r\nMAIL FROM:<a@x>\r\n"),
        "{text}"
    );
    assert!(!text.contains("QUIT"), "{text}");

    // A session the upstream refused something in: its connection is
    // ended with QUIT, and the next session gets a new one.
    let (_, replies) = one_session(proxy, "three", "refused@y", false).await;
    assert!(replies.contains("550 5.1.1"), "{replies}");
    assert!(
        replies.ends_with("221 bye\r\n"),
        "the upstream's own: {replies}"
    );
    assert!(connection_text(&seen, 0).ends_with("RSET\r\nQUIT\r\n"));
    one_session(proxy, "four", "b@y", false).await;
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(connection_text(&seen, 1).starts_with("EHLO four\r\n"));

    // After AUTH, the connection is not kept either.
    let (_, replies) = one_session(proxy, "five", "b@y", true).await;
    assert!(replies.contains("235 2.7.0"), "{replies}");
    assert!(replies.ends_with("221 bye\r\n"), "{replies}");
    one_session(proxy, "six", "b@y", false).await;
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert!(connection_text(&seen, 1).contains("EHLO five\r\nAUTH PLAIN"));
    assert!(connection_text(&seen, 2).starts_with("EHLO six\r\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_found_closed_is_replaced_unseen() {
    let (upstream, seen) = smtp_upstream().await;
    let proxy = start_proxy("smtp", upstream).await;
    one_session(proxy, "one", "b@y", false).await;
    // The upstream closes the kept connection as the next EHLO reaches
    // it: a new connection takes the command, and the client sees an
    // ordinary session.
    let (greeting, replies) = one_session(proxy, "vanish", "b@y", false).await;
    assert_eq!(greeting, "220 upstream ESMTP\r\n");
    assert!(replies.starts_with("250-upstream\r\n"), "{replies}");
    assert!(replies.contains("250 2.0.0 queued\r\n"), "{replies}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(connection_text(&seen, 0).ends_with("EHLO vanish\r\n"));
    assert!(connection_text(&seen, 1).starts_with("EHLO vanish\r\nMAIL FROM:<a@x>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_upstream_reuse_off_each_session_has_its_connection() {
    let (upstream, seen) = smtp_upstream().await;
    let proxy = start_proxy_with(
        "smtp",
        upstream,
        net::Shutdown::default(),
        "upstream_reuse = false\n",
    )
    .await;
    for name in ["one", "two"] {
        let (_, replies) = one_session(proxy, name, "b@y", false).await;
        assert!(replies.ends_with("221 bye\r\n"), "{replies}");
    }
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(connection_text(&seen, 1).ends_with("QUIT\r\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_refused_upstream_after_the_go_ahead_answers_the_end_of_the_text() {
    let (upstream, seen) = smtp_upstream().await;
    let proxy = start_proxy("smtp", upstream).await;
    let mut client = BufReader::new(TcpStream::connect(proxy).await.unwrap());
    let mut greeting = String::new();
    client.read_line(&mut greeting).await.unwrap();
    exchange(&mut client, b"EHLO client\r\n", 3).await;
    // The proxy says 354 before the upstream answers DATA. The upstream
    // refuses: the text goes nowhere, and its end gets the refusal.
    let r = exchange(
        &mut client,
        b"MAIL FROM:<nodata@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n",
        3,
    )
    .await;
    assert!(
        r.ends_with("354 End data with <CR><LF>.<CR><LF>\r\n"),
        "{r}"
    );
    let r = exchange(&mut client, b"Subject: no\r\n\r\n..text\r\n.\r\n", 1).await;
    assert_eq!(r, "554 5.7.1 no data today\r\n");
    // With no recipient left, DATA waits for the upstream's answer, which
    // the client gets as it is (and no text follows).
    let r = exchange(&mut client, b"DATA\r\n", 1).await;
    assert_eq!(r, "554 5.7.1 no data today\r\n");
    let r = exchange(
        &mut client,
        b"MAIL FROM:<a@x>\r\nRCPT TO:<b@y>\r\nDATA\r\n",
        3,
    )
    .await;
    assert!(r.starts_with("250 ok\r\n250 ok\r\n354 End"), "{r}");
    let r = exchange(&mut client, b"Subject: yes\r\n\r\ntext\r\n.\r\nQUIT\r\n", 2).await;
    // The upstream refused something on this connection: it is not kept,
    // and QUIT is the upstream's to answer.
    assert_eq!(r, "250 2.0.0 queued\r\n221 bye\r\n");
    let text = connection_text(&seen, 0);
    assert!(!text.contains("Subject: no"), "{text}");
    assert!(
        text.contains("DATA\r\nSubject: yes\r\n\r\ntext\r\n.\r\n"),
        "{text}"
    );
}
