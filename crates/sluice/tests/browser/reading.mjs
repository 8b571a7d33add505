// Reading mail in Debian's Chromium (playwright-core, never a downloaded
// browser) against a running `sluice serve`. Started by
// ../webmail_reading.rs:
//   node reading.mjs files|styles|phone|axe
// with BASE (http://host:port), USER, PASSWORD, SMTP (host:port) and OUT
// (a directory for downloads and screenshots) in the environment. Prints
// one JSON line of findings; exits non-zero on the first failed check.
import { check, launch, login, smtpSend } from "./driver.mjs";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const { BASE, USER, PASSWORD, SMTP, OUT } = process.env;
const mode = process.argv[2];

const crlf = (s) => s.replace(/\r?\n/g, "\r\n");
const b64 = (buf) => buf.toString("base64").replace(/.{76}/g, "$&\r\n");
const sha = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

// A one-page PDF, small and valid enough for any reader.
const PDF = Buffer.from(crlf(`%PDF-1.4
1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj
2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj
3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj
trailer<</Root 1 0 R>>
%%EOF
`), "latin1");
// A 2x2 red PNG, for the inline picture.
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==", "base64");

const browser = await launch();

async function newPage(options = {}) {
  const context = await browser.newContext({ acceptDownloads: true, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  return page;
}

async function open(page, inbox, subject) {
  await page.goto(inbox);
  const href = await page.$eval(`td.subject a >> text=${subject}`, (a) => a.href);
  await page.goto(href, { waitUntil: "load" });
  return href;
}

// The frame of an opened message, once its document has loaded.
async function messageFrame(page) {
  const handle = await page.waitForSelector("iframe.body");
  let frame = await handle.contentFrame();
  await frame.waitForLoadState("load");
  return frame;
}

const NEWSLETTER = `<html><head><style>
  .banner { background-color: #0b57d0; color: #ffffff; font-family: Georgia, serif }
  @import url(http://127.0.0.1:9/evil.css);
  .overlay { position: fixed; top: 0; left: 0; width: 100%; height: 100%; background: #f00 }
</style></head><body>
<table id="box" bgcolor="#fff3c4" width="100%" cellpadding="8" align="center" style="border-collapse: collapse">
<tr><td class="banner" id="banner">Autumn offers</td></tr>
<tr><td id="cell" style="color: #5a3e00; font-size: 18px; background: expression(alert(1))">Dear reader, prices fell.</td></tr>
<tr><td><font color="#008000" face="Verdana" id="font">green words</font></td></tr>
</table>
<div class="overlay" id="overlay">pay here</div>
<div id="hook" style="behavior: url(x.htc); -moz-binding: url(x.xml#x); background-image: url(javascript:alert(1)); color: #123456">hooks</div>
</body></html>`;

try {
  if (mode === "files") {
    // Attachments and the source, read by Chromium (which always asks
    // for gzip), and an inline picture in the sandboxed frame.
    const csv = Buffer.from("Artikel;Preis\r\nÄpfel;2,50\r\nBirnen;3,10\r\n", "utf8");
    const big = crypto.randomBytes(20 * 1024 * 1024);
    const files = [
      { name: "offer.pdf", type: "application/pdf", header: 'attachment; filename="offer.pdf"', data: PDF },
      { name: "Preisliste März.csv", type: "text/csv", header: "attachment; filename*=UTF-8''Preisliste%20M%C3%A4rz.csv", data: csv },
      { name: "big.bin", type: "application/octet-stream", header: 'attachment; filename="big.bin"', data: big },
    ];
    let raw = `From: Shop <shop@remote.test>\r\nTo: ${USER}\r\nSubject: files attached\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=MIXED\r\n\r\n`;
    raw += "--MIXED\r\nContent-Type: text/plain\r\n\r\nThree files.\r\n";
    for (const f of files) {
      raw += `--MIXED\r\nContent-Type: ${f.type}\r\nContent-Disposition: ${f.header}\r\nContent-Transfer-Encoding: base64\r\n\r\n${b64(f.data)}\r\n`;
    }
    raw += "--MIXED--";
    await smtpSend(USER, raw);
    const pictured = crlf(`From: News <news@remote.test>\nTo: ${USER}\nSubject: inline picture\nMIME-Version: 1.0\nContent-Type: multipart/related; boundary=REL\n\n--REL\nContent-Type: text/html; charset=utf-8\n\n<p>Our logo:</p><img id="logo" src="cid:logo@shop.test" alt="logo">\n--REL\nContent-Type: image/png\nContent-ID: <logo@shop.test>\nContent-Transfer-Encoding: base64\n\n${b64(PNG)}\n--REL--`);
    await smtpSend(USER, pictured);

    const page = await newPage();
    const inbox = await login(page);
    await open(page, inbox, "files attached");
    const downloads = [];
    for (const f of files) {
      const link = page.locator("ul.attachments a", { hasText: f.name });
      const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
      const failure = await download.failure();
      check(failure === null, `download of ${f.name} failed: ${failure}`);
      const where = path.join(OUT, "download-" + downloads.length);
      await download.saveAs(where);
      const got = fs.readFileSync(where);
      check(got.length === f.data.length, `${f.name}: ${got.length} bytes, sent ${f.data.length}`);
      check(sha(got) === sha(f.data), `${f.name}: the bytes differ from what was sent`);
      check(download.suggestedFilename() === f.name, `file name ${download.suggestedFilename()} for ${f.name}`);
      downloads.push({ name: download.suggestedFilename(), bytes: got.length });
    }

    // The source: the raw message, byte for byte, as delivered (after a
    // trace header). This one is 27 MB: read through the browser's
    // request API with the page's session, gzip and all.
    const sourceHref = await page.$eval("a >> text=View source", (a) => a.href);
    const res = await page.request.get(sourceHref, { headers: { "Accept-Encoding": "gzip" } });
    check(res.status() === 200, "source status " + res.status());
    const source = await res.body();
    const tail = source.subarray(source.length - raw.length - 2, source.length - 2);
    check(sha(tail) === sha(Buffer.from(raw, "latin1")), "the source is byte for byte what was sent");

    // The inline picture is painted inside the sandboxed frame.
    const pictureHref = await open(page, inbox, "inline picture");
    // View source, in the browser: the message as sent.
    const shown = await page.goto(pictureHref + "/source");
    check(shown.status() === 200, "source status " + shown.status());
    const text = await page.textContent("body");
    check(text.replace(/\r\n/g, "\n").includes(pictured.replace(/\r\n/g, "\n")), "View source shows the raw message");
    await page.goto(pictureHref);
    const frame = await messageFrame(page);
    await frame.waitForFunction(() => { const i = document.getElementById("logo"); return i && i.complete; });
    const width = await frame.$eval("#logo", (i) => i.naturalWidth);
    check(width === 2, "the cid: picture shows in the frame (naturalWidth " + width + ")");
    const signed = await frame.$eval("#logo", (i) => i.getAttribute("src"));
    check(/^\/inline\/\d+\/\d+\/\d+\/\d+\/\d+\/[0-9a-f]{64}$/.test(signed), "a signed link: " + signed);
    // The link works without a session, and only as signed.
    const fresh = await browser.newContext();
    const anonymous = await fresh.request.get(BASE + signed, { maxRedirects: 0 });
    check(anonymous.status() === 200 && sha(await anonymous.body()) === sha(PNG), "the signed link works without a session: " + anonymous.status());
    const parts = signed.split("/");
    const tampered = [
      [...parts.slice(0, 6), String(Number(parts[6]) + 60), parts[7]], // a later expiry
      [...parts.slice(0, 6), String(Number(parts[6]) - 7200), parts[7]], // an earlier one, long gone
      [...parts.slice(0, 5), "1", parts[6], parts[7]], // another part
      [...parts.slice(0, 7), parts[7].slice(0, 63) + (parts[7][63] === "0" ? "1" : "0")], // the signature
    ].map((p) => p.join("/"));
    const refused = [];
    for (const t of tampered) {
      const r = await fresh.request.get(BASE + t, { maxRedirects: 0 });
      refused.push(r.status());
      check(r.status() === 403, `a tampered link ${t} was answered ${r.status()}`);
    }
    await fresh.close();
    console.log(JSON.stringify({ downloads, sourceBytes: source.length, pictureWidth: width, refused }));
  } else if (mode === "styles") {
    // A newsletter keeps its colours; the CSS attacks in it do nothing;
    // with a dark UI the frame stays readable.
    await smtpSend(USER, crlf(`From: Shop <shop@remote.test>\nTo: ${USER}\nSubject: autumn newsletter\nMIME-Version: 1.0\nContent-Type: text/html; charset=utf-8\n\n${NEWSLETTER}`));
    const report = {};
    for (const scheme of ["light", "dark"]) {
      const page = await newPage({ colorScheme: scheme });
      const dialogs = [];
      page.on("dialog", (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
      const requests = [];
      page.on("request", (r) => { if (!r.url().startsWith(BASE)) requests.push(r.url()); });
      const inbox = await login(page);
      await open(page, inbox, "autumn newsletter");
      const frame = await messageFrame(page);
      const styles = await frame.evaluate(() => {
        const cs = (id) => getComputedStyle(document.getElementById(id));
        const b = getComputedStyle(document.body);
        return {
          table: cs("box").backgroundColor,
          banner: cs("banner").backgroundColor,
          bannerText: cs("banner").color,
          bannerFont: cs("banner").fontFamily,
          cell: cs("cell").color,
          cellSize: cs("cell").fontSize,
          font: cs("font").color,
          overlay: cs("overlay").position,
          hook: cs("hook").color,
          hookImage: cs("hook").backgroundImage,
          bodyText: b.color,
          bodyBackground: b.backgroundColor,
          uiBackground: getComputedStyle(parent.document.body).backgroundColor,
        };
      }).catch(async () => {
        // The frame's document is sandboxed: the parent is out of reach.
        return frame.evaluate(() => {
          const cs = (id) => getComputedStyle(document.getElementById(id));
          const b = getComputedStyle(document.body);
          return {
            table: cs("box").backgroundColor, banner: cs("banner").backgroundColor, bannerText: cs("banner").color,
            bannerFont: cs("banner").fontFamily, cell: cs("cell").color, cellSize: cs("cell").fontSize,
            font: cs("font").color, overlay: cs("overlay").position, hook: cs("hook").color,
            hookImage: cs("hook").backgroundImage, bodyText: b.color, bodyBackground: b.backgroundColor,
          };
        });
      });
      styles.uiBackground = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      check(styles.table === "rgb(255, 243, 196)", scheme + ": the table's bgcolor shows: " + styles.table);
      check(styles.banner === "rgb(11, 87, 208)" && styles.bannerText === "rgb(255, 255, 255)", scheme + ": the <style> rule applies: " + styles.banner + " " + styles.bannerText);
      check(styles.bannerFont.includes("Georgia"), scheme + ": fonts stay: " + styles.bannerFont);
      check(styles.cell === "rgb(90, 62, 0)" && styles.cellSize === "18px", scheme + ": the style attribute applies: " + styles.cell + " " + styles.cellSize);
      check(styles.font === "rgb(0, 128, 0)", scheme + ": <font color> stays: " + styles.font);
      check(styles.overlay !== "fixed", scheme + ": no fixed overlay: " + styles.overlay);
      check(styles.hook === "rgb(18, 52, 86)" && styles.hookImage === "none", scheme + ": the safe part of a declaration list stays, the hooks go: " + styles.hook + " " + styles.hookImage);
      check(dialogs.length === 0, "no script ran: " + dialogs);
      check(requests.length === 0, "nothing fetched from elsewhere: " + requests);
      const contrast = ratio(styles.bodyText, styles.bodyBackground);
      check(contrast >= 7, `${scheme}: the frame's text has contrast (${styles.bodyText} on ${styles.bodyBackground}: ${contrast.toFixed(1)})`);
      if (scheme === "dark") check(styles.uiBackground !== styles.bodyBackground, "the UI is dark around a light frame: " + styles.uiBackground);
      await page.screenshot({ path: path.join(OUT, `newsletter-${scheme}.png`), fullPage: true });
      report[scheme] = { contrast: Number(contrast.toFixed(1)), ui: styles.uiBackground, frame: styles.bodyBackground };
      await page.context().close();
    }
    console.log(JSON.stringify(report));
  } else if (mode === "phone") {
    await smtpSend(USER, crlf(`From: A very long sender name indeed <long@remote.test>\nTo: ${USER}\nSubject: a subject line that is much too long to fit on any phone screen at all, really\n\nshort text`));
    await smtpSend(USER, crlf(`From: Shop <shop@remote.test>\nTo: ${USER}\nSubject: autumn newsletter\nMIME-Version: 1.0\nContent-Type: text/html; charset=utf-8\n\n${NEWSLETTER}`));
    const shots = [];
    for (const [width, height] of [[390, 844], [360, 740], [430, 932]]) {
      const page = await newPage({ viewport: { width, height }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
      const pages = [];
      await page.goto(BASE + "/login");
      pages.push(["login", page.url()]);
      await fits(page, "login", width);
      const inbox = await login(page);
      const message = await open(page, inbox, "a subject line");
      const news = await open(page, inbox, "autumn newsletter");
      for (const [name, url] of [
        ["inbox", inbox], ["message", message], ["newsletter", news], ["compose", BASE + "/compose"],
        ["settings", BASE + "/settings"], ["filters", BASE + "/settings/filters"],
        ["scripts", BASE + "/settings/filters/scripts"], ["search", inbox + "?q=subject"],
      ]) {
        await page.goto(url, { waitUntil: "load" });
        await fits(page, name, width);
        const shot = path.join(OUT, `${name}-${width}x${height}.png`);
        await page.screenshot({ path: shot });
        shots.push(shot);
      }
      // The folder strip: each name apart from its count.
      await page.goto(inbox);
      const folder = await page.$eval("nav.folders a[data-use=inbox]", (a) => {
        const [n, c] = a.querySelectorAll("span");
        return { text: a.innerText, gap: c ? c.getBoundingClientRect().left - n.getBoundingClientRect().right : null };
      });
      check(folder.gap === null || folder.gap >= 4, `folder name and count apart (${JSON.stringify(folder)})`);
      await page.context().close();
    }
    console.log(JSON.stringify({ screenshots: shots.length }));
  } else if (mode === "axe") {
    await smtpSend(USER, crlf(`From: Shop <shop@remote.test>\nTo: ${USER}\nSubject: autumn newsletter\nMIME-Version: 1.0\nContent-Type: text/html; charset=utf-8\n\n${NEWSLETTER}`));
    const axe = fs.readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    const report = {};
    for (const scheme of ["light", "dark"]) {
      const page = await newPage({ colorScheme: scheme, bypassCSP: true });
      const inbox = await login(page);
      const message = await open(page, inbox, "autumn newsletter");
      for (const [name, url] of [
        ["login", null], ["inbox", inbox], ["message", message], ["compose", BASE + "/compose"], ["settings", BASE + "/settings"],
        ["filters", BASE + "/settings/filters"],
      ]) {
        if (name === "login") {
          const anon = await newPage({ colorScheme: scheme, bypassCSP: true });
          await anon.goto(BASE + "/login");
          report[`${name}-${scheme}`] = await audit(anon, axe, `${name} (${scheme})`);
          await anon.context().close();
          continue;
        }
        await page.goto(url, { waitUntil: "load" });
        report[`${name}-${scheme}`] = await audit(page, axe, `${name} (${scheme})`);
      }
      await page.context().close();
    }
    console.log(JSON.stringify(report));
  } else {
    throw new Error("usage: node reading.mjs files|styles|phone|axe");
  }
} catch (e) {
  console.error(e.stack || String(e));
  await browser.close();
  process.exit(1);
}
await browser.close();

// WCAG 2 contrast ratio of two computed `rgb(...)` colours.
function ratio(a, b) {
  const lum = (c) => {
    const [r, g, bl] = c.match(/[\d.]+/g).slice(0, 3).map((v) => {
      const s = Number(v) / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

// No sideways scrolling; main controls big enough to touch; none on top
// of another.
async function fits(page, name, width) {
  const m = await page.evaluate(() => {
    const sel = "header a, header button, header input, .actions button, .actions select, nav.folders a, .pager a, nav.reply a, a.back, .login button, .login input:not([type=hidden])";
    const controls = Array.from(document.querySelectorAll(sel))
      .filter((e) => e.getClientRects().length)
      .map((e) => { const r = e.getBoundingClientRect(); return { what: e.outerHTML.slice(0, 60), x: r.left, y: r.top, w: r.width, h: r.height }; });
    return { scroll: document.documentElement.scrollWidth, inner: innerWidth, controls };
  });
  check(m.scroll <= m.inner, `${name} at ${width}px scrolls sideways: ${m.scroll} > ${m.inner}`);
  for (const c of m.controls) {
    check(c.h >= 43.5, `${name} at ${width}px: ${c.what} is ${c.h.toFixed(1)}px high`);
    // The folder strip scrolls sideways on its own.
    if (!c.what.includes("data-use")) check(c.x >= -0.5 && c.x + c.w <= m.inner + 0.5, `${name} at ${width}px: ${c.what} sticks out`);
  }
  // Folder links sit in a strip of their own that scrolls: compare the
  // rest (the toolbar, the actions) pairwise.
  const fixed = m.controls.filter((c) => !c.what.includes("data-use"));
  for (let i = 0; i < fixed.length; i++) {
    for (let j = i + 1; j < fixed.length; j++) {
      const a = fixed[i], b = fixed[j];
      const overlap = a.x < b.x + b.w - 0.5 && b.x < a.x + a.w - 0.5 && a.y < b.y + b.h - 0.5 && b.y < a.y + a.h - 0.5;
      check(!overlap, `${name} at ${width}px: ${a.what} overlaps ${b.what}`);
    }
  }
}

// axe-core on the page: no violation of impact serious or critical.
async function audit(page, axe, what) {
  await page.addScriptTag({ content: axe });
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, target: v.nodes[0] && v.nodes[0].target.join(" ") }));
  });
  const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(bad.length === 0, `${what}: ${JSON.stringify(bad)}`);
  return result.map((v) => `${v.id}:${v.impact}`);
}
