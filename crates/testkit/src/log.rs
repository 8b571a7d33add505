//! What a server under test writes to stderr: kept whole for assertions
//! and failure messages, with the lines that say it is ready passed on.

use std::io::{BufRead, BufReader};
use std::process::ChildStderr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// The stderr text of a child process, shared with the thread that reads
/// it; one `ChildLog` can follow the same server across restarts.
#[derive(Clone, Default)]
pub struct ChildLog {
    text: Arc<Mutex<String>>,
}

impl ChildLog {
    /// Reads `stderr` on its own thread until it closes, appending each
    /// line; the lines `watch` picks also go to the returned channel, so
    /// the caller can wait for start-up with a deadline
    /// (`recv_timeout`) instead of sleeping.
    pub fn follow(
        &self,
        stderr: ChildStderr,
        watch: impl Fn(&str) -> bool + Send + 'static,
    ) -> mpsc::Receiver<String> {
        let text = Arc::clone(&self.text);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if watch(&line) {
                    let _ = tx.send(line.clone());
                }
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        rx
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }
}
