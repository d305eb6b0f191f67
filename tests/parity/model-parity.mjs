// Logit and generation parity between llama.cpp (node-llama-cpp) and Loom on
// generated models. For each model: the next-token distribution after a
// prompt (llama.cpp gives probabilities, so both sides compare logits
// shifted to a maximum of 0: log p - log p_max == logit - logit_max), and 32
// greedily generated tokens.
//
// usage: node model-parity.mjs LOOM_BINARY MODEL:TOLERANCE:GREEDY[:LOOM ARGS] ...
//   TOLERANCE  max |difference| allowed, relative to Loom's logit range
//   GREEDY     tokens of greedy generation that must match (0: report only)
//   LOOM ARGS  extra `loom eval` options, space-separated (e.g. "-ngl 99"), or
//              "llama.cpp=OTHER.gguf": compare llama.cpp on MODEL with llama.cpp
//              on OTHER (e.g. Loom's and llama.cpp's quantization of one source)
// llama.cpp runs each model once; Loom once per case.
import {execFileSync} from "node:child_process";
import {getLlama} from "node-llama-cpp";

const [loom, ...cases] = process.argv.slice(2);
const prompt = "Once upon a time, in a land far away, there lived";
const nGenerate = 32;
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
let passed = 0, failed = 0;

const reference = new Map();  // model path -> llama.cpp results

async function llamaCpp(modelPath) {
  if (reference.has(modelPath)) return reference.get(modelPath);
  const model = await llama.loadModel({modelPath, gpuLayers: 0});
  const tokens = model.tokenize(prompt);
  if (model.tokens.bos != null && tokens[0] !== model.tokens.bos) tokens.unshift(model.tokens.bos);

  // llama.cpp: distribution after the prompt, then greedy generation.
  let ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 2});
  const input = tokens.map((t, i) => i === tokens.length - 1
      ? [t, {generateNext: {probabilities: true, options: {temperature: 1, topK: 0, topP: 1, minP: 0}}}] : t);
  const evaluated = await ctx.getSequence().controlledEvaluate(input);
  const probs = evaluated[evaluated.length - 1].next.probabilities;
  await ctx.dispose();
  ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 2});
  const llamaGenerated = [];
  for await (const t of ctx.getSequence().evaluate(tokens, {temperature: 0, yieldEogToken: true})) {
    llamaGenerated.push(t);
    if (llamaGenerated.length === nGenerate) break;
  }
  await ctx.dispose();
  await model.dispose();
  const result = {tokens, probs, llamaGenerated};
  reference.set(modelPath, result);
  return result;
}

for (const spec of cases) {
  const [modelPath, tolerance, greedyNeeded, extra = ""] = spec.split(":");
  const {tokens, probs, llamaGenerated} = await llamaCpp(modelPath);

  let out;
  if (extra.startsWith("llama.cpp=")) {
    // llama.cpp on the other file, its log-probabilities as logits.
    const other = await llamaCpp(extra.slice("llama.cpp=".length));
    const entries = [...other.probs];
    const logits = new Array(Math.max(...entries.map(([t]) => t)) + 1).fill(-Infinity);
    for (const [t, p] of entries) logits[t] = p > 0 ? Math.log(p) : -Infinity;
    const finite = logits.filter(Number.isFinite), low = Math.min(...finite);
    out = {logits: [logits.map(v => Number.isFinite(v) ? v : low)], generated: other.llamaGenerated};
  } else {
    // Loom on the same tokens.
    const extraArgs = extra.split(" ").filter(a => a.length > 0);
    out = JSON.parse(execFileSync(loom, ["eval", "-m", modelPath, "--tokens", tokens.join(","),
                                         "--generate", String(nGenerate), "-t", "2", ...extraArgs],
                                  {maxBuffer: 1 << 28}).toString());
  }
  const logits = out.logits[out.logits.length - 1];
  const loomMax = Math.max(...logits), loomMin = Math.min(...logits);
  let refMax = -Infinity;
  for (const [, p] of probs) refMax = Math.max(refMax, Math.log(p));
  let maxErr = 0, compared = 0;
  for (const [t, p] of probs) {
    if (!(p > 0)) continue;  // underflowed in llama.cpp's float softmax
    maxErr = Math.max(maxErr, Math.abs((Math.log(p) - refMax) - (logits[t] - loomMax)));
    ++compared;
  }
  const rel = maxErr / (loomMax - loomMin);
  let same = 0;
  while (same < Math.min(llamaGenerated.length, out.generated.length) && llamaGenerated[same] === out.generated[same]) ++same;
  const ok = rel <= Number(tolerance) && compared > logits.length / 2 && same >= Math.min(Number(greedyNeeded), llamaGenerated.length);
  ok ? ++passed : ++failed;
  console.log(`${ok ? "ok  " : "FAIL"} ${modelPath}${extra ? " [" + extra + "]" : ""}: ${tokens.length} prompt tokens, logits max |diff| ${maxErr.toExponential(3)}`
      + ` = ${rel.toExponential(3)} of the range ${(loomMax - loomMin).toFixed(2)} (tolerance ${tolerance}),`
      + ` greedy: ${same}/${llamaGenerated.length} tokens equal (need ${greedyNeeded})`);
  if (same < llamaGenerated.length)
    console.log(`     llama.cpp ${JSON.stringify(llamaGenerated)}\n     loom      ${JSON.stringify(out.generated)}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
