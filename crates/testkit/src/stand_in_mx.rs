//! A remote SMTP server for outbound tests whose behaviour the test picks
//! by the port a node reaches it on: on `stalling` it reads a whole
//! message and never gives the final reply to DATA, so the sender holds
//! the message (and its queue lease) until it gives up or dies; on
//! `answering` it takes mail. It counts, per Message-ID, the messages
//! held on the first and the transactions it acknowledged on the second,
//! which `smtp-sink` cannot tell apart.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the stand-in saw, by listener.
#[derive(Default)]
struct Seen {
    /// Connections accepted on the stalling port.
    stalling_connections: usize,
    /// Connections accepted on the answering port.
    answering_connections: usize,
    /// Message-IDs whose data arrived on the stalling port, unanswered.
    held: Vec<String>,
    /// Held connections the client has closed since (or that died).
    hung_up: usize,
    /// Message-ID to the number of DATA transactions answered with 250.
    delivered: HashMap<String, usize>,
}

/// The running stand-in; its threads stop when it is dropped.
pub struct StandInMx {
    /// Reads each message and never answers the end of data.
    pub stalling: SocketAddr,
    /// Answers every command with success.
    pub answering: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
}

impl StandInMx {
    /// Listens on two free ports of 127.0.0.1.
    pub fn start() -> StandInMx {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let listen = |stalls: bool| {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in MX");
            let addr = listener.local_addr().expect("its address");
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || accept(listener, stalls, seen, stop));
            addr
        };
        StandInMx {
            stalling: listen(true),
            answering: listen(false),
            seen,
            stop,
        }
    }

    /// Connections accepted so far on the stalling and the answering port.
    pub fn connections(&self) -> (usize, usize) {
        let seen = self.seen.lock().unwrap();
        (seen.stalling_connections, seen.answering_connections)
    }

    /// Message-IDs of the messages held unanswered on the stalling port.
    pub fn held(&self) -> Vec<String> {
        self.seen.lock().unwrap().held.clone()
    }

    /// How many held connections the client has since closed.
    pub fn hung_up(&self) -> usize {
        self.seen.lock().unwrap().hung_up
    }

    /// Per Message-ID, the transactions acknowledged on the answering port.
    pub fn delivered(&self) -> HashMap<String, usize> {
        self.seen.lock().unwrap().delivered.clone()
    }
}

impl Drop for StandInMx {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting threads so they see the flag.
        let _ = TcpStream::connect(self.stalling);
        let _ = TcpStream::connect(self.answering);
    }
}

fn accept(listener: TcpListener, stalls: bool, seen: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        {
            let mut seen = seen.lock().unwrap();
            if stalls {
                seen.stalling_connections += 1;
            } else {
                seen.answering_connections += 1;
            }
        }
        let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
        std::thread::spawn(move || {
            let _ = serve(stream, stalls, &seen, &stop);
        });
    }
}

/// One SMTP session (RFC 5321 §4.1, no extensions offered).
fn serve(
    stream: TcpStream,
    stalls: bool,
    seen: &Mutex<Seen>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    // A read timeout only so that a dropped stand-in ends its sessions.
    stream.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut out = stream.try_clone()?;
    let mut input = BufReader::new(stream);
    out.write_all(b"220 stand-in.test ESMTP\r\n")?;
    loop {
        let Some(line) = read_line(&mut input, stop)? else {
            return Ok(());
        };
        let verb = line.split_whitespace().next().unwrap_or("");
        let reply: &[u8] = match verb.to_ascii_uppercase().as_str() {
            "EHLO" | "HELO" => b"250 stand-in.test\r\n",
            "MAIL" | "RCPT" | "RSET" | "NOOP" => b"250 2.0.0 ok\r\n",
            "QUIT" => {
                out.write_all(b"221 2.0.0 bye\r\n")?;
                return Ok(());
            }
            "DATA" => {
                out.write_all(b"354 go on\r\n")?;
                let message_id = read_data(&mut input, stop)?;
                if stalls {
                    seen.lock().unwrap().held.push(message_id);
                    // RFC 5321 §4.5.3.2.6: the client waits for the final
                    // reply; it never comes. Wait for the client to go.
                    while let Ok(Some(_)) = read_line(&mut input, stop) {}
                    seen.lock().unwrap().hung_up += 1;
                    return Ok(());
                }
                out.write_all(b"250 2.0.0 taken\r\n")?;
                *seen
                    .lock()
                    .unwrap()
                    .delivered
                    .entry(message_id)
                    .or_default() += 1;
                continue;
            }
            _ => b"502 5.5.1 not here\r\n",
        };
        out.write_all(reply)?;
    }
}

/// The next line, or `None` at the end of the stream or once stopped.
fn read_line(
    input: &mut BufReader<TcpStream>,
    stop: &AtomicBool,
) -> std::io::Result<Option<String>> {
    let mut line = Vec::new();
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(None),
            Ok(_) if line.ends_with(b"\n") => {
                return Ok(Some(String::from_utf8_lossy(&line).trim_end().to_string()));
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads a message up to the lone dot; its Message-ID field's value
/// (empty when it has none).
fn read_data(input: &mut BufReader<TcpStream>, stop: &AtomicBool) -> std::io::Result<String> {
    let mut message_id = String::new();
    let mut in_header = true;
    loop {
        let Some(line) = read_line(input, stop)? else {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        };
        if line == "." {
            return Ok(message_id);
        }
        if line.is_empty() {
            in_header = false;
        }
        if in_header {
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("message-id") {
                    message_id = value.trim().to_string();
                }
            }
        }
    }
}
