// Moving about message lists in Debian's Chromium (playwright-core, never
// a downloaded browser) against a running `sluice serve`. Started by
// ../webmail_lists.rs:
//   node lists.mjs paging|drag|threads
// with BASE (http://host:port), USER, PASSWORD and SMTP (host:port) in the
// environment. Prints one JSON line of findings; exits non-zero on the
// first failed check.
import { check, launch, login, smtpSend } from "./driver.mjs";

const { BASE, USER } = process.env;
const mode = process.argv[2];

const browser = await launch();
const context = await browser.newContext();
const page = await context.newPage();
page.setDefaultTimeout(30000);

const subjects = () => page.$$eval("table.list tbody td.subject a", (as) => as.map((a) => a.textContent));
const pageOf = (url) => new URL(url).searchParams.get("page");
// Clicks something that loads a new page and waits for it.
async function go(click) {
  await Promise.all([page.waitForNavigation(), click()]);
}

const report = {};
try {
  if (mode === "paging") {
    // 250 messages, "bulk 000" the oldest: five pages of 50.
    for (let i = 0; i < 250; i++) {
      const n = String(i).padStart(3, "0");
      await smtpSend(USER, `From: Bulk <bulk@remote.test>\nTo: ${USER}\nSubject: bulk ${n}\n\nnumber ${n}`);
    }
    const inbox = await login(page);
    // Page 3 of the folder, and of a search within it.
    for (const start of [inbox, inbox + "?q=bulk"]) {
      await page.goto(start);
      await go(() => page.click(".pager a[rel=next]"));
      await go(() => page.click(".pager a[rel=next]"));
      const third = page.url();
      check(pageOf(third) === "3", "on page 3: " + third);
      const rows = await subjects();
      check(rows[0] === "bulk 149" && rows.length === 50, "page 3 starts at bulk 149: " + rows[0]);
      // Back by the link, then by the browser's Back button.
      await go(() => page.click("td.subject a >> text=bulk 140"));
      await go(() => page.click("a.back"));
      check(page.url() === third, `the back link leads to ${page.url()}, not ${third}`);
      check((await subjects()).join() === rows.join(), "the same rows after the back link");
      await go(() => page.click("td.subject a >> text=bulk 140"));
      await go(() => page.goBack());
      check(page.url() === third, `Back leads to ${page.url()}, not ${third}`);
      check((await subjects()).join() === rows.join(), "the same rows after Back");
    }
    // A message archived from page 3 leaves the reader there.
    const third = page.url();
    await go(() => page.click("td.subject a >> text=bulk 140"));
    await go(() => page.click("button[value=archive]"));
    check(page.url() === third, `archiving leads to ${page.url()}, not ${third}`);
    check(!(await subjects()).includes("bulk 140"), "bulk 140 was archived");

    // Search across folders pages through all 250 hits (one archived).
    await page.goto(BASE + "/search?subject=bulk");
    const found = await page.textContent(".pager .found");
    check(found.startsWith("250 found, page 1 of 5"), "the total: " + found);
    for (let p = 2; p <= 5; p++) await go(() => page.click(".pager a[rel=next]"));
    // The archived one may share a second with the oldest: hit 250 is on
    // this page, and the oldest among the last ones.
    const last = await subjects();
    check(last.length === 50 && last.includes("bulk 000"), "page 5 holds hits 201-250, bulk 000 among them: " + last);
    const fifth = page.url();
    check(pageOf(fifth) === "5" && (await page.$(".pager a[rel=next]")) === null, "page 5 is the last: " + fifth);
    await go(() => page.click("td.subject a >> text=bulk 000"));
    await go(() => page.click("a.back"));
    check(page.url() === fifth, `back from a hit leads to ${page.url()}, not ${fifth}`);
    report.hits = 250;
  } else if (mode === "drag") {
    for (let i = 1; i <= 5; i++) await smtpSend(USER, `From: Bob <bob@remote.test>\nTo: ${USER}\nSubject: drag ${i}\n\nhello`);
    await login(page);
    const row = (s) => page.locator("table.list tbody tr", { hasText: s });
    const folder = (role) => page.locator(`nav.folders a[data-use=${role}]`);
    // The ticked rows go together, dragged by one of them.
    await row("drag 2").locator("input[name=uid]").check();
    await row("drag 4").locator("input[name=uid]").check();
    await go(() => row("drag 4").locator("td.from").dragTo(folder("archive")));
    check(!(await subjects()).some((s) => s === "drag 2" || s === "drag 4"), "2 and 4 left the inbox: " + (await subjects()));
    // Step by step: the folder under the pointer is highlighted and the
    // move announced; an unticked row goes alone.
    await row("drag 1").locator("td.from").hover();
    await page.mouse.down();
    await folder("trash").hover();
    await folder("trash").hover({ position: { x: 5, y: 5 } });
    check(await folder("trash").evaluate((a) => a.classList.contains("drop")), "the folder under the pointer is highlighted");
    const said = await page.textContent(".announce");
    check(said.includes("Moving 1 message") || said.includes("Drop to move to Trash"), "announced: " + said);
    check(await page.getAttribute(".announce", "role") === "status", "a status region");
    await go(() => page.mouse.up());
    check((await subjects()).sort().join() === "drag 3,drag 5", "drag 3 and 5 stay: " + (await subjects()));
    report.dragged = 3;
  } else if (mode === "threads") {
    const mail = (from, subject, id, refs) => smtpSend(USER, `From: ${from}\nTo: ${USER}\nSubject: ${subject}\nMessage-ID: <${id}@remote.test>\n${refs ? `In-Reply-To: <${refs}@remote.test>\nReferences: <${refs}@remote.test>\n` : ""}\nhello`);
    await mail("Ann <ann@remote.test>", "plan", "p1");
    await mail("Solo <solo@remote.test>", "solo a", "s1");
    await mail("Bob <bob@remote.test>", "Re: plan", "p2", "p1");
    await mail("Solo <solo@remote.test>", "solo b", "s2");
    await mail("Cat <cat@remote.test>", "Re: plan", "p3", "p1");
    // Switched on without JavaScript; kept for the user, so a second
    // browser (with JavaScript) lists conversations too.
    const bare = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    bare.setDefaultTimeout(30000);
    await login(bare);
    check((await bare.$$("table.list tbody tr")).length === 5, "five messages at first");
    await Promise.all([bare.waitForNavigation(), bare.click("form.view-switch button")]);
    check((await bare.$$("table.list tbody tr")).length === 3, "three conversations without JavaScript");
    const inbox = await login(page);
    check((await subjects()).join() === "Re: plan,solo b,solo a", "one row per thread, newest first: " + (await subjects()));
    const thread = page.locator("table.list tbody tr", { hasText: "Re: plan" });
    check((await thread.locator(".count").textContent()) === "3", "the thread counts 3");
    check((await thread.locator("td.from").textContent()) === "Cat, Bob, Ann", "its senders: " + (await thread.locator("td.from").textContent()));
    check(await thread.evaluate((r) => r.classList.contains("unread")), "unread");
    check((await page.textContent(".pager")).includes("3 conversations"), "the pager counts conversations");
    // The row opens the newest message, whose page shows the conversation.
    await go(() => thread.locator("td.subject a").click());
    const conversation = await page.$$eval("table.thread tbody tr", (rs) => rs.map((r) => r.querySelector("td.from").textContent));
    check(conversation.join() === "Ann,Bob,Cat", "the conversation page: " + conversation);
    await page.goto(inbox);
    // One of three read: the thread is still unread.
    check(await thread.evaluate((r) => r.classList.contains("unread")), "still unread with two unread");
    await go(() => page.click("form.view-switch button"));
    check((await subjects()).length === 5, "one row per message again");
    report.threads = 3;
  } else {
    throw new Error("usage: node lists.mjs paging|drag|threads");
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
