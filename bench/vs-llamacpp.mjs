// Loom against llama.cpp on the same model files, with the same threads and
// batch, measured the way llama-bench measures: pp512 (one decode of 512
// random tokens), tg128 (128 single-token decodes), tg128 at each depth (the
// cache first filled with that many tokens, not timed). Both sides compute
// the last token's logits on every decode. llama.cpp is node-llama-cpp
// (which does not poll between graphs), or with LLAMA_BENCH set, llama.cpp's
// own llama-bench run once per round (a persistent thread pool polling at
// POLL, as its users run it). Repetitions alternate
// between the engines (round 1: llama.cpp then Loom, round 2: Loom then
// llama.cpp, ...) so that a change in the machine's load hits both alike.
// On a shared machine, other processes skew the engines differently (llama.cpp's
// threads spin at barriers and lose badly when a core is taken), so before
// each engine's turn the script waits, up to QUIET_WAIT_S seconds, until the
// CPUs have been idle for 3 s (at most 10% busy), and reports how busy they were.
// Writes one JSON line per engine, model and test, with every sample.
//
// usage: node vs-llamacpp.mjs LOOM_BINARY THREADS ROUNDS OUT.jsonl MODEL...
// env: QUIET_WAIT_S (default 600; 0: do not wait); DEPTHS (default 512, a
// comma list); POLL (default 50, both engines); FA (on|off, default off:
// fused attention in both engines); LLAMA_BENCH
// (path of llama-bench: use it instead of node-llama-cpp).
import {execFileSync} from "node:child_process";
import fs from "node:fs";
import os from "node:os";

const [loom, threadsArg, roundsArg, outPath, ...models] = process.argv.slice(2);
const threads = Number(threadsArg), rounds = Number(roundsArg);
const depths = (process.env.DEPTHS ?? "512").split(",").filter(Boolean).map(Number);
const poll = process.env.POLL ?? "50", fa = process.env.FA ?? "off", llamaBench = process.env.LLAMA_BENCH ?? "";
const nPrompt = 512, nGen = 128, batch = 512;
const tests = [{p: nPrompt, n: 0, d: 0}, {p: 0, n: nGen, d: 0}, ...depths.map(d => ({p: 0, n: nGen, d}))];
const testName = t => (t.p ? `pp${t.p}` : `tg${t.n}`) + (t.d ? ` @ d${t.d}` : "");

const llama = llamaBench ? null : await (await import("node-llama-cpp")).getLlama(
    {gpu: false, build: "never", logLevel: "error", maxThreads: threads});
const llamaVersion = llama ? `llama.cpp ${llama.llamaCppRelease.release} (node-llama-cpp ${process.env.NLC_VERSION ?? ""})`.replace(" )", ")")
                           : "";
let seed = 12345;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const randomTokens = (n, vocab) => Array.from({length: n}, () => Math.floor(random() * vocab));
const now = () => process.hrtime.bigint();

// llama.cpp: one model and context per model file, kept across rounds.
const llamaSides = new Map();
async function llamaSide(path) {
  if (!llamaSides.has(path)) {
    const model = await llama.loadModel({modelPath: path, gpuLayers: 0, useMmap: true});
    const context = await model.createContext({contextSize: Math.max(1024, Math.max(...depths) + nGen), batchSize: batch, threads: {ideal: threads, min: threads},
                                               flashAttention: fa === "on", sequences: 1});
    const side = {model, context, sequence: context.getSequence(), vocab: vocabSize(model)};
    // Warm-up, as llama-bench does: a prompt, then one generated token.
    await decode(side, randomTokens(nPrompt, side.vocab));
    await decode(side, randomTokens(1, side.vocab));
    llamaSides.set(path, side);
  }
  return llamaSides.get(path);
}
function vocabSize(model) {
  const md = model.fileInfo.metadata;
  const n = md.tokenizer?.ggml?.tokens?.length ?? md[model.architecture]?.vocab_size;
  if (!n) throw new Error(`${model.filename}: cannot tell the vocabulary size`);
  return n;
}
// Decodes `tokens`, asking for the last token's logits (greedy pick, unused).
async function decode(side, tokens) {
  const input = tokens.map((t, i) => i === tokens.length - 1
      ? [t, {generateNext: {token: true, options: {temperature: 0}}}] : t);
  await side.sequence.controlledEvaluate(input);
}
async function llamaRun(path, t) {
  const side = await llamaSide(path);
  await side.sequence.clearHistory();
  if (t.d) await side.sequence.evaluateWithoutGeneratingNewTokens(randomTokens(t.d, side.vocab));
  const prompt = randomTokens(t.p, side.vocab), gen = randomTokens(t.n, side.vocab);
  const t0 = now();
  // The prompt as llama-bench runs it: one batch, no sampling step.
  if (t.p) await side.sequence.evaluateWithoutGeneratingNewTokens(prompt);
  for (const token of gen) await decode(side, [token]);
  return Number(now() - t0);
}

// llama-bench and `loom bench` take the same options: `-r 1` per round, pp512
// and tg128, then tg128 at the depths.
function benchRound([binary, ...command], path, extra = []) {
  const common = [...command, "-m", path, "-t", String(threads), "-b", String(batch), "-ub", String(batch), "-r", "1", "-o", "jsonl",
                  "--poll", poll, ...extra];
  const run = more => execFileSync(binary, [...common, ...more], {maxBuffer: 1 << 26, stdio: ["ignore", "pipe", "pipe"]})
      .toString().split("\n").filter(l => l.startsWith("{")).map(l => JSON.parse(l));
  const out = run(["-p", String(nPrompt), "-n", String(nGen)]);
  if (depths.length) out.push(...run(["-p", "0", "-n", String(nGen), "-d", depths.join(","), "--no-warmup"]));
  return out;
}
const loomRound = path => benchRound([loom, "bench"], path, ["-fa", fa]);
const llamaBenchRound = path => benchRound([llamaBench], path, ["-fa", fa === "on" ? "1" : "0"]);

const results = new Map();  // engine|model|test -> {record, samples}
function add(engine, path, t, ns, template) {
  const key = `${engine}|${path}|${testName(t)}`;
  if (!results.has(key)) results.set(key, {record: template, samples: []});
  results.get(key).samples.push(ns);
}
const cpuInfo = os.cpus()[0]?.model ?? "unknown";
const load = () => os.loadavg().map(x => x.toFixed(2)).join(" ");

// Fraction of CPU time not idle over `ms`, from /proc/stat.
function cpuTimes() {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  return {idle: f[3] + (f[4] ?? 0), total: f.reduce((a, b) => a + b, 0)};
}
async function busyFraction(ms) {
  const a = cpuTimes();
  await new Promise(r => setTimeout(r, ms));
  const b = cpuTimes();
  return b.total > a.total ? 1 - (b.idle - a.idle) / (b.total - a.total) : 0;
}
const quietWait = Number(process.env.QUIET_WAIT_S ?? 600) * 1000;
const busySeen = [];
async function waitQuiet() {
  const t0 = Date.now();
  let busy = await busyFraction(3000);
  while (busy > 0.10 && Date.now() - t0 < quietWait) busy = await busyFraction(3000);
  busySeen.push(busy);
  return `waited ${((Date.now() - t0) / 1000).toFixed(0)} s, CPUs ${(busy * 100).toFixed(0)}% busy before`;
}
// Writes every sample so far to outPath (after each turn, so that an
// interrupted run keeps what it measured).
const mean = v => v.reduce((a, b) => a + b, 0) / v.length;
const stddev = v => v.length < 2 ? 0 : Math.sqrt(v.reduce((a, x) => a + (x - mean(v)) ** 2, 0) / (v.length - 1));
function writeResults() {
  const lines = [];
  for (const {record, samples} of results.values()) {
    const ts = samples.map(ns => (record.n_prompt + record.n_gen) * 1e9 / ns);
    lines.push(JSON.stringify({...record, repetitions: samples.length, avg_ns: mean(samples), stddev_ns: stddev(samples),
                               avg_ts: mean(ts), stddev_ts: stddev(ts), samples_ns: samples, samples_ts: ts}));
  }
  fs.writeFileSync(outPath, lines.join("\n") + "\n");
}
console.error(`load average before: ${load()}`);
for (let round = 0; round < rounds; ++round) {
  for (const path of models) {
    const order = round % 2 === 0 ? ["llama.cpp", "loom"] : ["loom", "llama.cpp"];
    for (const engine of order) {
      const quiet = await waitQuiet();
      const started = cpuTimes();
      if (engine === "loom" || llamaBench) {
        for (const r of engine === "loom" ? loomRound(path) : llamaBenchRound(path)) {
          const t = {p: r.n_prompt, n: r.n_gen, d: r.n_depth};
          add(engine, path, t, r.samples_ns[0], {engine, ...r});
        }
      } else {
        const side = await llamaSide(path);
        for (const t of tests) {
          const ns = await llamaRun(path, t);
          add("llama.cpp", path, t, ns, {
            engine: "llama.cpp", build_commit: llamaVersion, cpu_info: cpuInfo, devices: "CPU",
            model_filename: path, model_type: side.model.typeDescription, n_batch: batch, n_ubatch: batch,
            n_threads: threads, type_k: "f16", type_v: "f16", n_gpu_layers: 0, use_mmap: 1,
            flash_attn: side.context.flashAttention === true ? "on" : side.context.flashAttention === false ? "off" : "auto",
            n_prompt: t.p, n_gen: t.n, n_depth: t.d, test_time: new Date().toISOString()});
        }
      }
      const ended = cpuTimes();
      const used = 1 - (ended.idle - started.idle) / (ended.total - started.total);
      console.error(`round ${round + 1}/${rounds} ${engine} ${path}: ${quiet}, CPUs ${(used * 100).toFixed(0)}% busy`
                    + ` during (${threads} of ${os.cpus().length} cores are the engine's), load ${load()}`);
      writeResults();
    }
  }
}
console.error(`load average after: ${load()}; CPUs busy before each turn: at most `
              + `${(Math.max(...busySeen) * 100).toFixed(0)}%`);

if (llamaBench) console.error(`llama.cpp: ${llamaBench} (poll ${poll}, -fa ${fa})`);
for (const side of llamaSides.values()) {
  await side.context.dispose();
  await side.model.dispose();
}
