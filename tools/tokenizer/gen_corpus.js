#!/usr/bin/env node
// Writes statebank's tokenizer identity corpus: deterministic (seeded PRNG, no
// clock, no environment), one JSON string per line.
//
//   node gen_corpus.js > tests/tokenizer/data/corpus.jsonl
//   node gen_corpus.js --exceptions > tests/tokenizer/data/js_exceptions.json
//
// The corpus covers prose with contractions, code, JSON, CJK, emoji (ZWJ,
// skin tones, flags), combining marks (NFC-composable and not), digits of
// several scripts, long whitespace runs, every added token of the Qwen3
// tokenizer, near-miss tokens, and random soup from long-stable Unicode
// blocks (the C++ side's Unicode tables are older than Node's; characters
// assigned after Unicode 13 are left out on purpose).
//
// Characters on which the JavaScript reference provably differs from Hugging
// Face's Rust tokenizers (Oniguruma regexes) never occur in the random parts.
// They occur only in the strings listed by --exceptions, each with its reason.
'use strict';

let seed = 0x5eedba7c;
function rnd() {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (n) => Math.floor(rnd() * n);
const pick = (a) => a[int(a.length)];
const cp = (c) => String.fromCodePoint(c);
const range = (lo, hi) => cp(lo + int(hi - lo + 1));

const ADDED = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|object_ref_start|>', '<|object_ref_end|>',
  '<|box_start|>', '<|box_end|>', '<|quad_start|>', '<|quad_end|>', '<|vision_start|>', '<|vision_end|>',
  '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>', '<tool_call>', '</tool_call>', '<|fim_prefix|>',
  '<|fim_middle|>', '<|fim_suffix|>', '<|fim_pad|>', '<|repo_name|>', '<|file_sep|>', '<tool_response>',
  '</tool_response>', '<think>', '</think>'];
const NEAR = ['<|im_start', 'im_end|>', '<|im_end|', '<think', '</think', '<think >', '< think>', '<|IM_START|>',
  '<tool_call', '<|endoftext|', '<<|im_end|>>', '<|<|im_start|>|>', '</', '<|', '|>'];

const WORDS = ('the of and to in is was he for it with as his on be at by I this had not are but from or have an ' +
  'they which one you were her all she there would their we him been has when who will more no if out so said ' +
  'what up its about into than them can only other new some could time these two may then do first any my now ' +
  'such like our over man me even most made after also did many before must through back years where much your ' +
  'way well down should because each just those people Mr how too little state good very make world still own ' +
  'see men work long get here between both life being under never day same another know while last might us ' +
  'great old year off come since against go came right used take three tokenizer cache bank restore snapshot ' +
  'HTTP API JSON GPU CPU naïve café résumé coöperate façade Zürich São Paulo Ångström Œuvre straße').split(' ');
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "n't", "'"];

function prose() {
  const n = 2 + int(12);
  let s = '';
  for (let i = 0; i < n; i++) {
    let w = pick(WORDS);
    if (rnd() < 0.15) w += pick(CONTRACTIONS);
    if (rnd() < 0.1) w = w.toUpperCase();
    if (rnd() < 0.1) w = w[0].toUpperCase() + w.slice(1);
    s += (i ? pick([' ', ' ', ' ', ' ', '  ', ', ', '. ', '; ', ' - ', ' (', ') ', '\n']) : '') + w;
  }
  return s + pick(['', '.', '!', '?', '...', ' ', '\n', '."', "'"]);
}

const IDENT = ['x', 'i', 'n', 'buf', 'self', 'value', 'count_', 'kMax', 'std::vector<int>', 'tokens', 'ids', 'cfg',
  'state', 'len', 'HashMap', 'fn', 'ptr', 'arr', 'DATA', 'é'];
function code() {
  const indent = pick(['', '  ', '    ', '\t', '        ', '\t\t']);
  const lines = [];
  const n = 1 + int(4);
  for (let i = 0; i < n; i++) {
    const a = pick(IDENT), b = pick(IDENT), k = int(1000);
    lines.push(pick([
      `${indent}for (int ${a} = 0; ${a} < ${k}; ++${a}) {`,
      `${indent}if ${a} == ${b}:`,
      `${indent}return ${a}->${b}[${k}] + ${b}.size();`,
      `${indent}def ${a}(${b}, *args, **kwargs):`,
      `${indent}const ${a} = await fetch(\`/v1/${b}?n=${k}\`);`,
      `${indent}#include <${a}.h>`,
      `${indent}// TODO(${b}): handle ${k} == 0 && ${a} != nullptr`,
      `${indent}${a} := map[string]int{"${b}": ${k}}`,
      `${indent}SELECT ${a}, COUNT(*) FROM ${b} WHERE id=${k};`,
      `${indent}}`, `${indent}`, `${indent}    ${a} += ${b} ** 2  # ${k}`,
      `${indent}println!("{:?} {}", ${a}, ${k});`, `${indent}<div class="${a}">${b}</div>`,
      `${indent}x=${k}>>2|${k}&0xFF^~${k}`, `${indent}@decorator(${k})`,
    ]));
  }
  return lines.join(pick(['\n', '\n', '\r\n', '\n\n']));
}

function jsonValue(depth) {
  const r = rnd();
  if (depth > 2 || r < 0.3) return pick([int(100000), -int(100), rnd() * 1000, true, false, null, pick(WORDS),
    pick(WORDS) + ' ' + pick(WORDS), '\u4f60\u597d', 'line\nbreak', 'tab\there', 'quote"d', 'back\\slash', '']);
  if (r < 0.6) return Array.from({ length: int(4) }, () => jsonValue(depth + 1));
  const o = {};
  for (let i = int(4); i >= 0; i--) o[pick(IDENT) + (i ? i : '')] = jsonValue(depth + 1);
  return o;
}
const json = () => JSON.stringify(jsonValue(0), null, pick([undefined, undefined, 2, 4, '\t']));

function cjk() {
  const n = 1 + int(20);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.45) s += range(0x4e00, 0x9fa5);
    else if (r < 0.55) s += range(0x3041, 0x3096);
    else if (r < 0.65) s += range(0x30a1, 0x30fa);
    else if (r < 0.75) s += range(0xac00, 0xd7a3);
    else if (r < 0.82) s += pick(['\u3002', '\uff0c', '\u3001', '\uff01', '\uff1f', '\u300c', '\u300d', '\uff08', '\uff09']);
    else if (r < 0.9) s += pick([' ', pick(WORDS), String(int(100)), '\u3000']);
    else s += range(0xff01, 0xff5e);  // fullwidth ASCII
  }
  return s;
}

const EMOJI = ['\u{1F600}', '\u{1F389}', '\u{1F44D}', '\u{1F44D}\u{1F3FD}', '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}',
  '\u2764\uFE0F', '\u{1F1EF}\u{1F1F5}', '\u{1F1FA}\u{1F1F8}', '\u{1F3F3}\uFE0F\u200D\u{1F308}', '\u{1F680}',
  '\u{1F9D1}\u200D\u{1F4BB}', '\u2615', '\u{1F525}', '\u{1F4AF}', '\u{1F64F}\u{1F3FB}', '#\uFE0F\u20E3', '\u00A9\uFE0F',
  '\u{1F970}', '\u{1F916}', '\u2728'];
function emoji() {
  let s = '';
  for (let i = 1 + int(8); i > 0; i--) s += pick([pick(EMOJI), pick(EMOJI), ' ', pick(WORDS), pick(WORDS) + ' ', '!']);
  return s;
}

// Combining sequences: some compose under NFC (e + acute, Hangul jamo), some
// do not (stacked marks, Devanagari, Arabic, Hebrew points).
const MARKED = ['e\u0301', 'a\u0300', 'o\u0308', 'n\u0303', 'c\u0327', 'A\u030a', 'u\u0308\u0301', 'a\u0323\u0302',
  'q\u0301', 'x\u0308\u0323', '\u1100\u1161', '\u1100\u1161\u11a8', '\u1112\u1161\u11ab', 'i\u0307', 'e\u0338',
  '\u0915\u094d\u0937', '\u0928\u092e\u0938\u094d\u0924\u0947', '\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627',
  '\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd', 'Vi\u1ec7t Nam', 'Vie\u0323\u0302t', '\u0e01\u0e34\u0e19', 'Z\u0351\u036b\u0343',
  '\u212b', '\u2126', 'K\u030c', '\u0061\u0315\u0300\u05ae\u0300\u0062', '\u00e9', 'caf\u00e9', 'cafe\u0301'];
function marked() {
  let s = '';
  for (let i = 1 + int(6); i > 0; i--) s += pick([pick(MARKED), pick(MARKED), ' ', pick(WORDS), '\u0301', '\u0308', '-']);
  return s;
}

function digits() {
  return pick([
    () => String(int(1e9)) + (rnd() < 0.5 ? '.' + int(1000) : ''),
    () => `${int(1000)},${String(int(1000)).padStart(3, '0')},${String(int(1000)).padStart(3, '0')}`,
    () => `v${int(10)}.${int(100)}.${int(1000)}-rc${int(5)}`,
    () => `${int(24)}:${int(60)}:${int(60)} ${int(2100)}-${1 + int(12)}-${1 + int(28)}`,
    () => '\u0661\u0662\u0663\u0664 \u06f1\u06f2\u06f3',  // Arabic-Indic and extended
    () => '\uff11\uff12\uff13\uff14\uff15',  // fullwidth digits
    () => 'x\u00b2 + y\u00b3 = z\u00b9 \u00bd \u00bc',  // No category
    () => '\u2160\u2161\u2162 \u216b \u3007',  // Nl: Roman numerals, ideographic zero
    () => '\u0967\u0968\u0969 \u0e51\u0e52\u0e53',  // Devanagari and Thai digits
    () => `${rnd() * 1e6}e-${int(30)}`, () => '0x' + int(0xffffff).toString(16).toUpperCase(),
    () => '3.14159265358979323846264338327950288419716939937510',
    () => '1'.repeat(1 + int(64)), () => `$${int(1e6)}.${int(100)} (${int(100)}%)`,
  ])();
}

const SPACES = [' ', '  ', '\t', '\n', '\r\n', '\n\n', '\u00a0', '\u3000', '\u2003', '\u2009', '\u202f', '\u205f',
  '\u2028', '\u2029', '\u000b', '\u000c', '\r', '\u1680', '\u200a'];
function whitespace() {
  return pick([
    () => ' '.repeat(1 + int(200)),
    () => '\n'.repeat(1 + int(50)),
    () => pick(WORDS) + ' '.repeat(int(40)) + pick(WORDS) + ' '.repeat(int(5)),
    () => '\t'.repeat(1 + int(20)) + pick(WORDS),
    () => Array.from({ length: 2 + int(10) }, () => pick(SPACES)).join(''),
    () => pick(WORDS) + Array.from({ length: 1 + int(6) }, () => pick(SPACES)).join('') + pick(WORDS),
    () => '  \n  \n\t\n ' + pick(WORDS) + ' \n',
    () => pick(WORDS) + '\n' + ' '.repeat(int(12)) + pick(['}', '.', pick(WORDS)]),
    () => ' '.repeat(int(4)) + '!!!' + '\r\n'.repeat(int(4)),
  ])();
}

function specials() {
  let s = '';
  for (let i = 1 + int(6); i > 0; i--) {
    s += pick([pick(ADDED), pick(ADDED), pick(NEAR), pick(WORDS), ' ', '\n', pick(WORDS) + ' ', '<', '>', '|']);
  }
  return s;
}

// Long-stable blocks (all assigned by Unicode 6.0): Latin, IPA, Greek,
// Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Thai, Georgian, Hangul
// jamo, general punctuation, symbols, box drawing, CJK, Hangul syllables.
const BLOCKS = [[0x20, 0x7e], [0xa1, 0x24f], [0x250, 0x2af], [0x370, 0x3ff], [0x400, 0x4ff], [0x531, 0x587],
  [0x5d0, 0x5ea], [0x621, 0x64a], [0x905, 0x939], [0xe01, 0xe3a], [0x10d0, 0x10fa], [0x2010, 0x2027],
  [0x20a0, 0x20b8], [0x2190, 0x21ff], [0x2200, 0x22ff], [0x2500, 0x257f], [0x4e00, 0x9fa5], [0xac00, 0xd7a3],
  [0x1f300, 0x1f5ff], [0x300, 0x36f]];
function soup() {
  let s = '';
  for (let i = 1 + int(16); i > 0; i--) {
    const [lo, hi] = pick(BLOCKS);
    s += range(lo, hi);
  }
  return s;
}

function mixed() {
  const parts = [prose, code, json, cjk, emoji, marked, digits, whitespace, specials, soup];
  let s = '';
  for (let i = 2 + int(2); i > 0; i--) s += pick(parts)() + pick(['', ' ', '\n']);
  return s;
}

function longOne() {
  return pick([
    () => ' '.repeat(1000 + int(3000)),
    () => 'a'.repeat(500 + int(1500)),
    () => Array.from({ length: 25 }, prose).join('\n'),
    () => Array.from({ length: 12 }, code).join('\n\n'),
    () => '\u4e00'.repeat(300) + cjk(),
    () => '1234567890'.repeat(100),
    () => '\n'.repeat(500) + 'x',
  ])();
}

// Strings on which @lenml/tokenizers differs from HF tokenizers. Each is
// asserted by the identity test to differ in ids (and to agree in text).
const NEL = 'U+0085 (NEL) is whitespace for Oniguruma\'s \\s (HF) but not for JavaScript\'s \\s, so the space run before it splits differently';
const BOM = 'U+FEFF (BOM) is whitespace for JavaScript\'s \\s but not for Oniguruma\'s \\s (HF), so the space run before it splits differently';
const EXCEPTIONS = [
  ['   \u0085abc', NEL],
  ['  \u0085\u0085 hello', NEL],
  ['x    \u0085\n', NEL],
  ['   \ufeffabc', BOM],
  ['if (a)   \ufeff{', BOM],
];

function corpus() {
  const gens = [prose, prose, code, json, cjk, emoji, marked, digits, whitespace, specials, soup, mixed];
  const out = [];
  // Every added token alone, doubled, and embedded.
  for (const t of ADDED) out.push(t, t + t, 'a' + t + 'b', ' ' + t + ' ', t + '\n', '\n' + t, 'x' + t.slice(0, -1));
  for (const t of NEAR) out.push(t, 'x ' + t + ' y');
  for (const m of MARKED) out.push(m);
  for (const e of EMOJI) out.push(e);
  for (const s of SPACES) out.push(s, s + s + s, 'a' + s + 'b', s + 'x');
  out.push('', ' ', 'a', "'", "'s", "I'm", "don't", "WE'LL", "y'all'd've", '<', '<|', '\u0301', '\u00a0');
  for (let i = 0; i < 16; i++) out.push(longOne());
  for (let i = 0; i < 10000; i++) out.push(pick(gens)());
  for (const [s] of EXCEPTIONS) out.push(s);
  return out;
}

if (process.argv.includes('--exceptions')) {
  process.stdout.write(JSON.stringify(EXCEPTIONS.map(([text, reason]) => ({ text, reason })), null, 1) + '\n');
} else {
  const lines = corpus().map((s) => JSON.stringify(s));
  process.stdout.write(lines.join('\n') + '\n');
}
