// Renders every chat template in a folder with @huggingface/jinja (as
// transformers.js does) and with `loom apply-template`, over a few message
// sets, and compares the bytes. Prints one line per difference and a summary.
// usage: node template-parity.mjs LOOM JINJA_MODULE_DIR TEMPLATE_DIR WORK_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [loom, jinjaDir, templateDir, work] = process.argv.slice(2);
const { Template } = await import(pathToFileURL(path.join(jinjaDir, "dist", "index.js")).href);

const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", description: "The city" } }, required: ["city"] },
  },
}];
const sets = {
  system: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: "Hello! How are you?" },
  ],
  multi_turn: [
    { role: "user", content: "What is 2+2?" },
    { role: "assistant", content: "2+2 is 4." },
    { role: "user", content: "And 3+3?\nAnswer briefly." },
  ],
  unicode: [
    { role: "user", content: "Grüße 👋 \"quoted\" back\\slash\ttab  " },
    { role: "assistant", content: "Bonjour — ça va?\n" },
    { role: "user", content: "日本語で" },
  ],
  content_parts: [
    { role: "system", content: [{ type: "text", text: "Be short." }] },
    { role: "user", content: [{ type: "text", text: "Describe" }, { type: "text", text: "this." }] },
  ],
  tools: [
    { role: "system", content: "You can call tools." },
    { role: "user", content: "What is the weather in Paris?" },
    { role: "assistant", content: "", tool_calls: [{ type: "function", id: "call12345",
      function: { name: "get_weather", arguments: { city: "Paris" } } }] },
    { role: "tool", name: "get_weather", tool_call_id: "call12345", content: "{\"temperature\": 21}" },
  ],
};

fs.mkdirSync(work, { recursive: true });
const files = fs.readdirSync(templateDir).filter((f) => f.endsWith(".jinja")).sort();
let renders = 0, same = 0;
const diffs = [], refOnly = [], bothRefuse = [];
for (const file of files) {
  const source = fs.readFileSync(path.join(templateDir, file), "utf8");
  const tmplPath = path.join(templateDir, file);
  let tmpl = null, parseError = null;
  try { tmpl = new Template(source); } catch (e) { parseError = e.message; }
  for (const [setName, messages] of Object.entries(sets)) {
    if (setName === "tools" && !source.includes("tools")) continue;
    for (const agp of [false, true]) {
      const label = `${file} ${setName} add_generation_prompt=${agp}`;
      const context = { messages, add_generation_prompt: agp, bos_token: "<s>", eos_token: "</s>" };
      if (setName === "tools") context.tools = tools;
      let expected = null, refError = parseError;
      if (tmpl) {
        try { expected = tmpl.render(context); } catch (e) { refError = e.message; }
      }
      const msgPath = path.join(work, "messages.json");
      fs.writeFileSync(msgPath, JSON.stringify(messages));
      const args = ["apply-template", "--chat-template", tmplPath, "--messages", msgPath, "--bos-token", "<s>", "--eos-token", "</s>"];
      if (agp) args.push("--add-generation-prompt");
      if (setName === "tools") {
        const toolsPath = path.join(work, "tools.json");
        fs.writeFileSync(toolsPath, JSON.stringify(tools));
        args.push("--tools", toolsPath);
      }
      let actual = null, loomError = null;
      try {
        actual = execFileSync(loom, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      } catch (e) {
        loomError = (e.stderr || e.message).trim();
      }
      renders++;
      if (refError !== null && loomError !== null) {
        bothRefuse.push(`${label}: reference: ${refError.slice(0, 100)} | loom: ${loomError.slice(0, 160)}`);
        continue;
      }
      if (refError !== null) {
        refOnly.push(`${label}: ${refError.slice(0, 150)}`);
        continue;
      }
      if (refError === null && loomError === null && actual === expected) { same++; continue; }
      let reason;
      if (loomError !== null) reason = `loom fails: ${loomError.slice(0, 200)}`;
      else {
        let i = 0;
        while (i < actual.length && actual[i] === expected[i]) i++;
        reason = `output differs at char ${i}: expected ${JSON.stringify(expected.slice(i, i + 60))}, got ${JSON.stringify(actual.slice(i, i + 60))}`;
      }
      diffs.push(`${label}: ${reason}`);
    }
  }
}
// Both refuse: the template raises (e.g. "system role not supported"), or
// both lack a feature. Reference-only failures: @huggingface/jinja lacks a
// Jinja feature the template uses (listed, not counted as differences).
for (const d of bothRefuse) console.log(`BOTH REFUSE ${d}`);
for (const d of refOnly) console.log(`REFERENCE ONLY FAILS ${d}`);
for (const d of diffs) console.log(`DIFF ${d}`);
console.log(`templates: ${files.length}, renders: ${renders}, equal: ${same}, both refuse: ${bothRefuse.length}, ` +
            `reference fails where loom renders: ${refOnly.length}, differ: ${diffs.length}`);
process.exit(diffs.length === 0 ? 0 : 1);
