// Drives Debian's Chromium (playwright-core, never a downloaded browser)
// against a running `sluice serve`, on the acting side of the webmail.
// Started by ../webmail_actions.rs:
//   node actions.mjs live|drafts|trash|badaddr|select|folders|spam|search|keys
// with BASE (http://host:port), USER, PASSWORD, SMTP (host:port) and
// FRIEND (a second local address) in the environment. Exits non-zero with
// a message on the first failed check.
import { check, launch, login, smtpSend, until } from "./driver.mjs";

const { BASE, USER, PASSWORD, SMTP, FRIEND } = process.env;
const mode = process.argv[2];

const mail = (subject, text = "hello") => smtpSend(USER, `From: Bob <bob@remote.test>\nTo: ${USER}\nSubject: ${subject}\n\n${text}`);

const browser = await launch();

async function newPage(javaScriptEnabled = true) {
  const context = await browser.newContext({ javaScriptEnabled });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  return page;
}

const subjects = (page) => page.$$eval("table.list tbody td.subject a", (as) => as.map((a) => a.textContent));
const rowBox = (page, subject) => page.locator("table.list tbody tr", { hasText: subject }).locator("input[name=uid]");
const folderUrl = (page, role) => page.$eval(`nav.folders a[data-use=${role}]`, (a) => a.href);
// Clicks something that loads a new page and waits for it.
async function go(page, click) {
  await Promise.all([page.waitForNavigation(), click()]);
}

const page = await newPage();
const report = {};
try {
  if (mode === "live") {
    for (const s of ["first", "second", "third"]) await mail(s);
    await login(page);
    check((await page.title()).startsWith("(3) INBOX"), "the title counts 3 unread: " + (await page.title()));
    await rowBox(page, "first").check();
    await rowBox(page, "third").check();
    await rowBox(page, "third").focus();
    await mail("live arrival");
    await until("the new message to appear", async () => (await subjects(page)).includes("live arrival"));
    check(await rowBox(page, "first").isChecked(), "first still ticked");
    check(await rowBox(page, "third").isChecked(), "third still ticked");
    check(!(await rowBox(page, "second").isChecked()), "second still not ticked");
    check(!(await rowBox(page, "live arrival").isChecked()), "the new one not ticked");
    check(await page.evaluate(() => document.activeElement && document.activeElement.closest("tr").textContent.includes("third")), "focus kept on the third box");
    await until("the title to count 4 unread", async () => (await page.title()).startsWith("(4) INBOX"));
    report.ticked = await page.locator("table.list tbody input[name=uid]:checked").count();
  } else if (mode === "drafts") {
    await login(page);
    await page.goto(BASE + "/compose");
    await page.fill("input[name=to]", FRIEND);
    await page.fill("input[name=cc]", "carol@remote.test");
    await page.fill("input[name=subject]", "plan");
    await page.fill("textarea[name=body]", "first version");
    await page.setInputFiles("input[type=file]", { name: "plan.txt", mimeType: "text/plain", buffer: Buffer.from("the plan\n".repeat(100)) });
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("button[value=draft]")]);
    // Saved: the form goes on editing the stored draft.
    check((await page.inputValue("input[name=subject]")) === "plan", "subject kept after saving");
    check((await page.textContent("fieldset.kept")).includes("plan.txt"), "the attachment is listed as kept");
    // Opening it from Drafts opens Compose with everything.
    await page.goto(await folderUrl(page, "drafts"));
    check((await subjects(page)).length === 1, "one draft");
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("td.subject a")]);
    check((await page.inputValue("input[name=to]")).includes(FRIEND), "To reopened");
    check((await page.inputValue("input[name=cc]")).includes("carol@remote.test"), "Cc reopened");
    check((await page.inputValue("input[name=subject]")) === "plan", "Subject reopened");
    check((await page.inputValue("textarea[name=body]")).startsWith("first version"), "text reopened: " + (await page.inputValue("textarea[name=body]")));
    check(await page.isChecked("fieldset.kept input[name=keep]"), "attachment kept");
    await page.fill("textarea[name=body]", "second version");
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("button[value=draft]")]);
    await page.goto(await folderUrl(page, "drafts"));
    check((await subjects(page)).length === 1, "saving again replaced the draft: " + (await subjects(page)));
    await Promise.all([page.waitForURL(/\/compose\?mode=draft/), page.click("td.subject a")]);
    check((await page.inputValue("textarea[name=body]")).startsWith("second version"), "the second text is stored");
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
    check((await page.textContent("article.msghead h1")).includes("plan"), "the sent message is shown");
    check((await page.textContent("ul.attachments")).includes("plan.txt"), "sent with the attachment");
    await page.goto(await folderUrl(page, "drafts"));
    check((await subjects(page)).length === 0, "sending removed the draft");
  } else if (mode === "trash") {
    for (const s of ["t1", "t2", "t3", "t4"]) await mail(s);
    const inbox = await login(page);
    for (const s of ["t1", "t2", "t3", "t4"]) await rowBox(page, s).check();
    await go(page, () => page.click("button[value=trash]"));
    check((await subjects(page)).length === 0, "all four moved to Trash");
    const trash = await folderUrl(page, "trash");
    // Without JavaScript: the server asks with a page.
    const plain = await newPage(false);
    await login(plain);
    await plain.goto(trash);
    check((await subjects(plain)).length === 4, "four in Trash");
    await rowBox(plain, "t1").check();
    await go(plain, () => plain.click("button[value=trash]"));
    check((await plain.textContent("h1")).includes("Delete for good"), "a page asks first");
    check((await plain.textContent("form.confirm")).includes("1 message for good"), "it says what goes");
    await plain.goto(trash);
    check((await subjects(plain)).length === 4, "nothing deleted before confirming");
    await rowBox(plain, "t1").check();
    await go(plain, () => plain.click("button[value=trash]"));
    await go(plain, () => plain.click("form.confirm button.danger"));
    check(!(await subjects(plain)).includes("t1") && (await subjects(plain)).length === 3, "t1 deleted for good");
    // With JavaScript: a dialog asks; dismissed, nothing happens.
    await page.goto(trash);
    await rowBox(page, "t2").check();
    const questions = [];
    page.once("dialog", (d) => { questions.push(d.message()); d.dismiss(); });
    await page.click("button[value=trash]");
    await until("the dialog", () => questions.length === 1);
    check(questions[0].includes("for good"), "the dialog asks: " + questions[0]);
    await page.goto(trash);
    check((await subjects(page)).length === 3, "dismissed: nothing deleted");
    await rowBox(page, "t2").check();
    page.once("dialog", (d) => d.accept());
    await go(page, () => page.click("button[value=trash]"));
    check(!(await subjects(page)).includes("t2") && (await subjects(page)).length === 2, "t2 deleted for good");
    page.once("dialog", (d) => { questions.push(d.message()); d.dismiss(); });
    await page.click("button[value=empty]");
    await until("the Empty Trash dialog", () => questions.length === 2);
    check(questions[1].includes("Empty the Trash"), "Empty Trash asks: " + questions[1]);
    await page.goto(trash);
    check((await subjects(page)).length === 2, "dismissed: Trash kept");
    // Empty Trash without JavaScript: a page asks, then it is done.
    await plain.goto(trash);
    await go(plain, () => plain.click("button[value=empty]"));
    check((await plain.textContent("form.confirm")).includes("Delete all 2 messages"), "the page says how many go");
    await go(plain, () => plain.click("form.confirm button.danger"));
    check((await subjects(plain)).length === 0, "Trash is empty");
    check((await plain.textContent("main")).includes("No messages."), "and says so");
    await page.goto(inbox);
    check((await subjects(page)).length === 0, "nothing came back to INBOX");
  } else if (mode === "badaddr") {
    await login(page);
    await page.goto(BASE + "/compose");
    const text = "A long and careful text\nthat took an hour to write.";
    await page.fill("input[name=to]", FRIEND.replace("@", " at "));
    await page.fill("input[name=subject]", "notes");
    await page.fill("textarea[name=body]", text);
    await page.setInputFiles("input[type=file]", { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("notes\n".repeat(1000)) });
    const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/compose") && r.request().method() === "POST"), page.click("button[value=send]")]);
    await page.waitForLoadState("load");
    check(res.status() === 422, "the form comes back as 422, not a bare 400: " + res.status());
    check((await page.inputValue("textarea[name=body]")) === text, "the text is intact: " + (await page.inputValue("textarea[name=body]")));
    check((await page.inputValue("input[name=subject]")) === "notes", "the subject is intact");
    check((await page.inputValue("input[name=to]")) === FRIEND.replace("@", " at "), "To as typed");
    const to = page.locator("input[name=to]");
    check((await to.getAttribute("aria-invalid")) === "true", "To is marked invalid");
    const described = await to.getAttribute("aria-describedby");
    check(described, "To has aria-describedby");
    const error = await page.textContent("#" + described);
    check(error.includes("is not an email address"), "the error says why: " + error);
    check(await page.evaluate((id) => document.querySelector("input[name=to]").nextElementSibling === document.getElementById(id), described), "the error is right beside To");
    check((await page.textContent("fieldset.kept")).includes("notes.txt"), "the uploaded file is kept");
    check(await page.isChecked("fieldset.kept input[name=keep]"), "and ticked");
    await page.fill("input[name=to]", FRIEND);
    await Promise.all([page.waitForURL(/\/mail\/\d+\/\d+$/), page.click("button[value=send]")]);
    check((await page.textContent("article.msghead h1")).includes("notes"), "sent once fixed");
    check((await page.textContent("ul.attachments")).includes("notes.txt"), "with the file uploaded the first time");
    await page.goto(await folderUrl(page, "drafts"));
    check((await subjects(page)).length === 0, "no draft left behind");
  } else if (mode === "select") {
    for (const s of ["s1", "s2", "s3", "s4"]) await mail(s);
    await login(page);
    check((await page.title()).startsWith("(4) INBOX"), "title (4) INBOX: " + (await page.title()));
    const inboxLink = page.locator("nav.folders a[data-use=inbox]");
    check((await inboxLink.locator("span").first().textContent()) === "INBOX", "folder name apart");
    check((await inboxLink.locator(".unseen").textContent()) === "4", "unread count apart, in a badge");
    const all = page.locator("input.select-all");
    check(await all.isVisible(), "select all is shown with JavaScript");
    await all.check();
    check((await page.locator("table.list tbody input[name=uid]:checked").count()) === 4, "select all ticks all");
    await all.uncheck();
    check((await page.locator("table.list tbody input[name=uid]:checked").count()) === 0, "and unticks all");
    const boxes = page.locator("table.list tbody input[name=uid]");
    await boxes.nth(0).click();
    await boxes.nth(2).click({ modifiers: ["Shift"] });
    const ticked = await boxes.evaluateAll((bs) => bs.map((b) => b.checked));
    check(JSON.stringify(ticked) === "[true,true,true,false]", "shift-click ticks the range: " + ticked);
    await go(page, () => page.click("button[value=read]"));
    check((await page.title()).startsWith("(1) INBOX"), "title (1) after marking three read: " + (await page.title()));
    check((await inboxLink.locator(".unseen").textContent()) === "1", "badge 1");
    await go(page, () => page.click("button[value=allread]"));
    check((await page.title()) === "INBOX – Sluice", "no count once all are read: " + (await page.title()));
    check((await page.locator("nav.folders a[data-use=inbox] .unseen").count()) === 0, "no badge");
    check((await page.locator("table.list tr.unread").count()) === 0, "no unread row");
  } else if (mode === "folders") {
    await mail("to sort");
    const inbox = await login(page);
    await go(page, () => page.click("header a[href='/folders']"));
    await page.fill("form.compose input[name=name]", "Projects");
    await go(page, () => page.click("form.compose button"));
    check((await page.textContent(".notice")).includes("Folder created"), "created");
    const row = (name) => page.locator(`tr[data-folder="${name}"]`);
    check((await row("Projects").count()) === 1, "listed");
    await go(page, () => row("Projects").locator("button", { hasText: "Subscribe" }).click());
    check((await row("Projects").locator("button", { hasText: "Unsubscribe" }).count()) === 1, "subscribed");
    await row("Projects").locator("input[name=to]").fill("Work");
    await go(page, () => row("Projects").locator("button", { hasText: "Rename" }).click());
    check((await row("Work").count()) === 1 && (await row("Projects").count()) === 0, "renamed");
    await page.fill("form.compose input[name=name]", "Work");
    const [dup] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/folders") && r.request().method() === "POST"), page.click("form.compose button")]);
    check(dup.status() === 422 && (await page.textContent(".notice")).includes("exists"), "a taken name is refused with why");
    await page.fill("form.compose input[name=name]", "Keep");
    await go(page, () => page.click("form.compose button"));
    // The Move menu starts on a placeholder; moving needs a pick.
    await page.goto(inbox);
    const first = await page.$eval("select[name=to]", (s) => ({ value: s.value, text: s.options[0].text, index: s.selectedIndex }));
    check(first.value === "" && first.index === 0 && first.text.startsWith("Move to"), "placeholder first: " + JSON.stringify(first));
    await rowBox(page, "to sort").check();
    const [refused] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/act")), page.click("button[value=move]")]);
    await page.waitForLoadState("load");
    check(refused.status() === 400, "a move without a folder is refused: " + refused.status());
    check((await page.textContent("main")).includes("choose the folder"), "with a message saying so: " + (await page.textContent("main")));
    await page.goto(inbox);
    check((await subjects(page)).includes("to sort"), "the message stayed");
    await rowBox(page, "to sort").check();
    await page.selectOption("select[name=to]", { label: "Work" });
    await go(page, () => page.click("button[value=move]"));
    check(!(await subjects(page)).includes("to sort"), "moved out of INBOX");
    await go(page, () => page.click("nav.folders a >> text=Work"));
    check((await subjects(page)).includes("to sort"), "into Work");
    // Deleting asks first (a dialog here).
    await page.goto(BASE + "/folders");
    page.once("dialog", (d) => d.accept());
    await go(page, () => row("Work").locator("button", { hasText: "Delete" }).click());
    check((await row("Work").count()) === 0 && (await page.textContent(".notice")).includes("deleted"), "deleted");
    check((await row("INBOX").locator("button", { hasText: "Delete" }).count()) === 0, "INBOX cannot be deleted");
  } else if (mode === "spam") {
    await mail("cheap watches", "buy cheap watches now");
    await mail("meeting notes", "the notes from today");
    const inbox = await login(page);
    await go(page, () => page.click("td.subject a >> text=cheap watches"));
    const verdict = page.locator("details.spam-verdict");
    check((await verdict.count()) === 1, "the spam verdict is shown");
    check(/score -?\d/.test(await verdict.locator("summary").textContent()), "with the score: " + (await verdict.textContent()));
    await go(page, () => page.click("button[value=spam]"));
    check(!(await subjects(page)).includes("cheap watches"), "Spam moved it out of INBOX");
    await rowBox(page, "meeting notes").check();
    await go(page, () => page.click("button[value=spam]"));
    const junk = await folderUrl(page, "junk");
    await page.goto(junk);
    check((await subjects(page)).length === 2, "both in Junk");
    check((await page.locator("button[value=notspam]").count()) === 1 && (await page.locator("button[value=spam]").count()) === 0, "Junk offers Not spam");
    await go(page, () => page.click("td.subject a >> text=meeting notes"));
    await go(page, () => page.click("button[value=notspam]"));
    await page.goto(inbox);
    check((await subjects(page)).includes("meeting notes"), "Not spam moved it back to INBOX");
  } else if (mode === "search") {
    await smtpSend(USER, `From: Bob <bob@remote.test>\nTo: ${USER}\nSubject: alpha report\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/plain\n\nsee the file\n--B\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=report.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n--B--`);
    await smtpSend(USER, `From: Carol <carol@remote.test>\nTo: ${USER}\nSubject: alpha minutes\n\nwhat we said`);
    await mail("beta");
    await login(page);
    await rowBox(page, "alpha minutes").check();
    await go(page, () => page.click("button[value=archive]"));
    await go(page, () => page.click("header a.search-all"));
    const hits = () => page.$$eval("table.search-hits tbody tr", (rs) => rs.map((r) => r.querySelector("td.subject").textContent.trim() + "@" + r.querySelector("td.folder").textContent.trim()).sort().join(","));
    const search = async (fields) => {
      await page.goto(BASE + "/search");
      for (const [k, v] of Object.entries(fields)) {
        if (v === true) await page.check(`form.search-all input[name=${k}]`);
        else await page.fill(`form.search-all input[name=${k}]`, v);
      }
      await go(page, () => page.click("form.search-all button"));
    };
    await search({ q: "alpha" });
    check((await hits()) === "alpha minutes@Archive,alpha report@INBOX", "words across folders, each with its folder: " + (await hits()));
    await search({ from: "carol" });
    check((await hits()) === "alpha minutes@Archive", "from: " + (await hits()));
    await search({ subject: "alpha", attachment: true });
    check((await hits()) === "alpha report@INBOX", "with an attachment: " + (await hits()));
    await search({ to: USER.split("@")[0], subject: "beta" });
    check((await hits()) === "beta@INBOX", "to and subject: " + (await hits()));
    await search({ to: "nobody-here" });
    check((await page.textContent("main")).includes("Nothing found."), "to that matches nothing");
    const today = new Date().toISOString().slice(0, 10);
    await search({ subject: "alpha", since: today, until: today });
    check((await hits()) === "alpha minutes@Archive,alpha report@INBOX", "today's range: " + (await hits()));
    await search({ subject: "alpha", until: "2001-01-01" });
    check((await page.textContent("main")).includes("Nothing found."), "a range in the past finds nothing");
    await search({ subject: "alpha report" });
    await go(page, () => page.click("table.search-hits >> text=alpha report"));
    check((await page.textContent("article.msghead h1")).includes("alpha report"), "a hit opens its message");
    await search({ subject: "alpha", unread: true });
    check((await hits()) === "alpha minutes@Archive", "unread only, once the report was read: " + (await hits()));
  } else if (mode === "keys") {
    await mail("k1");
    await mail("k2");
    await login(page);
    await page.keyboard.press("?");
    const help = page.locator("#key-help");
    check(await help.isVisible(), "? opens the key sheet");
    check((await help.getAttribute("role")) === "dialog", "as a dialog");
    const sheet = await help.textContent();
    for (const k of ["j / k", "#", "e", "r", "a", "f", "c", "/", "s", "u", "x"]) check(sheet.includes(k), "the sheet lists " + k);
    await page.keyboard.press("Escape");
    check((await help.count()) === 0, "Escape closes it");
    await page.keyboard.press("j");
    await page.keyboard.press("x");
    check((await page.locator("table.list tr.cursor input[name=uid]").isChecked()), "x ticks the row under the cursor");
  } else {
    throw new Error("usage: node actions.mjs live|drafts|trash|badaddr|select|folders|spam|search|keys");
  }
  console.log(JSON.stringify(report));
} catch (e) {
  console.error(e.stack || String(e));
  await browser.close();
  process.exit(1);
}
await browser.close();
