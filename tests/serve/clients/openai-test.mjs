// loom serve through OpenAI's own client (the `openai` npm package):
// completions and chat, whole and streamed, logprobs, 16 concurrent chats
// on the server's 4 slots against the same chats one at a time, and a 400
// surfacing as the client's APIError.
// usage: node openai-test.mjs NODE_MODULES BASE_URL
import { createRequire } from "node:module";
import assert from "node:assert/strict";
import path from "node:path";

const [modules, base] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { default: OpenAI, APIError } = require("openai");
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 });
const greedy = { temperature: 0, max_tokens: 12 };

const whole = await client.completions.create({ model: "tiny", prompt: "Once upon a time", ...greedy });
assert.ok(whole.usage.completion_tokens >= 1);
let streamed = "";
for await (const chunk of await client.completions.create({ model: "tiny", prompt: "Once upon a time", ...greedy, stream: true }))
  streamed += chunk.choices[0].text;
assert.equal(streamed, whole.choices[0].text);

const messages = [{ role: "system", content: "be brief" }, { role: "user", content: "hello" }];
const chat = await client.chat.completions.create({ model: "tiny", messages, ...greedy, logprobs: true, top_logprobs: 2 });
const content = chat.choices[0].message.content;
assert.equal(chat.choices[0].logprobs.content.map((t) => t.token).join(""), content);
let chatStreamed = "";
for await (const chunk of await client.chat.completions.create({ model: "tiny", messages, ...greedy, stream: true }))
  chatStreamed += chunk.choices[0]?.delta?.content ?? "";
assert.equal(chatStreamed, content);

const ask = (i, stream) => {
  const body = { model: "tiny", messages: [{ role: "user", content: `question ${i}: ${"xyz".repeat(i % 4)}` }], ...greedy };
  if (!stream) return client.chat.completions.create(body).then((r) => r.choices[0].message.content);
  return client.chat.completions.create({ ...body, stream: true }).then(async (s) => {
    let text = "";
    for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
    return text;
  });
};
const alone = [];
for (let i = 0; i < 16; i++) alone.push(await ask(i, false));
const together = await Promise.all(Array.from({ length: 16 }, (_, i) => ask(i, i % 2 === 1)));
assert.deepEqual(together, alone);

await assert.rejects(client.completions.create({ model: "tiny", prompt: "x", temperature: "hot" }),
  (e) => e instanceof APIError && e.status === 400 && /temperature/.test(e.message));
console.log("openai: completions, chat (whole, streamed, logprobs), 16 concurrent chats, 400 OK");
