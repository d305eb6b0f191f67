// loom serve's web page in headless Chromium (playwright-core): type a
// message, see the streamed answer arrive in pieces, see the status view
// fill in, and take a screenshot.
// usage: node page-test.mjs NODE_MODULES BASE_URL CHROMIUM SCREENSHOT
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import path from "node:path";

const [modules, base, chromium, screenshot] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { chromium: launcher } = require("playwright-core");

const browser = await launcher.launch({ executablePath: chromium, args: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
  const external = [];
  page.on("request", (r) => { if (!r.url().startsWith(base)) external.push(r.url()); });
  await page.goto(base + "/");
  // The answer's lengths as the page shows it, sampled on every change.
  await page.evaluate(() => {
    window.seen = [];
    new MutationObserver(() => {
      const a = document.querySelector(".msg.assistant");
      if (a) window.seen.push(a.textContent.length);
    }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
  });
  await page.fill("#max-tokens", "48");
  await page.fill("#input", "Hello, who are you?");
  await page.press("#input", "Enter");
  await page.waitForSelector(".msg.assistant[data-done=true]", { timeout: 120000 });
  const answer = await page.textContent(".msg.assistant");
  assert.ok(answer.length > 0, "an empty answer");
  const seen = await page.evaluate(() => window.seen);
  assert.ok(new Set(seen.filter((n) => n > 0)).size >= 2, `the answer did not arrive in pieces: ${seen}`);
  await page.waitForFunction(() => document.querySelectorAll("#slots tr").length === 5);  // a header and 4 slots
  await page.waitForFunction(() => /generated/.test(document.getElementById("summary").textContent));
  assert.match(await page.textContent("#devices"), /CPU/);
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.deepEqual(external, [], "the page fetched something from elsewhere");
  console.log(`page: streamed a ${answer.length}-character answer in ${new Set(seen).size} steps; screenshot ${screenshot}`);
} finally {
  await browser.close();
}
