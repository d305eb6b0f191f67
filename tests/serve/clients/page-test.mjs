// loom serve's web page in headless Chromium (playwright-core): type a
// message, check that the page asked for a stream, that the server sent the
// answer in several events and that the page shows their text joined, see
// the status view fill in, and take a screenshot. (Whether the browser
// paints each piece apart depends on timing, so the pieces are counted on
// the wire, not on the screen.)
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
  // Every text the page gives the answer's element, in order: one per
  // streamed piece if the page renders the stream as it comes.
  await page.addInitScript(() => {
    window.shown = [];
    const text = Object.getOwnPropertyDescriptor(Node.prototype, "textContent");
    Object.defineProperty(Node.prototype, "textContent", {
      get() { return text.get.call(this); },
      set(v) {
        if (this.classList?.contains("assistant")) window.shown.push(String(v).length);
        text.set.call(this, v);
      },
    });
  });
  await page.goto(base + "/");
  await page.fill("#max-tokens", "48");
  await page.fill("#input", "Hello, who are you?");
  const response = page.waitForResponse((r) => r.url() === base + "/v1/chat/completions");
  await page.press("#input", "Enter");
  const res = await response;
  assert.equal(res.request().postDataJSON().stream, true, "the page did not ask for a stream");
  assert.match(res.headers()["content-type"] ?? "", /^text\/event-stream/);
  await page.waitForSelector(".msg.assistant[data-done=true]", { timeout: 120000 });
  const answer = await page.textContent(".msg.assistant");
  assert.ok(answer.length > 0, "an empty answer");
  // (Playwright hands an event stream's body over re-encoded, so the
  // pieces are counted here and their text is checked through the page.)
  const pieces = (await res.text())
    .split("\n")
    .filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
    .map((line) => JSON.parse(line.slice(6)).choices[0].delta.content ?? "")
    .filter((text) => text.length > 0);
  assert.ok(pieces.length >= 2, `the answer came in ${pieces.length} event(s)`);
  // An event without text (the last one, with the finish reason) sets the same text again.
  const shown = (await page.evaluate(() => window.shown)).filter((n, i, all) => n > 0 && n !== all[i - 1]);
  assert.ok(shown.every((n, i) => i === 0 || n > shown[i - 1]), `the answer did not grow piece by piece: ${shown}`);
  assert.equal(shown.length, pieces.length, `the page showed ${shown.length} steps for ${pieces.length} pieces`);
  assert.equal(shown.at(-1), answer.length, "the last step is the whole answer");
  await page.waitForFunction(() => document.querySelectorAll("#slots tr").length === 5);  // a header and 4 slots
  await page.waitForFunction(() => /generated/.test(document.getElementById("summary").textContent));
  assert.match(await page.textContent("#devices"), /CPU/);
  await page.screenshot({ path: screenshot, fullPage: true });
  assert.deepEqual(external, [], "the page fetched something from elsewhere");
  console.log(`page: streamed a ${answer.length}-character answer in ${pieces.length} events; screenshot ${screenshot}`);
} finally {
  await browser.close();
}
