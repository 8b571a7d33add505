//! IDLE (RFC 2177): the client waits; changes to the selected mailbox are
//! pushed as they are committed (the store's per-mailbox watch), and the
//! command ends with `DONE`.

use std::time::Duration;

use crate::auth::trim_crlf;
use crate::framing::{self, ReadError};
use crate::reply::Reply;
use crate::session::Session;

impl Session<'_> {
    pub(crate) async fn idle(&mut self) -> store::Result<Reply> {
        self.out.raw(b"+ idling\r\n");
        if !self.sync(true).await? {
            return Ok(Reply::bad("Mailbox deleted").close());
        }
        // RFC 2177: clients re-issue IDLE within 29 minutes; the timeout
        // ends the session like any autologout.
        let timeout = Duration::from_secs(self.ctx.config.idle_timeout_secs);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if !self.flush().await {
                return Ok(Reply::bad("Connection lost").close());
            }
            // Only whole lines are taken from the input, and waiting for
            // more input is cancel-safe, so a change that wins the race
            // loses no byte of the client's DONE.
            if let Some(end) = self.input.buffered().iter().position(|&b| b == b'\n') {
                let ok = trim_crlf(&self.input.buffered()[..=end]).eq_ignore_ascii_case(b"DONE");
                self.input.consume(end + 1);
                return Ok(if ok {
                    Reply::ok("IDLE terminated")
                } else {
                    Reply::bad("Expected DONE")
                });
            }
            if self.input.buffered().len() >= self.input.capacity() {
                return Ok(Reply::bad("Expected DONE").close());
            }
            tokio::select! {
                r = framing::fill(&mut self.input, &mut self.stream, timeout) => match r {
                    Ok(()) => {}
                    Err(ReadError::Timeout) => {
                        self.out.bye(None, "Autologout; idle for too long");
                        return Ok(Reply::bad("IDLE timed out").close());
                    }
                    Err(ReadError::Closed) => return Ok(Reply::bad("Connection lost").close()),
                },
                _ = wait_change(self.selected.as_mut()) => {
                    if !self.sync(true).await? {
                        return Ok(Reply::bad("Mailbox deleted").close());
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    self.out.bye(None, "Autologout; idle for too long");
                    return Ok(Reply::bad("IDLE timed out").close());
                }
                _ = self.ctx.shutdown.token.cancelled() => {
                    self.out.bye(None, "Server shutting down");
                    return Ok(Reply::bad("Server shutting down").close());
                }
            }
        }
    }
}

async fn wait_change(selected: Option<&mut crate::selected::Selected>) {
    match selected {
        Some(sel) => sel.changed().await,
        None => std::future::pending().await,
    }
}
