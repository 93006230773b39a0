// Deterministic test corpus for the tokenizer: seeded PRNG, documents mixing prose in several
// scripts, CJK, Arabic, emoji and combining marks, code, digit and whitespace runs, \r\n mixes,
// contractions in mixed case. `node make_corpus.mjs OUT.txt` writes the documents concatenated.
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

// xorshift32 with a splitmix-style seed scramble; returns floats in [0, 1).
export function makeRng(seed) {
  let s = (seed ^ 0x9e3779b9) >>> 0 || 1;
  const next = () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),  // inclusive
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    chance: (p) => next() < p,
  };
}

const W = {
  en: "the of and to in is was for that with as on by at from his her they we you it this which are be not have one all their there been when would who more said will about what time up can out other into could some people than only its first new years like way over also after most state such just many before where because through city good world country government children however during system while".split(" "),
  de: "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden aus er hat daß sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur oder aber vor zur bis mehr durch man Straße Größe Übung schön fünf".split(" "),
  fr: "le de la et les des en un du une que est pour qui dans par plus pas au sur ne se ce il sont avec ou son été à où être très même après français garçon déjà naïve Noël cœur".split(" "),
  es: "el la de que y en a los se del las un por con no una su para es al lo como más pero sus le ya o este sí porque esta entre cuando muy sin sobre también me hasta año niño mañana corazón".split(" "),
  ru: "и в не на я быть он с что а по это она этот к но они мы как из у который то за свой что весь год от так о для ты же все тот мочь вы человек такой его сказать только или ещё бы себя один как уже до время если сам когда другой вот говорить наш мой знать стать при чтобы дело жизнь кто первый очень два день её новый рука даже во со раз где там под можно ну какой после их работа без самый потом надо хотеть ли слово идти большой должен место иметь ничто".split(" "),
  el: "και το να η της σε ο που με την τα για δεν του από είναι θα στο τον οι στην ένα των μια αλλά στη όταν ήταν πολύ εγώ έχει όλα κάτι αυτό Ελλάδα καλημέρα ευχαριστώ".split(" "),
  ar: "في من على إلى أن هذا التي الذي مع عن كان لا ما هذه كل بين قد ذلك بعد عند لم حتى إذا هو هي كانت أو غير وقد العربية السلام عليكم مرحبا كتاب مدرسة".split(" "),
  he: "של את על לא הוא זה עם כל גם היה אני מה אבל או כי יש הם אם רק עוד שלום ישראל ספר".split(" "),
  hi: "के में की है और से को एक पर यह भी था कि हैं नहीं लिए हो जो कर रहा गया तो किया इस ने वह हिन्दी भारत नमस्ते धन्यवाद".split(" "),
  th: "ที่ และ การ ใน ของ เป็น มี ได้ ไม่ ให้ จะ ว่า ความ กับ แล้ว คน นี้ ประเทศไทย สวัสดี ขอบคุณ".split(" "),
  ja: "私 は 日本語 を 話します これ それ あれ です ます でした 東京 カタカナ ひらがな 漢字 ありがとう こんにちは コンピューター ソフトウェア".split(" "),
  ko: "나는 한국어 를 합니다 안녕하세요 감사합니다 서울 대한민국 컴퓨터 프로그램 사랑 사람 오늘 내일".split(" "),
  zh: "的 一 是 不 了 人 我 在 有 他 这 中 大 来 上 国 个 到 说 们 为 子 和 你 地 出 道 也 时 年 中华人民共和国 北京 计算机 程序 你好 世界".split(" "),
};
const EMOJI = ["😀", "😂", "🥲", "❤️", "👍", "👍🏽", "👩🏿‍💻", "👨‍👩‍👧‍👦", "🇯🇵", "🇺🇸", "🏳️‍🌈", "1️⃣", "#️⃣", "🎉", "🔥", "✨", "🚀", "🐍",
  "🤖", "🧑‍🚀", "🙋‍♀️", "☕", "⚡", "🌍", "💯", "🫶", "😶‍🌫️", "🧠", "🍣", "👋🏻"];
const CONTRACTIONS = ["I'M", "i'm", "You'RE", "you're", "WE'LL", "we'Ll", "THEY'VE", "they'vE", "It'S", "it's", "DON'T", "don't",
  "She'D", "HE'D", "can'T", "Won't", "y'all", "'tis", "O'Neill", "rock'n'roll", "John's", "JOHN'S", "isn’t", "WASN’T", "l'été", "L'ÉTÉ"];
const PUNCT = [".", ",", "!", "?", ";", ":", "…", " —", " –", "(", ")", "\"", "“", "”", "«", "»", "„", "'", "¿", "¡", "、", "。", "！", "？", "،", "؟"];
// Ranges of long-assigned code points (letters, marks, symbols) for random characters.
const RANGES = [[0x00a1, 0x00ff], [0x0100, 0x017e], [0x0180, 0x024f], [0x0250, 0x02af], [0x0370, 0x03ff], [0x0400, 0x04ff],
  [0x0531, 0x0556], [0x0561, 0x0586], [0x05d0, 0x05ea], [0x0621, 0x064a], [0x0660, 0x0669], [0x0905, 0x0939], [0x0966, 0x096f],
  [0x0e01, 0x0e2e], [0x10d0, 0x10fa], [0x2000, 0x200a], [0x2010, 0x2027], [0x2030, 0x205e], [0x20a0, 0x20bf], [0x2100, 0x2129],
  [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2460, 0x24ff], [0x2500, 0x257f], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0xff01, 0xff5e], [0x1f300, 0x1f5ff], [0x1d400, 0x1d4ff]];
const SKIP = new Set([0x017f, 0x212a, 0xfeff, 0x0085]);  // case-fold/\s edge cases where JS regex differs from tiktoken

function words(r, lang, n) {
  const out = [];
  for (let i = 0; i < n; ++i) {
    let w = r.pick(W[lang]);
    if (i === 0 || r.chance(0.05)) w = w[0].toUpperCase() + w.slice(1);
    else if (r.chance(0.02)) w = w.toUpperCase();
    out.push(w);
    if (r.chance(0.08)) out.push(r.pick(PUNCT));
  }
  const sep = ["zh", "ja", "th"].includes(lang) && r.chance(0.6) ? "" : " ";
  return out.join(sep) + r.pick([".", "!", "?", "。", "", "…"]);
}

function randomChars(r, n) {
  let s = "";
  while (n-- > 0) {
    const [lo, hi] = r.pick(RANGES);
    const cp = r.int(lo, hi);
    if (!SKIP.has(cp)) s += String.fromCodePoint(cp);
  }
  return s;
}

function combining(r) {
  let s = "";
  for (let i = r.int(1, 12); i > 0; --i) {
    s += r.pick("aeiouAEIOUnNcCzZ");
    for (let k = r.int(0, r.chance(0.1) ? 8 : 2); k > 0; --k) s += String.fromCodePoint(r.int(0x0300, 0x036f));
    if (r.chance(0.2)) s += " ";
  }
  const ar = r.pick(W.ar);  // Arabic with harakat
  return s + " " + [...ar].map((c) => c + (r.chance(0.5) ? String.fromCodePoint(r.int(0x064b, 0x0652)) : "")).join("");
}

function ident(r) {
  const parts = [];
  for (let i = r.int(1, 3); i > 0; --i) parts.push(r.pick(W.en));
  const style = r.int(0, 3);
  if (style === 0) return parts.join("_");
  if (style === 1) return parts.map((p, i) => (i ? p[0].toUpperCase() + p.slice(1) : p)).join("");
  if (style === 2) return parts.join("_").toUpperCase();
  return parts.join("") + r.int(0, 999);
}

function code(r) {
  const ind = r.pick(["  ", "    ", "\t"]);
  const nl = r.chance(0.3) ? "\r\n" : "\n";
  const f = ident(r), a = ident(r), b = ident(r);
  const templates = [
    `def ${f}(${a}, ${b}=None):${nl}${ind}"""${words(r, "en", 6)}"""${nl}${ind}if ${b} is None:${nl}${ind}${ind}return [x**2 for x in range(${r.int(0, 99999)})]${nl}${ind}return {'${a}': ${a}, "${b}": ${b}}  # ${words(r, "en", 4)}${nl}`,
    `int ${f}(const char* ${a}, size_t ${b}) {${nl}${ind}for (size_t i = 0; i < ${b}; ++i) {${nl}${ind}${ind}if (${a}[i] == '\\n') return -${r.int(1, 9)};${nl}${ind}}${nl}${ind}return 0x${r.int(0, 0xffffff).toString(16).toUpperCase()};${nl}}${nl}`,
    `const ${f} = async (${a}) => {${nl}${ind}const res = await fetch(\`/api/\${${a}}?q=${r.int(0, 1e6)}\`);${nl}${ind}return res.json(); // ${words(r, "en", 3)}${nl}};${nl}`,
    `{"${a}": [${r.int(0, 1e9)}, ${r.next().toFixed(6)}, -${r.int(0, 99)}e${r.int(1, 30)}], "${b}": {"ok": true, "msg": "${words(r, r.pick(["en", "fr", "ru", "zh"]), 5)}"}}${nl}`,
    `<div class="${a}" id='${b}'>${nl}${ind}<p>${words(r, "de", 8)}</p>&nbsp;&amp;${nl}</div>${nl}`,
    `$ ${f} --${a}=${r.int(0, 512)} | grep -E '^[a-z]+$' >> /tmp/${b}.log 2>&1 && echo "done: $?"${nl}`,
  ];
  return r.pick(templates);
}

function digits(r) {
  const kinds = [
    () => Array.from({ length: r.int(1, 300) }, () => r.int(0, 9)).join(""),
    () => r.int(1, 999) + "," + String(r.int(0, 999)).padStart(3, "0") + "," + String(r.int(0, 999)).padStart(3, "0") + "." + r.int(0, 99),
    () => `+1 (${r.int(200, 999)}) ${r.int(100, 999)}-${r.int(1000, 9999)}`,
    () => `${r.int(1900, 2099)}-${String(r.int(1, 12)).padStart(2, "0")}-${String(r.int(1, 28)).padStart(2, "0")}T${r.int(10, 23)}:${r.int(10, 59)}:00Z`,
    () => `abc${r.int(0, 1e6)}def${r.int(0, 99)}GHI`,
    () => "٠١٢٣٤٥٦٧٨٩".slice(r.int(0, 5)) + " ०१२३४५६७८९ " + "①②③ ⅣⅫ ½¾",
    () => `v${r.int(0, 9)}.${r.int(0, 99)}.${r.int(0, 999)}-rc${r.int(1, 9)}`,
  ];
  return r.pick(kinds)();
}

function whitespace(r) {
  const pieces = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2003", "\u2028", "\f", "\v"];
  let s = "";
  const kind = r.int(0, 3);
  if (kind === 0) s = " ".repeat(r.int(1, 400));
  else if (kind === 1) s = "\r\n".repeat(r.int(1, 40));
  else if (kind === 2) for (let i = r.int(1, 60); i > 0; --i) s += r.pick(pieces);
  else s = "\t".repeat(r.int(1, 20)) + " ".repeat(r.int(0, 20)) + "\n";
  return s;
}

function fragment(r) {
  const k = r.int(0, 15);
  if (k <= 4) return words(r, r.pick(Object.keys(W)), r.int(3, 60));
  if (k === 5) return r.pick(CONTRACTIONS) + " " + words(r, "en", r.int(1, 5)) + " " + r.pick(CONTRACTIONS);
  if (k === 6) return Array.from({ length: r.int(1, 12) }, () => r.pick(EMOJI)).join(r.chance(0.5) ? "" : " ");
  if (k === 7) return combining(r);
  if (k === 8 || k === 9) return code(r);
  if (k === 10) return digits(r);
  if (k === 11) return whitespace(r);
  if (k === 12) return randomChars(r, r.int(1, 40));
  if (k === 13) return r.pick(["<|endoftext|>", "<|start|>", "<|endofprompt|>", "<|", "|>", "<|return|>"]) + words(r, "en", 3);
  if (k === 14) return "-".repeat(r.int(1, 80)) + r.pick(["/", "//", "\n", "\r\n", "/\n"]) + "=".repeat(r.int(0, 40));
  return words(r, "en", r.int(5, 30)).toUpperCase();
}

// Documents of 50 B .. 64 KiB until totalBytes of UTF-8 are reached.
export function makeCorpus(seed = 20250807, totalBytes = 1_200_000) {
  const r = makeRng(seed);
  const docs = [];
  let bytes = 0;
  while (bytes < totalBytes) {
    const target = r.chance(0.02) ? r.int(16384, 65536) : r.int(50, 2000);
    let doc = "";
    while (Buffer.byteLength(doc) < target) doc += fragment(r) + r.pick([" ", " ", "\n", "\r\n", "", "\n\n", "  "]);
    docs.push(doc);
    bytes += Buffer.byteLength(doc);
  }
  return docs;
}

// Plain English prose and code only (the easy case for every tokenizer), for the benchmark.
export function makeEnglish(seed = 1234, totalBytes = 1_200_000) {
  const r = makeRng(seed);
  let text = "";
  while (text.length < totalBytes) text += (r.chance(0.8) ? words(r, "en", r.int(5, 40)) : code(r)) + r.pick([" ", "\n", "\n\n"]);
  return text;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = process.argv[2] ?? "corpus.txt";
  writeFileSync(out, makeCorpus().join(""));
}
