#!/usr/bin/env python3
"""Writes the fixtures of tests/runtime/quant_test.cpp (tests/runtime/data/quant/).

Their source is llama.cpp (commit de3ff81), the reference our quantized
formats must agree with:
  <type>.blocks   random blocks of the type (scales finite, some subnormal halves)
  <type>.dequant  gguf-py's dequantize() of those blocks, float32 little endian
  input.f32       rows of random floats (several magnitudes, an all-zero block)
  <type>.quant    llama.cpp's quantize_row_<type>_ref() of input.f32: the
                  function llama-quantize calls for these types without an
                  importance matrix (for iq4_nl quantize_iq4_nl() with no
                  importance matrix, which llama-quantize calls and whose
                  scale search the _ref function leaves out), built here from ggml-quants.c with the
                  flags llama.cpp's own build gives ggml-base (-O3 -std=gnu11,
                  no -march: no fused multiply-adds, software half rounding).

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 tools/quant/make_fixtures.py <llama.cpp> [out dir]
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

TYPES = {  # name: (gguf type, elements per block, bytes per block)
    "q8_0": (T.Q8_0, 32, 34),
    "q4_0": (T.Q4_0, 32, 18),
    "q4_k": (T.Q4_K, 256, 144),
    "q5_k": (T.Q5_K, 256, 176),
    "q6_k": (T.Q6_K, 256, 210),
    # Last, so that the fixtures of the types above keep their random draws.
    "q5_0": (T.Q5_0, 32, 22),
    "q5_1": (T.Q5_1, 32, 24),
    # Added after those, for the same reason.
    "q2_k": (T.Q2_K, 256, 84),
    "q3_k": (T.Q3_K, 256, 110),
    "iq4_nl": (T.IQ4_NL, 32, 18),
    "iq4_xs": (T.IQ4_XS, 256, 136),
}
# Byte offsets of each type's f16 scales within a block.
HALF_OFFSETS = {"q8_0": [0], "q4_0": [0], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208], "q5_0": [0], "q5_1": [0, 2],
                "q2_k": [80, 82], "q3_k": [108], "iq4_nl": [0], "iq4_xs": [0]}
BLOCKS = 6
INPUT_ROWS, INPUT_COLS = 4, 512

STUBS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
void ggml_abort(const char* file, int line, const char* fmt, ...) { fprintf(stderr, "%s:%d\n", file, line); abort(); }
size_t ggml_row_size(int type, long ne) { (void)type; (void)ne; abort(); }
const char* ggml_type_name(int type) { (void)type; return "?"; }
size_t ggml_type_size(int type) { (void)type; abort(); }
"""


def build_reference(llama: str) -> ctypes.CDLL:
    tmp = tempfile.mkdtemp()
    stubs = os.path.join(tmp, "stubs.c")
    with open(stubs, "w") as f:
        f.write(STUBS)
    lib = os.path.join(tmp, "libggml_quants.so")
    src = os.path.join(llama, "ggml", "src")
    subprocess.check_call(["cc", "-O3", "-std=gnu11", "-D_GNU_SOURCE", "-DNDEBUG", "-shared", "-fPIC",
                           "-I" + src, "-I" + os.path.join(llama, "ggml", "include"),
                           os.path.join(src, "ggml-quants.c"), stubs, "-lm", "-o", lib])
    return ctypes.CDLL(lib)


def random_blocks(rng: np.random.Generator, name: str) -> np.ndarray:
    _, _, size = TYPES[name]
    blocks = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
    for b in range(BLOCKS):
        for off in HALF_OFFSETS[name]:
            # Finite halves: normal ones of moderate size, and a subnormal one in the last block.
            exp = 0 if b == BLOCKS - 1 else int(rng.integers(5, 20))
            half = (int(rng.integers(0, 2)) << 15) | (exp << 10) | int(rng.integers(0, 1024))
            blocks[b, off:off + 2] = np.frombuffer(np.uint16(half).tobytes(), dtype=np.uint8)
    return blocks


def random_input(rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((INPUT_ROWS, INPUT_COLS)).astype(np.float32)
    x[1] *= np.float32(1e-3)
    x[2] = rng.uniform(-0.5, 3.0, INPUT_COLS).astype(np.float32)  # skewed: mins matter
    x[3, :32] = 0  # an all-zero block
    x[3, 40] = 1e4  # an outlier
    return x


def main() -> None:
    llama = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../../tests/runtime/data/quant")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(36)
    lib = build_reference(llama)
    x = random_input(rng)
    x.tofile(os.path.join(out, "input.f32"))
    for name, (qtype, elems, size) in TYPES.items():
        blocks = random_blocks(rng, name)
        blocks.tofile(os.path.join(out, name + ".blocks"))
        dequantize(blocks.reshape(-1), qtype).astype(np.float32).tofile(os.path.join(out, name + ".dequant"))
        q = np.zeros((INPUT_ROWS, INPUT_COLS // elems * size), dtype=np.uint8)
        for r in range(INPUT_ROWS):
            row = np.ascontiguousarray(x[r])
            src, dst = row.ctypes.data_as(ctypes.c_void_p), q[r].ctypes.data_as(ctypes.c_void_p)
            if name == "iq4_nl":
                lib.quantize_iq4_nl(src, dst, ctypes.c_int64(1), ctypes.c_int64(INPUT_COLS), ctypes.c_void_p(None))
            else:
                getattr(lib, "quantize_row_%s_ref" % name.replace("_k", "_K"))(src, dst, ctypes.c_int64(INPUT_COLS))
        q.tofile(os.path.join(out, name + ".quant"))


if __name__ == "__main__":
    main()
