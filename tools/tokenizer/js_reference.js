#!/usr/bin/env node
// Independent reference for statebank's tokenizer: the JavaScript tokenizer of
// npm @lenml/tokenizers (a port of transformers.js), run on the same
// tokenizer.json / tokenizer_config.json as the C++ code.
//
//   node js_reference.js encode TOKENIZER_DIR < strings.jsonl > out.jsonl
//       one JSON string per input line -> {"ids": [...], "text": decode(ids)}
//   node js_reference.js decode TOKENIZER_DIR < ids.jsonl > out.jsonl
//       one JSON id array per input line -> the decoded JSON string
//   node js_reference.js bench TOKENIZER_DIR CORPUS.jsonl SECONDS
//       encodes the corpus repeatedly for about SECONDS of CPU time, prints one
//       JSON line {"bytes", "cpu_seconds", "mb_per_s", "first_pass_mb_per_s"}
'use strict';
const fs = require('fs');
const path = require('path');
const { TokenizerLoader } = require(path.join(__dirname, '../npm/node_modules/@lenml/tokenizers'));

function load(dir) {
  const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  return TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
}

function readLines(file) {
  const text = fs.readFileSync(file, 'utf8');
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

const encode = (tok, s) => tok.encode(s, { add_special_tokens: false });
const decode = (tok, ids) =>
  ids.length === 0 ? '' : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });

function main() {
  const [mode, dir, ...rest] = process.argv.slice(2);
  if (!mode || !dir) {
    process.stderr.write('usage: js_reference.js encode|decode|bench TOKENIZER_DIR ...\n');
    process.exit(2);
  }
  const tok = load(dir);
  if (mode === 'encode' || mode === 'decode') {
    const out = [];
    for (const line of readLines(0)) {
      const v = JSON.parse(line);
      if (mode === 'encode') {
        const ids = encode(tok, v);
        out.push(JSON.stringify({ ids, text: decode(tok, ids) }));
      } else {
        out.push(JSON.stringify(decode(tok, v)));
      }
    }
    fs.writeSync(1, out.join('\n') + '\n');
    return;
  }
  if (mode === 'bench') {
    const strings = readLines(rest[0]).map((l) => JSON.parse(l));
    const seconds = Number(rest[1] || 3);
    const bytes = strings.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
    // CPU seconds of this process (user + system), as the C++ bench measures.
    const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
    let c0 = cpu();
    for (const s of strings) encode(tok, s);
    const first = cpu() - c0;
    let passes = 0;
    c0 = cpu();
    let elapsed = 0;
    while (elapsed < seconds) {
      for (const s of strings) encode(tok, s);
      ++passes;
      elapsed = cpu() - c0;
    }
    process.stdout.write(JSON.stringify({
      bytes: bytes * passes, cpu_seconds: elapsed, mb_per_s: (bytes * passes) / elapsed / 1e6,
      first_pass_mb_per_s: bytes / first / 1e6,
    }) + '\n');
    return;
  }
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}

main();
