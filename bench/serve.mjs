// loom serve against llama.cpp's llama-server on the same model, slots,
// context and threads: total generated tokens/s and time to first token
// (p50, p99) with 1, 4 and 16 concurrent clients. Each client sends
// streamed /v1/completions requests one after another (distinct prompts,
// temperature 0, max_tokens fixed); tokens are counted from each answer's
// usage. Both servers run all along; the order of the engines alternates
// with every round, so a change in the machine's load hits both alike.
// Prints a side-by-side table with ratios (Loom over llama-server; for
// time to first token below 1 is better) and writes every sample as JSON
// lines. Byte tokens <0x80>..<0xFF> get logit_bias -100 in every request to
// both servers: a model with random weights (loom make-model) emits them
// alone, and llama-server's output parser answers a lone UTF-8 byte with
// HTTP 500 ("does not match the expected Content-only format").
//
// usage: bench/serve --loom LOOM --llama-server LLAMA_SERVER -m MODEL
//          [-np 4] [-c 2048] [-t THREADS] [--clients 1,4,16] [--requests 2]
//          [--max-tokens 32] [--prompt-words 24] [--rounds 2] [--out FILE.jsonl]
// --requests: requests per client in each measurement.
import {execFileSync, spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";

function parseArgs(argv) {
  const a = {np: 4, c: 2048, t: os.availableParallelism(), clients: "1,4,16", requests: 2, maxTokens: 32,
             promptWords: 24, rounds: 2, out: ""};
  const names = {"--loom": "loom", "--llama-server": "llamaServer", "-m": "model", "-np": "np", "-c": "c", "-t": "t",
                 "--clients": "clients", "--requests": "requests", "--max-tokens": "maxTokens",
                 "--prompt-words": "promptWords", "--rounds": "rounds", "--out": "out"};
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === "--help" || argv[i] === "-h") usage(0);
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) usage(1, `unknown option or missing value: ${argv[i]}`);
    a[key] = typeof a[key] === "number" ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!a.loom || !a.llamaServer || !a.model) usage(1, "--loom, --llama-server and -m are required");
  for (const f of [a.loom, a.llamaServer, a.model]) if (!fs.existsSync(f)) usage(1, `${f}: no such file`);
  a.clients = a.clients.split(",").map(Number);
  return a;
}
function usage(code, why) {
  if (why) console.error(`bench/serve: ${why}`);
  const lines = fs.readFileSync(new URL(import.meta.url)).toString().split("\n");
  console.error(lines.slice(0, lines.findIndex(l => !l.startsWith("//"))).map(l => l.slice(3)).join("\n"));
  process.exit(code);
}

const freePort = () => new Promise((resolve, reject) => {
  const s = net.createServer();
  s.on("error", reject);
  s.listen(0, "127.0.0.1", () => { const {port} = s.address(); s.close(() => resolve(port)); });
});
const sleep = ms => new Promise(r => setTimeout(r, ms));

async function startServer(name, exe, args, port) {
  const log = fs.openSync(`/tmp/bench-serve-${name}-${process.pid}.log`, "w");
  const child = spawn(exe, args, {stdio: ["ignore", log, log]});
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`${name} exited; see /tmp/bench-serve-${name}-${process.pid}.log`);
    try {
      const r = await fetch(base + "/health");
      if (r.ok) return {name, child, base};
    } catch {}
    await sleep(100);
  }
  throw new Error(`${name} did not become healthy in 120 s`);
}

// One streamed request: time to the first generated text, and the tokens.
async function request(base, prompt, maxTokens) {
  const t0 = performance.now();
  const res = await fetch(base + "/v1/completions", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({prompt, max_tokens: maxTokens, temperature: 0, stream: true, logit_bias: banned,
                          stream_options: {include_usage: true}}),
  });
  if (!res.ok) throw new Error(`${base}: ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = "", ttft = null, tokens = null, text = "";
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, {stream: true});
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6));
      if (chunk.error) throw new Error(`${base}: ${JSON.stringify(chunk.error)}`);
      const piece = chunk.choices?.[0]?.text ?? "";
      if (piece && ttft === null) ttft = performance.now() - t0;
      text += piece;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
    }
  }
  if (tokens === null) throw new Error(`${base}: no usage in the stream`);
  return {ttft: ttft ?? performance.now() - t0, tokens, text};
}

const words = ["time", "river", "stone", "light", "garden", "north", "paper", "engine", "winter", "song", "market",
               "glass", "forest", "signal", "harbor", "copper"];
let promptSerial = 0;
function prompt(n) {  // each prompt differs from every other one from its first word
  const id = promptSerial++;
  return `Request ${id}: ` + Array.from({length: n}, (_, i) => words[(id * 7 + i * (3 + id % 5)) % words.length]).join(" ");
}

async function measure(server, clients, a) {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({length: clients}, async () => {
    const out = [];
    for (let r = 0; r < a.requests; r++) out.push(await request(server.base, prompt(a.promptWords), a.maxTokens));
    return out;
  }));
  const seconds = (performance.now() - t0) / 1000;
  const all = results.flat();
  return {tokens: all.reduce((s, r) => s + r.tokens, 0), seconds, ttft: all.map(r => r.ttft)};
}

const percentile = (xs, p) => {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil(p / 100 * s.length) - 1)];
};

const a = parseArgs(process.argv.slice(2));
// The model's byte tokens of 0x80..0xFF, from its vocabulary (loom inspect).
const vocab = JSON.parse(execFileSync(a.loom, ["inspect", a.model, "--json", "--no-tensors"],
                                      {maxBuffer: 1 << 30})).metadata["tokenizer.ggml.tokens"] ?? [];
const banned = Object.fromEntries(vocab.flatMap((t, id) => /^<0x[89A-Fa-f][0-9A-Fa-f]>$/.test(t) ? [[id, -100]] : []));
const [loomPort, llamaPort] = [await freePort(), await freePort()];
const common = ["-m", a.model, "-np", String(a.np), "-c", String(a.c), "-t", String(a.t)];
const servers = [
  await startServer("loom", a.loom, ["serve", ...common, "--port", String(loomPort)], loomPort),
  await startServer("llama-server", a.llamaServer,
                    [...common, "-tb", String(a.t), "--port", String(llamaPort), "--host", "127.0.0.1", "-ngl", "0"],
                    llamaPort),
];
const stop = () => servers.forEach(s => s.child.kill());
process.on("exit", stop);
try {
  // Warm-up, and a check that both answer the same prompt alike at temperature 0.
  const check = prompt(a.promptWords);
  const answers = [];
  for (const s of servers) answers.push((await request(s.base, check, a.maxTokens)).text);
  const same = answers[0] === answers[1];
  const samples = [];
  for (let round = 0; round < a.rounds; round++)
    for (const clients of a.clients)
      for (const s of round % 2 ? [...servers].reverse() : servers) {
        const m = await measure(s, clients, a);
        samples.push({engine: s.name, clients, round, ...m});
        process.stderr.write(`round ${round + 1}/${a.rounds}, ${clients} clients, ${s.name}: ` +
                             `${(m.tokens / m.seconds).toFixed(1)} tokens/s\n`);
      }
  if (a.out) fs.writeFileSync(a.out, samples.map(s => JSON.stringify({...s, args: a})).join("\n") + "\n");

  console.log(`model ${a.model}, -np ${a.np}, -c ${a.c}, -t ${a.t}, ${a.requests} requests per client of ` +
              `${a.maxTokens} tokens at temperature 0, ${a.rounds} rounds (alternating order)`);
  console.log(`same greedy text from both on a check prompt: ${same ? "yes" : "no"}`);
  console.log("| clients | tokens/s Loom | tokens/s llama-server | ratio | TTFT p50 Loom | TTFT p50 llama-server | ratio " +
              "| TTFT p99 Loom | TTFT p99 llama-server | ratio |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const ms = x => `${x.toFixed(0)} ms`;
  for (const clients of a.clients) {
    const of = name => samples.filter(s => s.engine === name && s.clients === clients);
    const [l, r] = ["loom", "llama-server"].map(name => {
      const ss = of(name);
      const ttft = ss.flatMap(s => s.ttft);
      return {rate: ss.reduce((t, s) => t + s.tokens, 0) / ss.reduce((t, s) => t + s.seconds, 0),
              p50: percentile(ttft, 50), p99: percentile(ttft, 99)};
    });
    console.log(`| ${clients} | ${l.rate.toFixed(1)} | ${r.rate.toFixed(1)} | ${(l.rate / r.rate).toFixed(2)} ` +
                `| ${ms(l.p50)} | ${ms(r.p50)} | ${(l.p50 / r.p50).toFixed(2)} ` +
                `| ${ms(l.p99)} | ${ms(r.p99)} | ${(l.p99 / r.p99).toFixed(2)} |`);
  }
} finally {
  stop();
}
