// Tokenizes every string of a JSON array with llama.cpp (through the
// node-llama-cpp package, which ships prebuilt llama.cpp libraries), for
// each model given, and writes the ids as JSON in the format
// `loom tokenize --batch` prints: OUT_DIR/NAME.llama.json for MODEL NAME.gguf
// (one process for all models: starting llama.cpp is the slow part). A model
// llama.cpp cannot load gets NAME.llama.err instead, and the exit status is 1.
//
// usage: node tokenize.mjs NODE_MODULES_DIR STRINGS.json OUT_DIR MODEL.gguf...
import {readFileSync, writeFileSync} from "node:fs";
import {basename, join} from "node:path";
import {pathToFileURL} from "node:url";

const [modulesDir, stringsPath, outDir, ...modelPaths] = process.argv.slice(2);
if (modelPaths.length === 0) {
    console.error("usage: node tokenize.mjs NODE_MODULES_DIR STRINGS.json OUT_DIR MODEL.gguf...");
    process.exit(2);
}
const {getLlama, LlamaLogLevel} =
    await import(pathToFileURL(join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const strings = JSON.parse(readFileSync(stringsPath, "utf8"));
let failed = 0;
for (const modelPath of modelPaths) {
    const name = basename(modelPath, ".gguf");
    let model;
    try {
        model = await llama.loadModel({modelPath, vocabOnly: true});
    } catch (error) {
        writeFileSync(join(outDir, `${name}.llama.err`), `${error}\n`);
        failed++;
        continue;
    }
    const results = strings.map((text) => {
        const ids = model.tokenize(text, false);
        return {
            text,
            ids,
            ids_special: model.tokenize(text, true),
            decoded: model.detokenize(ids, false),
        };
    });
    writeFileSync(join(outDir, `${name}.llama.json`), JSON.stringify({
        n_vocab: null,
        bos: model.tokens.bos,
        eos: model.tokens.eos,
        add_bos: model.tokens.shouldPrependBosToken,
        results,
    }, null, 2) + "\n");
    await model.dispose();
}
await llama.dispose();
process.exit(failed === 0 ? 0 : 1);
