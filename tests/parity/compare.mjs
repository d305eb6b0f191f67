// Compares two tokenizer result files (llama.cpp's from tokenize.mjs and
// Loom's from `loom tokenize --batch`): ids without and with special-token
// parsing, decoded text, and BOS/EOS. Prints each mismatch, then
// "N passed, M failed"; exits 1 when anything failed.
//
// usage: node compare.mjs LABEL LLAMA.json LOOM.json
import {readFileSync} from "node:fs";

const [label, llamaPath, loomPath] = process.argv.slice(2);
const llama = JSON.parse(readFileSync(llamaPath, "utf8"));
const loom = JSON.parse(readFileSync(loomPath, "utf8"));
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
let passed = 0, failed = 0;
const check = (what, a, b) => {
    if (same(a, b)) {
        passed++;
        return;
    }
    failed++;
    console.log(`${label}: MISMATCH ${what}\n  llama.cpp: ${JSON.stringify(a)}\n  loom:      ${JSON.stringify(b)}`);
};

for (const key of ["bos", "eos", "add_bos"])
    check(key, llama[key], loom[key]);
if (llama.results.length !== loom.results.length) {
    console.log(`${label}: ${llama.results.length} results from llama.cpp but ${loom.results.length} from loom`);
    process.exit(1);
}
llama.results.forEach((a, i) => {
    const b = loom.results[i];
    const text = JSON.stringify(a.text).slice(0, 60);
    check(`ids of ${text}`, a.ids, b.ids);
    check(`ids (parse special) of ${text}`, a.ids_special, b.ids_special);
    check(`decoded ${text}`, a.decoded, b.decoded);
});
console.log(`${label}: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
