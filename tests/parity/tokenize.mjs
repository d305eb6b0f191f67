// Tokenizes every string of a JSON array with llama.cpp (through the
// node-llama-cpp package, which ships prebuilt llama.cpp libraries) and
// prints the ids as JSON, in the format `loom tokenize --batch` prints.
//
// usage: node tokenize.mjs NODE_MODULES_DIR MODEL.gguf STRINGS.json
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [modulesDir, modelPath, stringsPath] = process.argv.slice(2);
if (!stringsPath) {
    console.error("usage: node tokenize.mjs NODE_MODULES_DIR MODEL.gguf STRINGS.json");
    process.exit(2);
}
const {getLlama, LlamaLogLevel} =
    await import(pathToFileURL(join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, vocabOnly: true});
const strings = JSON.parse(readFileSync(stringsPath, "utf8"));

const results = strings.map((text) => {
    const ids = model.tokenize(text, false);
    return {
        text,
        ids,
        ids_special: model.tokenize(text, true),
        decoded: model.detokenize(ids, false),
    };
});
console.log(JSON.stringify({
    n_vocab: null,
    bos: model.tokens.bos,
    eos: model.tokens.eos,
    add_bos: model.tokens.shouldPrependBosToken,
    results,
}, null, 2));
await model.dispose();
await llama.dispose();
