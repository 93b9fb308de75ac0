#!/usr/bin/env python3
"""Writes the seeds of vocab_fuzz (fuzz/corpus-vocab/): GGUF files holding
only a tokenizer's metadata (a byte-level BPE vocabulary of the 256 byte
symbols, a few merges, Qwen's special tokens, a chat template), a healthy one
and damaged ones: a template nested far too deep, invalid UTF-8 in a token and
in the template, a type list shorter than the tokens, an eos id past the end.
usage: fuzz/make_vocab_corpus.py OUT_DIR"""
import os
import struct
import sys

U32, I32, STRING, ARRAY = 4, 5, 8, 9


def byte_symbols():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    sym, extra = {}, 0
    for b in range(256):
        if b in keep:
            sym[b] = chr(b)
        else:
            sym[b] = chr(256 + extra)
            extra += 1
    return [sym[b] for b in range(256)]


def gguf_string(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, kind, value):
    out = gguf_string(key) + struct.pack("<I", kind)
    if kind == STRING:
        return out + gguf_string(value)
    if kind == I32:
        return out + struct.pack("<i", value)
    elem, items = value
    out += struct.pack("<IQ", elem, len(items))
    for item in items:
        out += gguf_string(item) if elem == STRING else struct.pack("<i", item)
    return out


TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def vocab_file(tokens=None, types=None, template=TEMPLATE, eos=None):
    merges = ["Ġ t", "h e", "Ġt he", "i n"]
    tokens = tokens or byte_symbols() + ["Ġt", "he", "Ġthe", "in", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = types or [1] * (len(tokens) - 3) + [3, 3, 3]
    kvs = [kv("tokenizer.ggml.model", STRING, "gpt2"), kv("tokenizer.ggml.pre", STRING, "qwen2"),
           kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)), kv("tokenizer.ggml.token_type", ARRAY, (I32, types)),
           kv("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
           kv("tokenizer.ggml.eos_token_id", I32, len(tokens) - 1 if eos is None else eos),
           kv("tokenizer.chat_template", STRING, template)]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    tokens = byte_symbols() + ["Ġt", "he", "Ġthe", "in", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bad_token = [t.encode() for t in tokens]
    bad_token[0] = b"\xff"
    seeds = {
        "healthy.gguf": vocab_file(),
        "deep_not.gguf": vocab_file(template="{{ " + "not " * 3000 + "1 }}"),
        "deep_sum.gguf": vocab_file(template="{{ 1" + " + 1" * 2500 + " }}"),
        "deep_attr.gguf": vocab_file(template="{{ messages" + ".a" * 5000 + " }}"),
        "bad_utf8_token.gguf": vocab_file(tokens=bad_token),
        "bad_utf8_template.gguf": vocab_file(template=b"{{ '\xc0\x80' }}"),
        "short_types.gguf": vocab_file(types=[1] * 10),
        "eos_past_end.gguf": vocab_file(eos=100000),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
