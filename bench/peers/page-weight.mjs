// The inbox's weight in a real browser: log in to a webmail (Sluice's or
// Roundcube), then load the inbox twice (an empty cache, then a warm one)
// and count what came over the wire for each load until the network was
// idle: bytes as transferred (compressed, headers included) and the
// responses that came from the server rather than the cache. Prints JSON.
//
//   node page-weight.mjs sluice|roundcube BASE_URL ADDRESS PASSWORD
//
// Uses the playwright-core the browser tests install
// (crates/sluice/tests/browser) and Debian's chromium.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../crates/sluice/tests/browser/package.json"));
const { chromium } = require("playwright-core");

const [kind, base, user, password] = process.argv.slice(2);
if (!["sluice", "roundcube"].includes(kind) || !password) {
  console.error("usage: node page-weight.mjs sluice|roundcube BASE_URL ADDRESS PASSWORD");
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const page = await browser.newPage();
page.setDefaultTimeout(30000);

// Bytes and server responses through the DevTools protocol: Playwright's
// own events do not say what was served from the cache.
const cdp = await page.context().newCDPSession(page);
await cdp.send("Network.enable");
let bytes = 0;
let requests = 0;
cdp.on("Network.loadingFinished", (e) => {
  if (e.encodedDataLength > 0) {
    bytes += e.encodedDataLength;
    requests += 1;
  }
});

if (kind === "sluice") {
  await page.goto(base + "/login");
  await page.fill("input[name=address]", user);
  await page.fill("input[name=password]", password);
  await Promise.all([page.waitForURL(/\/mail\/\d+$/), page.click("form.login button")]);
} else {
  await page.goto(base + "/");
  await page.fill("input[name=_user]", user);
  await page.fill("input[name=_pass]", password);
  await Promise.all([page.waitForURL(/_task=mail/), page.click("button[type=submit]")]);
}
await page.waitForLoadState("networkidle");
const inbox = kind === "sluice" ? page.url() : base + "/?_task=mail&_mbox=INBOX";

async function load() {
  bytes = 0;
  requests = 0;
  await page.goto(inbox);
  await page.waitForLoadState("networkidle");
  return { bytes, requests };
}

// First load with an empty cache (the login page's files count as not
// yet seen), then a second one as a returning user.
await cdp.send("Network.clearBrowserCache");
const first = await load();
const second = await load();
console.log(JSON.stringify({ webmail: kind, first, second }));
await browser.close();
