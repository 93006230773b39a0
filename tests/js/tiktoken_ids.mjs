// Reference token ids from js-tiktoken's o200k_base for the corpus of make_corpus.mjs.
// `node tiktoken_ids.mjs OUT_DIR` writes OUT_DIR/corpus.jsonl: one {"text", "ids", "allow_special"}
// per line (specials as text; a few extra lines with the o200k specials allowed).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { getEncoding } from "js-tiktoken";
import { makeCorpus } from "./make_corpus.mjs";

const outDir = process.argv[2] ?? ".";
const enc = getEncoding("o200k_base");
const lines = [];
for (const text of makeCorpus()) {
  lines.push(JSON.stringify({ text, ids: enc.encode(text, [], []), allow_special: false }));
}
const withSpecials = [
  "<|endoftext|>",
  "Hello<|endoftext|>world<|endofprompt|> tail",
  "a<|endoftext|><|endoftext|>\n<|endofprompt|><|endoftext",
  "<|start user|> then <|endoftext|> done <|endoftext|",
];
for (const text of withSpecials) {
  lines.push(JSON.stringify({ text, ids: enc.encode(text, "all"), allow_special: true }));
}
writeFileSync(join(outDir, "corpus.jsonl"), lines.join("\n") + "\n");
