// Drives Debian's Chromium (playwright-core, never a downloaded browser)
// through the admin pages of a running `sluice serve`, with the page's
// script turned off: the forms must work without JavaScript. Started by
// ../admin.rs:
//   node admin.mjs
// with BASE (http://host:port), USER (an admin) and PASSWORD in the
// environment. Exits non-zero with a message on the first failed check.
import { check, launch } from "./driver.mjs";

const { BASE, USER, PASSWORD } = process.env;

const browser = await launch();
try {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  const errors = [];
  // Refusals answer 4xx on purpose (and there is no favicon): only other
  // errors, such as a Content-Security-Policy violation, count.
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) errors.push(m.text());
  });

  await page.goto(BASE + "/login");
  await page.fill("input[name=address]", USER);
  await page.fill("input[name=password]", PASSWORD);
  await Promise.all([page.waitForNavigation(), page.click("form.login button")]);

  // The header links the admin pages for an admin.
  await Promise.all([page.waitForNavigation(), page.click("header a[href='/admin']")]);
  check((await page.textContent("main h1")) === "Overview", "overview page");
  check((await page.content()).includes("sluice_connections_open"), "metrics at a glance");

  // Add a domain.
  await page.goto(BASE + "/admin/domains");
  await page.fill("form.admin input[name=name]", "browser.test");
  await Promise.all([page.waitForNavigation(), page.click("form.admin button")]);
  check(page.url() === BASE + "/admin/domains", "back on the domains page: " + page.url());
  check((await page.textContent("ul.admin-list")).includes("browser.test"), "domain listed");

  // A bad domain: the reason on the page, the list unchanged.
  await page.fill("form.admin input[name=name]", "not a domain");
  await Promise.all([page.waitForNavigation(), page.click("form.admin button")]);
  check(await page.isVisible("p.notice[role=alert]"), "refusal shown");
  check(!(await page.textContent("ul.admin-list")).includes("not a domain"), "bad domain not added");

  // Add a user, then set a limit on it.
  await page.goto(BASE + "/admin/users");
  const add = page.locator("form.admin", { has: page.locator("input[name=action][value=add]") });
  await add.locator("input[name=address]").fill("zoe@browser.test");
  await add.locator("input[name=password]").fill("zoe's pw");
  await Promise.all([page.waitForNavigation(), add.locator("button").click()]);
  check((await page.content()).includes("zoe@browser.test"), "user listed");
  const quota = page.locator("form.admin", { has: page.locator("input[name=action][value=quota]") });
  await quota.locator("select[name=address]").selectOption("zoe@browser.test");
  await quota.locator("input[name=limit]").fill("1M");
  await Promise.all([page.waitForNavigation(), quota.locator("button").click()]);
  check((await page.content()).includes("1.0 MB"), "limit shown");

  // Add an alias.
  await page.goto(BASE + "/admin/aliases");
  await page.fill("form.admin input[name=address]", "hello@browser.test");
  await page.fill("form.admin input[name=targets]", "zoe@browser.test");
  await Promise.all([page.waitForNavigation(), page.click("form.admin button")]);
  check((await page.textContent("table.admin")).includes("hello@browser.test"), "alias listed");

  // The queue and the DKIM record.
  await page.goto(BASE + "/admin/queue");
  check((await page.textContent("main")).includes("The queue is empty."), "queue page");
  await page.goto(BASE + "/admin/dkim");
  const record = await page.textContent("pre.dkim");
  check(/^s1\._domainkey\.example\.org\. IN TXT \( "v=DKIM1; k=rsa; p=/.test(record), "DKIM record: " + record);

  // Recent log lines, filtered through the page's search form.
  await page.goto(BASE + "/admin/logs");
  await page.fill("form.admin input[name=filter]", "webmail login");
  await Promise.all([page.waitForNavigation(), page.click("form.admin button")]);
  const log = await page.textContent("pre.log");
  check(log.includes("webmail login") && !log.includes("listening"), "filtered log lines: " + log);

  check(errors.length === 0, "no console errors: " + errors.join("; "));
  console.log("ok");
} finally {
  await browser.close();
}
