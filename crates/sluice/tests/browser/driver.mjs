// What every Chromium driver of the webmail and admin tests shares: checks,
// waiting on a condition, a minimal SMTP client to put mail in, Chromium
// launched without network beyond loopback, and the login form.

import { chromium } from "playwright-core";
import net from "node:net";

const { BASE, USER, PASSWORD, SMTP } = process.env;

export function check(ok, what) {
  if (!ok) throw new Error("check failed: " + what);
}

// Waits on a condition with a deadline (a bound on a failure, not a
// measure of speed).
export async function until(what, f, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("timed out waiting for " + what);
}

// A minimal SMTP client: one message to `to`, waiting for each reply.
// Line ends of `data` become CRLF; no line of it may start with a dot.
export function smtpSend(to, data) {
  const [host, port] = SMTP.split(":");
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    const steps = [null, "EHLO browser.test", "MAIL FROM:<x@remote.test>", `RCPT TO:<${to}>`, "DATA", data.replace(/\r?\n/g, "\r\n") + "\r\n.", "QUIT"];
    let buf = "";
    s.setEncoding("utf8");
    s.on("data", (d) => {
      buf += d;
      const lines = buf.split("\r\n");
      buf = lines.pop();
      for (const l of lines) {
        if (l[3] === "-") continue;
        if (!/^[23]/.test(l)) { s.destroy(); reject(new Error("SMTP: " + l)); return; }
        steps.shift();
        if (steps.length) s.write(steps[0] + "\r\n"); else { s.end(); resolve(); }
      }
    });
    s.on("error", reject);
  });
}

// Debian's Chromium, headless, with every host name but loopback unresolvable
// so that no page can reach the internet.
export function launch() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
      "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
    ],
  });
}

// Logs in through the form as USER and waits for the inbox; its URL.
export async function login(page) {
  await page.goto(BASE + "/login");
  await page.fill("input[name=address]", USER);
  await page.fill("input[name=password]", PASSWORD);
  await Promise.all([page.waitForURL(/\/mail\/\d+$/), page.click("form.login button")]);
  return page.url();
}
