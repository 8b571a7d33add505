//! A blocking client for clamd's INSTREAM command, for sites that want ClamAV's full
//! engine behind the same pipeline (`scan.engine = "clamd"`). This is the crate's only
//! I/O; it uses std networking so it needs no runtime (call it from
//! `spawn_blocking` in async code).
//!
//! Protocol (clamd(8)): send `zINSTREAM\0`, then chunks each prefixed by their length
//! as a 4-byte big-endian integer, then a zero length; clamd answers
//! `stream: OK\0`, `stream: NAME FOUND\0` or `... ERROR\0`.

use std::io::{Read, Write};
use std::net::TcpStream;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::mime::{MimeLimits, MimeParser, MimeSink, PartInfo, PartKind};
use crate::verdict::Verdict;

/// Largest chunk sent in one INSTREAM frame.
const FRAME: usize = 64 * 1024;

/// Longest reply read from clamd.
const MAX_REPLY: usize = 4096;

/// Where clamd listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClamdAddr {
    /// A TCP address such as `127.0.0.1:3310`.
    Tcp(String),
    /// A Unix socket path such as `/run/clamav/clamd.ctl`.
    Unix(PathBuf),
}

/// An error talking to clamd.
#[derive(Debug, thiserror::Error)]
pub enum ClamdError {
    /// Connecting, writing or reading failed (including timeouts).
    #[error("clamd i/o: {0}")]
    Io(#[from] std::io::Error),
    /// clamd answered with an error (for example `INSTREAM size limit exceeded`).
    #[error("clamd error: {0}")]
    Clamd(String),
    /// clamd answered something this client does not understand.
    #[error("unexpected clamd reply: {0:?}")]
    Reply(String),
}

/// Connection settings for clamd.
#[derive(Debug, Clone)]
pub struct ClamdClient {
    addr: ClamdAddr,
    timeout: Duration,
}

trait Conn: Read + Write + Send {}
impl<T: Read + Write + Send> Conn for T {}

/// One INSTREAM scan in progress: feed it the file, then finish.
pub struct ClamdStream {
    conn: Box<dyn Conn>,
}

impl std::fmt::Debug for ClamdStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClamdStream").finish_non_exhaustive()
    }
}

impl ClamdClient {
    /// A client for clamd at `addr`; every read and write times out after `timeout`.
    pub fn new(addr: ClamdAddr, timeout: Duration) -> Self {
        Self { addr, timeout }
    }

    /// Opens a connection and starts an INSTREAM scan.
    pub fn instream(&self) -> Result<ClamdStream, ClamdError> {
        let mut conn: Box<dyn Conn> = match &self.addr {
            ClamdAddr::Tcp(a) => {
                let s = TcpStream::connect(a)?;
                s.set_read_timeout(Some(self.timeout))?;
                s.set_write_timeout(Some(self.timeout))?;
                s.set_nodelay(true)?;
                Box::new(s)
            }
            #[cfg(unix)]
            ClamdAddr::Unix(p) => {
                let s = UnixStream::connect(p)?;
                s.set_read_timeout(Some(self.timeout))?;
                s.set_write_timeout(Some(self.timeout))?;
                Box::new(s)
            }
            #[cfg(not(unix))]
            ClamdAddr::Unix(_) => {
                return Err(ClamdError::Io(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "unix sockets",
                )))
            }
        };
        conn.write_all(b"zINSTREAM\0")?;
        Ok(ClamdStream { conn })
    }

    /// Scans bytes held in memory.
    pub fn scan(&self, data: &[u8]) -> Result<Verdict, ClamdError> {
        let mut s = self.instream()?;
        s.feed(data)?;
        s.finish()
    }
}

impl ClamdStream {
    /// Sends the next bytes of the file.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), ClamdError> {
        for chunk in data.chunks(FRAME) {
            self.conn.write_all(&(chunk.len() as u32).to_be_bytes())?;
            self.conn.write_all(chunk)?;
        }
        Ok(())
    }

    /// Ends the file and reads clamd's verdict.
    pub fn finish(mut self) -> Result<Verdict, ClamdError> {
        self.conn.write_all(&[0, 0, 0, 0])?;
        self.conn.flush()?;
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while reply.len() < MAX_REPLY {
            match self.conn.read(&mut byte)? {
                0 => break,
                _ if byte[0] == 0 || byte[0] == b'\n' => break,
                _ => reply.push(byte[0]),
            }
        }
        parse_reply(&String::from_utf8_lossy(&reply))
    }
}

impl ClamdClient {
    /// Starts scanning a mail message: the message is MIME-parsed as it is
    /// fed, and the decoded body of every leaf part (each attachment, each
    /// text) is streamed to clamd in an INSTREAM of its own.
    pub fn mail_session(&self) -> ClamdMailSession {
        ClamdMailSession {
            parser: MimeParser::new(MimeLimits::default()),
            sink: PartStreamer {
                client: self.clone(),
                open: Vec::new(),
                verdict: Verdict::Clean,
                error: None,
            },
        }
    }
}

/// A mail message being scanned by clamd, one decoded part at a time.
pub struct ClamdMailSession {
    parser: MimeParser,
    sink: PartStreamer,
}

impl std::fmt::Debug for ClamdMailSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClamdMailSession").finish_non_exhaustive()
    }
}

/// Streams each leaf part to clamd; remembers the first finding or error.
struct PartStreamer {
    client: ClamdClient,
    /// One entry per open part, innermost last: the INSTREAM of a leaf
    /// (a uuencoded file nests inside its text part), `None` for containers.
    open: Vec<Option<ClamdStream>>,
    verdict: Verdict,
    error: Option<ClamdError>,
}

impl PartStreamer {
    fn done(&self) -> bool {
        !self.verdict.is_clean() || self.error.is_some()
    }

    fn close(&mut self, stream: Option<ClamdStream>) {
        if let Some(stream) = stream {
            match stream.finish() {
                Ok(v) if !v.is_clean() && self.verdict.is_clean() => self.verdict = v,
                Ok(_) => {}
                Err(e) => self.error = Some(e),
            }
        }
    }
}

impl MimeSink for PartStreamer {
    fn part_start(&mut self, part: &PartInfo) {
        let leaf = matches!(part.kind, PartKind::Leaf | PartKind::Uuencoded);
        let stream = if leaf && !self.done() {
            match self.client.instream() {
                Ok(stream) => Some(stream),
                Err(e) => {
                    self.error = Some(e);
                    None
                }
            }
        } else {
            None
        };
        self.open.push(stream);
    }

    fn body(&mut self, data: &[u8]) {
        if let Some(Some(stream)) = self.open.last_mut() {
            if let Err(e) = stream.feed(data) {
                self.open.pop();
                self.open.push(None);
                self.error = Some(e);
            }
        }
    }

    fn part_end(&mut self) {
        if let Some(stream) = self.open.pop() {
            self.close(stream);
        }
    }
}

impl ClamdMailSession {
    /// Feeds the next bytes of the message (blocking: clamd is written to).
    pub fn feed(&mut self, data: &[u8]) {
        if !self.sink.done() {
            self.parser.feed(data, &mut self.sink);
        }
    }

    /// Whether clamd already found something (the rest need not be sent).
    pub fn infected(&self) -> bool {
        !self.sink.verdict.is_clean()
    }

    /// The name of what clamd found already, if anything.
    pub fn found(&self) -> Option<&str> {
        match &self.sink.verdict {
            Verdict::Infected { name } => Some(name),
            _ => None,
        }
    }

    /// Ends the message: the first finding, or an error if clamd could not
    /// be asked about every part.
    pub fn finish(mut self) -> Result<Verdict, ClamdError> {
        self.parser.finish(&mut self.sink);
        while let Some(stream) = self.sink.open.pop() {
            self.sink.close(stream);
        }
        match (self.sink.verdict, self.sink.error) {
            (v, _) if !v.is_clean() => Ok(v),
            (_, Some(e)) => Err(e),
            (v, None) => Ok(v),
        }
    }
}

/// Interprets one clamd reply line.
fn parse_reply(reply: &str) -> Result<Verdict, ClamdError> {
    let body = reply.split_once(": ").map_or(reply, |(_, b)| b).trim();
    if body == "OK" {
        Ok(Verdict::Clean)
    } else if let Some(name) = body.strip_suffix(" FOUND") {
        Ok(Verdict::Infected {
            name: name.to_string(),
        })
    } else if let Some(e) = body.strip_suffix(" ERROR") {
        Err(ClamdError::Clamd(e.to_string()))
    } else {
        Err(ClamdError::Reply(reply.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn replies() {
        assert_eq!(parse_reply("stream: OK").unwrap(), Verdict::Clean);
        assert_eq!(
            parse_reply("stream: Eicar-Test-Signature FOUND").unwrap(),
            Verdict::Infected {
                name: "Eicar-Test-Signature".into()
            }
        );
        assert!(matches!(
            parse_reply("INSTREAM size limit exceeded. ERROR"),
            Err(ClamdError::Clamd(_))
        ));
        assert!(parse_reply("huh").is_err());
    }

    /// A fake clamd on 127.0.0.1 checks the framing and answers from the content.
    #[test]
    fn instream_framing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut cmd = [0u8; 10];
            s.read_exact(&mut cmd).unwrap();
            assert_eq!(&cmd, b"zINSTREAM\0");
            let mut data = Vec::new();
            loop {
                let mut len = [0u8; 4];
                s.read_exact(&mut len).unwrap();
                let len = u32::from_be_bytes(len) as usize;
                if len == 0 {
                    break;
                }
                let mut chunk = vec![0; len];
                s.read_exact(&mut chunk).unwrap();
                data.extend_from_slice(&chunk);
            }
            let found = data.windows(5).any(|w| w == b"EICAR");
            let reply: &[u8] = if found {
                b"stream: Fake-Eicar FOUND\0"
            } else {
                b"stream: OK\0"
            };
            s.write_all(reply).unwrap();
            data.len()
        });
        let client = ClamdClient::new(ClamdAddr::Tcp(addr), Duration::from_secs(10));
        let mut stream = client.instream().unwrap();
        stream.feed(&vec![b'x'; 100_000]).unwrap();
        stream.feed(b"..EICAR..").unwrap();
        assert_eq!(
            stream.finish().unwrap(),
            Verdict::Infected {
                name: "Fake-Eicar".into()
            }
        );
        assert_eq!(server.join().unwrap(), 100_009);
    }
}
