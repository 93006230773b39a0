// Encode throughput of js-tiktoken o200k_base on the test corpus (make_corpus.mjs, concatenated).
// `node bench_tiktoken.mjs [RUNS] [CORPUS_OUT.txt] [mixed|english]`: prints best MB/s as JSON; also
// writes the text so that `mxserve tokenize --bench RUNS --text-file CORPUS_OUT.txt` times the same bytes.
// mixed = the test corpus (all scripts, long runs); english = plain English prose and code.
import { writeFileSync } from "node:fs";
import { getEncoding } from "js-tiktoken";
import { makeCorpus, makeEnglish } from "./make_corpus.mjs";

const runs = Number(process.argv[2] ?? 5);
const text = process.argv[4] === "english" ? makeEnglish() : makeCorpus().join("");
if (process.argv[3]) writeFileSync(process.argv[3], text);
const bytes = Buffer.byteLength(text);
const enc = getEncoding("o200k_base");
enc.encode("warm up the regex and the rank maps", [], []);
let best = Infinity, tokens = 0;
for (let r = 0; r < runs; ++r) {
  const t0 = process.hrtime.bigint();
  tokens = enc.encode(text, [], []).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
console.log(JSON.stringify({ bytes, tokens, runs, best_seconds: +best.toFixed(6), mb_per_s: +(bytes / 1e6 / best).toFixed(2) }));
