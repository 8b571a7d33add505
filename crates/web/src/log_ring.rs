//! Recent log lines, kept in memory for the admin page: a bounded ring
//! the server's log is also written into, read back filtered by a
//! connection's or transaction's id (a client address and port, a queue
//! id, an account) to see what happened to one message without a shell.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Longest line kept, in bytes: a longer one is cut (the full line is in
/// the process's log).
const MAX_LINE: usize = 2048;

/// The last lines of the log, oldest first, at most `capacity` of them.
pub struct LogRing {
    capacity: usize,
    lines: Mutex<VecDeque<String>>,
}

impl LogRing {
    /// An empty ring keeping at most `capacity` lines.
    pub fn new(capacity: usize) -> Arc<LogRing> {
        Arc::new(LogRing {
            capacity,
            lines: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
        })
    }

    fn push(&self, line: &str) {
        if self.capacity == 0 {
            return;
        }
        let mut cut = line.len().min(MAX_LINE);
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == self.capacity {
            lines.pop_front();
        }
        lines.push_back(line[..cut].to_string());
    }

    /// The newest `max` lines containing `filter` (all lines when it is
    /// empty), oldest first.
    pub fn matching(&self, filter: &str, max: usize) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<String> = lines
            .iter()
            .rev()
            .filter(|l| l.contains(filter))
            .take(max)
            .cloned()
            .collect();
        out.reverse();
        out
    }

    /// A writer for one log event (what `tracing_subscriber`'s `fmt`
    /// layer asks for per event): its text goes into the ring line by
    /// line.
    pub fn writer(self: &Arc<LogRing>) -> LineWriter {
        LineWriter {
            ring: Arc::clone(self),
            partial: Vec::new(),
        }
    }
}

/// See [`LogRing::writer`]; a line not ended by a newline is kept when
/// the writer is dropped.
pub struct LineWriter {
    ring: Arc<LogRing>,
    partial: Vec<u8>,
}

impl std::io::Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'\n') {
            if self.partial.len() < MAX_LINE {
                self.partial.extend_from_slice(piece);
            }
            if piece.ends_with(b"\n") {
                self.flush_line();
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LineWriter {
    fn flush_line(&mut self) {
        let text = String::from_utf8_lossy(&self.partial);
        let line = text.trim_end_matches(['\r', '\n']);
        if !line.is_empty() {
            self.ring.push(line);
        }
        self.partial.clear();
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        self.flush_line();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn keeps_the_newest_lines_and_filters() {
        let ring = LogRing::new(3);
        for n in 0..5 {
            let mut w = ring.writer();
            writeln!(w, "line {n} client=10.0.0.{}", n % 2).unwrap();
        }
        assert_eq!(
            ring.matching("", 10),
            [
                "line 2 client=10.0.0.0",
                "line 3 client=10.0.0.1",
                "line 4 client=10.0.0.0"
            ]
        );
        assert_eq!(
            ring.matching("client=10.0.0.0", 1),
            ["line 4 client=10.0.0.0"]
        );
    }

    #[test]
    fn long_lines_are_cut_and_unfinished_ones_kept() {
        let ring = LogRing::new(2);
        {
            let mut w = ring.writer();
            w.write_all("é".repeat(MAX_LINE).as_bytes()).unwrap();
        }
        let got = ring.matching("", 1);
        assert!(got[0].len() <= MAX_LINE && got[0].starts_with('é'));
    }
}
