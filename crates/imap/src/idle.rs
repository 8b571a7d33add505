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
        let condstore = self.condstore;
        if let Some(sel) = self.selected.as_mut() {
            sel.sync(self.ctx.store.as_ref(), &mut self.out, true, condstore)
                .await?;
        }
        // RFC 2177: clients re-issue IDLE within 29 minutes; the timeout
        // ends the session like any autologout.
        let timeout = Duration::from_secs(self.ctx.config.idle_timeout_secs);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if !self.flush().await {
                return Ok(Reply::bad("Connection lost").close());
            }
            let max = self.ctx.config.max_command_bytes;
            let line = tokio::select! {
                line = framing::read_rest(&mut self.input, &mut self.stream, max, timeout) => line,
                _ = wait_change(self.selected.as_mut()) => {
                    let condstore = self.condstore;
                    if let Some(sel) = self.selected.as_mut() {
                        sel.sync(self.ctx.store.as_ref(), &mut self.out, true, condstore).await?;
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(deadline) => Err(ReadError::Timeout),
                _ = self.ctx.shutdown.token.cancelled() => {
                    self.out.bye(None, "Server shutting down");
                    return Ok(Reply::bad("Server shutting down").close());
                }
            };
            return Ok(match line {
                Ok(l) if trim_crlf(&l).eq_ignore_ascii_case(b"DONE") => {
                    Reply::ok("IDLE terminated")
                }
                Ok(_) => Reply::bad("Expected DONE"),
                Err(ReadError::Timeout) => {
                    self.out.bye(None, "Autologout; idle for too long");
                    Reply::bad("IDLE timed out").close()
                }
                Err(ReadError::Closed) => Reply::bad("Connection lost").close(),
            });
        }
    }
}

async fn wait_change(selected: Option<&mut crate::selected::Selected>) {
    match selected {
        Some(sel) => sel.changed().await,
        None => std::future::pending().await,
    }
}
