// Drives Debian's Chromium (playwright-core, never a downloaded browser)
// against a running `sluice serve`. Started by ../webmail.rs:
//   node webmail.mjs xss|ui
// with BASE (http://host:port), USER, PASSWORD, SMTP (host:port) in the
// environment. Exits non-zero with a message on the first failed check.
import { check, launch, login, smtpSend, until } from "./driver.mjs";
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const { BASE, USER, PASSWORD, SMTP } = process.env;
const mode = process.argv[2];

const browser = await launch();
const context = await browser.newContext();
const page = await context.newPage();
page.setDefaultTimeout(15000);

// Script execution anywhere in the page or its frames shows up as console
// output (every vector logs XSS-EXEC), a dialog, or the title.
const executions = [];
const violations = [];
page.on("console", (m) => { if (m.text().includes("XSS-EXEC")) executions.push(m.text()); if (m.text().includes("Content Security Policy")) violations.push(m.text()); });
page.on("dialog", (d) => { executions.push("dialog " + d.message()); d.dismiss().catch(() => {}); });

async function messageLinks() {
  const links = [];
  let url = page.url();
  for (;;) {
    await page.goto(url);
    check((await page.title()) !== "XSS-EXEC", "list title untouched");
    links.push(...(await page.$$eval("td.subject a", (as) => as.map((a) => a.href))));
    const next = await page.$("a[rel=next]");
    if (!next) break;
    url = await next.evaluate((a) => a.href);
  }
  return links;
}

try {
  if (mode === "xss") {
    // The detector works: a script that runs is seen, in the page and in a frame.
    await page.setContent("<script>console.log(/XSS-EXEC/.source)</script><iframe srcdoc=\"<script>console.log(/XSS-EXEC/.source)</script>\"></iframe>");
    await until("the control scripts to be seen", () => executions.length === 2);
    executions.length = 0;

    await login(page);
    const links = await messageLinks();
    check(links.length >= 100, "at least 100 corpus messages listed, got " + links.length);
    let frames = 0;
    for (const link of links) {
      await page.goto(link, { waitUntil: "load" });
      check((await page.title()) !== "XSS-EXEC", "title untouched at " + link);
      const frame = await page.$("iframe.body");
      if (frame) {
        frames++;
        const src = await frame.getAttribute("src");
        // The frame's document opened on its own, at the top level: its
        // CSP (sandbox, no script) still holds.
        await page.goto(new URL(src, BASE).href, { waitUntil: "load" });
        check((await page.title()) !== "XSS-EXEC", "frame title untouched at " + src);
      }
      // Hover and focus what is there, for handlers that need an event.
      await page.goto(link, { waitUntil: "load" });
      await page.mouse.move(300, 400);
      await page.keyboard.press("Tab");
    }
    check(frames >= 100, "HTML bodies shown in frames: " + frames);
    // Anything late (timers, lazy loads) has had time to show up by now.
    await page.waitForLoadState("networkidle");
    check(executions.length === 0, "no script ran, but saw: " + executions.slice(0, 5).join(" | "));
    console.log(JSON.stringify({ messages: links.length, frames, executions: executions.length }));
  } else if (mode === "ui") {
    // A loopback web server that counts requests for remote images.
    const hits = [];
    const remote = http.createServer((req, res) => { hits.push(req.url); res.writeHead(200, { "Content-Type": "image/gif" }); res.end("GIF89a"); });
    await new Promise((r) => remote.listen(0, "127.0.0.1", r));
    const pixel = `http://127.0.0.1:${remote.address().port}/pixel.gif`;
    await smtpSend(USER, `From: Tracker <news@remote.test>\nTo: ${USER}\nSubject: remote image test\nMIME-Version: 1.0\nContent-Type: text/html\n\n<p>Look</p><img src="${pixel}">`);
    await smtpSend(USER, `From: Bob <bob@remote.test>\nTo: ${USER}\nSubject: zebra crossing\n\nplain words`);

    await login(page);
    const inbox = page.url();
    check((await page.$$("table.list tbody tr")).length === 2, "two messages listed");
    // Keyboard: j moves the cursor, o opens, u goes back, / searches, g i goes to the inbox.
    await page.keyboard.press("j");
    check(await page.$("table.list tr.cursor") !== null, "j puts a cursor on a row");
    await page.keyboard.press("j");
    const second = await page.$eval("table.list tr.cursor td.subject a", (a) => a.textContent);
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.keyboard.press("o")]);
    check((await page.textContent("article.msghead h1")).includes(second), "o opened the row under the cursor");
    await Promise.all([page.waitForURL(inbox), page.keyboard.press("u")]);

    // Remote content: nothing is fetched until the user asks.
    const remoteLink = await page.$eval("td.subject a >> text=remote image test", (a) => a.href);
    await page.goto(remoteLink, { waitUntil: "load" });
    await page.waitForLoadState("networkidle");
    check(hits.length === 0, "no request reached the remote server before asking: " + hits);
    check((await page.textContent(".notice")).includes("1 remote image(s) blocked"), "the page says an image was blocked");
    await Promise.all([page.waitForURL(/remote=1/), page.click("text=Show them")]);
    await until("the remote image to be fetched once allowed", () => hits.length >= 1);

    await page.goto(inbox);
    await page.keyboard.press("/");
    check(await page.evaluate(() => document.activeElement && document.activeElement.type === "search"), "/ focuses the search box");
    await page.keyboard.type("zebra");
    await Promise.all([page.waitForURL(/q=zebra/), page.keyboard.press("Enter")]);
    const found = await page.$$eval("td.subject a", (as) => as.map((a) => a.textContent));
    check(found.length === 1 && found[0] === "zebra crossing", "search finds one: " + found);
    await page.keyboard.press("Escape");
    await page.keyboard.press("g");
    await Promise.all([page.waitForURL(inbox), page.keyboard.press("i")]);

    // Live: a new delivery shows up without a reload.
    await page.evaluate(() => { window.__notReloaded = 42; });
    await smtpSend(USER, `From: Carol <carol@remote.test>\nTo: ${USER}\nSubject: live arrival\n\nhello`);
    await until("the new message to appear", async () => (await page.textContent("table.list")).includes("live arrival"));
    check(await page.evaluate(() => window.__notReloaded === 42), "the page was not reloaded");
    const unseen = await page.textContent("nav.folders a[data-use=inbox] .unseen");
    check(unseen.trim() === "2", "unread count updated live: " + unseen);

    // # deletes the message under the cursor (to Trash).
    const before = (await page.$$("table.list tbody tr")).length;
    await page.keyboard.press("j");
    await Promise.all([page.waitForNavigation(), page.keyboard.press("#")]);
    const after = (await page.$$("table.list tbody tr")).length;
    check(after === before - 1, `# moved one message to Trash (${before} -> ${after})`);
    await Promise.all([page.waitForNavigation(), page.click("nav.folders a[data-use=trash]")]);
    check((await page.$$("table.list tbody tr")).length === 1, "the message is in Trash");

    // Reply with an attachment to a local correspondent (r opens the reply).
    await page.goto(inbox);
    await smtpSend(USER, `From: Friend <${process.env.FRIEND}>\nTo: ${USER}\nSubject: from a friend\nMessage-ID: <friend-1@example.org>\n\nCan you send the notes?`);
    await until("the friend's mail to appear", async () => (await page.textContent("table.list")).includes("from a friend"));
    // Wait for the message page before pressing r: a key pressed while the
    // list is still shown would go to the list.
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("td.subject a >> text=from a friend")]);
    await Promise.all([page.waitForURL(/\/compose\?mode=reply/), page.keyboard.press("r")]);
    check((await page.inputValue("input[name=subject]")) === "Re: from a friend", "reply subject");
    check((await page.inputValue("input[name=to]")).includes(process.env.FRIEND), "reply goes to the sender");
    await page.fill("textarea[name=body]", "Here they are.\n" + (await page.inputValue("textarea[name=body]")));
    await page.setInputFiles("input[type=file]", { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("the notes\n".repeat(5000)) });
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
    check((await page.textContent("article.msghead h1")).includes("Re: from a friend"), "the sent message is shown");
    check((await page.textContent("ul.attachments")).includes("notes.txt"), "with its attachment");

    // Log out: the session is gone.
    await Promise.all([page.waitForURL(/\/login$/), page.click("text=Log out")]);
    await page.goto(inbox);
    check(page.url().endsWith("/login"), "logged out");
    check(executions.length === 0, "no script from mail ran: " + executions);
    remote.close();
    console.log(JSON.stringify({ remoteHits: hits.length }));
  } else {
    throw new Error("usage: node webmail.mjs xss|ui");
  }
} catch (e) {
  console.error(e.stack || String(e));
  await browser.close();
  process.exit(1);
}
await browser.close();
