// Writing mail in Debian's Chromium (playwright-core, never a downloaded
// browser) against a running `sluice serve`. Started by
// ../webmail_compose.rs:
//   node compose.mjs answered|drop|suggest|signature|axe
// with BASE (http://host:port), USER, PASSWORD, SMTP (host:port), FRIEND
// (a second local address) and OTHER (a third account's address) in the
// environment (and ALIAS, an alias of USER, for `signature`). Prints one JSON line of findings; exits non-zero on the
// first failed check.
import { check, launch, login, smtpSend, until } from "./driver.mjs";
import crypto from "node:crypto";
import fs from "node:fs";
import { createRequire } from "node:module";

const { BASE, USER, FRIEND, OTHER } = process.env;
const mode = process.argv[2];

const sha = (buf) => crypto.createHash("sha256").update(buf).digest("hex");
const browser = await launch();

async function newPage(options = {}) {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  return page;
}

// Dispatches a drop of `files` ({name, type, data: Buffer}) on the form's
// drop zone, as a browser does for files dragged from the desktop.
async function drop(page, files) {
  const dt = await page.evaluateHandle((fs) => {
    const dt = new DataTransfer();
    for (const f of fs) {
      const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], f.name, { type: f.type }));
    }
    return dt;
  }, files.map((f) => ({ name: f.name, type: f.type, b64: f.data.toString("base64") })));
  await page.dispatchEvent("form.compose .dropzone", "dragover", { dataTransfer: dt });
  await page.dispatchEvent("form.compose .dropzone", "drop", { dataTransfer: dt });
}

const progress = (page) => page.$$eval("ul.uploads progress", (ps) => ps.map((p) => p.value));
const options = (page, field) => page.$$eval(`#${field}-suggestions [role=option]`, (os) => os.map((o) => o.textContent));

const report = {};
try {
  if (mode === "answered") {
    // A reply saved as a draft, reopened from Drafts and sent.
    await smtpSend(USER, `From: ${FRIEND}\nTo: ${USER}\nSubject: question\nMessage-ID: <question-1@remote.test>\n\nShall we?`);
    const page = await newPage();
    const inbox = await login(page);
    await page.goto(inbox);
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("td.subject a")]);
    await Promise.all([page.waitForURL(/\/compose\?/), page.click("a.reply")]);
    await page.fill("textarea[name=body]", "Yes, let us.");
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("button[value=draft]")]);
    await page.goto(await page.$eval("nav.folders a[data-use=drafts]", (a) => a.href));
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("td.subject a")]);
    report.inReplyTo = await page.inputValue("input[name=in_reply_to]");
    report.references = await page.inputValue("input[name=references]");
    check(report.inReplyTo === "<question-1@remote.test>", "In-Reply-To reopened: " + report.inReplyTo);
    check((await page.inputValue("input[name=replied]")) !== "", "the answered message is known again");
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
  } else if (mode === "drop") {
    // Without JavaScript the file input is the way, and there is no zone.
    const plain = await newPage({ javaScriptEnabled: false });
    await login(plain);
    await plain.goto(BASE + "/compose");
    check(await plain.isVisible("input[type=file][name=files]"), "the file input without JavaScript");
    check((await plain.$("form.compose .dropzone")) === null, "no drop zone without JavaScript");
    await plain.context().close();

    const page = await newPage();
    await login(page);
    await page.goto(BASE + "/compose");
    await page.fill("input[name=to]", FRIEND);
    await page.fill("input[name=subject]", "dropped files");
    await page.fill("textarea[name=body]", "Three files dropped, one taken back.");
    const files = [
      { name: "big.bin", type: "application/octet-stream", data: crypto.randomBytes(3 * 1024 * 1024 + 17) },
      { name: "notes.txt", type: "text/plain", data: Buffer.from("line\n".repeat(300)) },
      { name: "oops.txt", type: "text/plain", data: Buffer.from("not this one\n") },
    ];
    await drop(page, files.slice(0, 2));
    await drop(page, files.slice(2));
    await until("three uploads at 100%", async () => {
      const p = await progress(page);
      return p.length === 3 && p.every((v) => v === 100);
    });
    check((await page.textContent("fieldset.kept")).includes("big.bin"), "the draft holds big.bin");
    check(page.url().includes("mode=draft"), "the address is the draft's: " + page.url());
    await page.click("button[aria-label='Remove oops.txt']");
    check((await progress(page)).length === 2, "oops.txt removed from the list");
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
    const sent = await page.textContent("ul.attachments");
    check(sent.includes("big.bin") && sent.includes("notes.txt") && !sent.includes("oops.txt"), "sent with two files: " + sent);
    report.files = { "big.bin": sha(files[0].data), "notes.txt": sha(files[1].data) };
  } else if (mode === "suggest") {
    for (let i = 0; i < 3; i++) await smtpSend(USER, `From: Alice Archer <alice@remote.test>\nTo: ${USER}\nSubject: news ${i}\n\nhello`);
    await smtpSend(USER, `From: Alan <alan@remote.test>\nTo: ${USER}\nSubject: once\n\nhello`);
    await smtpSend(OTHER, `From: Alfred <alfred@remote.test>\nTo: ${OTHER}\nSubject: not yours\n\nhello`);
    const page = await newPage();
    await login(page);
    await page.goto(BASE + "/compose");
    check((await page.getAttribute("#to", "role")) === "combobox", "To is a combobox");
    await page.locator("#to").pressSequentially("al");
    await until("suggestions for al", async () => (await options(page, "to")).length >= 2);
    report.al = await options(page, "to");
    check(report.al[0] === "Alice Archer <alice@remote.test>", "the most frequent first: " + report.al);
    check(!report.al.some((o) => o.includes("alfred")), "another account's correspondent never shows");
    check((await page.getAttribute("#to", "aria-expanded")) === "true", "expanded");
    await page.keyboard.press("ArrowDown");
    check((await page.getAttribute("#to", "aria-activedescendant")) === "to-suggestions-0", "ArrowDown picks the first");
    await page.keyboard.press("Enter");
    check((await page.inputValue("#to")) === "alice@remote.test, ", "Enter fills the field: " + (await page.inputValue("#to")));
    check(page.url().endsWith("/compose"), "Enter chose, it did not send");
    // A second address after the comma.
    await page.locator("#to").pressSequentially("ala");
    await until("suggestions for ala", async () => (await options(page, "to")).length === 1);
    await page.click("#to-suggestions [role=option]");
    report.to = await page.inputValue("#to");
    check(report.to === "alice@remote.test, alan@remote.test, ", "two addresses: " + report.to);
    report.alfred = await page.evaluate(async () => (await fetch("/compose/addresses?q=alf")).json());
    check(report.alfred.length === 0, "nothing of another account: " + JSON.stringify(report.alfred));
    await page.fill("input[name=subject]", "to both");
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
  } else if (mode === "signature") {
    // USER may also send as ALIAS (an alias of it): a signature for each.
    const { ALIAS } = process.env;
    const page = await newPage();
    await login(page);
    const boxes = (p) => p.$$eval("form textarea[name^=sig-]", (ts) => ts.map((t) => t.closest("label").textContent));
    await until("both addresses on the signatures page", async () => {
      await page.goto(BASE + "/settings/signatures");
      const b = await boxes(page);
      return b.length === 2 && b.some((t) => t.includes(ALIAS));
    });
    const area = (addr) => page.locator("form label", { hasText: "Signature for " + addr }).locator("textarea");
    await area(USER).fill("Ann Example\nSluice Ltd");
    await area(ALIAS).fill("The sales team\nCall us any time");
    await Promise.all([page.waitForNavigation(), page.click("form.compose div.actions button")]);
    check((await area(ALIAS).inputValue()) === "The sales team\nCall us any time", "the signature is stored");
    await page.goto(BASE + "/compose");
    const own = await page.inputValue("textarea[name=body]");
    check(own === "\n\n-- \nAnn Example\nSluice Ltd", "the own address's signature below an empty text: " + JSON.stringify(own));
    await page.selectOption("select#from", ALIAS);
    const swapped = await page.inputValue("textarea[name=body]");
    check(swapped === "\n\n-- \nThe sales team\nCall us any time", "changing From swaps it: " + JSON.stringify(swapped));
    await page.fill("textarea[name=body]", "Our offer is attached." + swapped);
    await page.fill("input[name=to]", FRIEND);
    await page.fill("input[name=subject]", "from sales");
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
  } else if (mode === "axe") {
    await smtpSend(USER, `From: Alice Archer <alice@remote.test>\nTo: ${USER}\nSubject: hi\n\nhello`);
    const axe = fs.readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
    for (const scheme of ["light", "dark"]) {
      const page = await newPage({ colorScheme: scheme, bypassCSP: true });
      await login(page);
      await page.goto(BASE + "/compose");
      await drop(page, [{ name: "a.txt", type: "text/plain", data: Buffer.from("a") }]);
      await until("the upload", async () => (await progress(page)).every((v) => v === 100) && (await progress(page)).length === 1);
      await page.locator("#to").pressSequentially("ali");
      await until("a suggestion", async () => (await options(page, "to")).length === 1);
      await page.keyboard.press("ArrowDown");
      await page.addScriptTag({ content: axe });
      const result = await page.evaluate(async () => {
        const r = await window.axe.run(document, { resultTypes: ["violations"] });
        return r.violations.map((v) => ({ id: v.id, impact: v.impact, target: v.nodes[0] && v.nodes[0].target.join(" ") }));
      });
      const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
      check(bad.length === 0, `compose (${scheme}): ${JSON.stringify(bad)}`);
      report[scheme] = result.map((v) => `${v.id}:${v.impact}`);
      await page.context().close();
    }
  } else {
    throw new Error("usage: node compose.mjs answered|drop|suggest|signature|axe");
  }
  console.log(JSON.stringify(report));
} finally {
  await browser.close();
}
