# Sourced by the scripts that use the cached llama.cpp build (tools/xcheck,
# bench/compare_llama.sh). Sets:
#   LLAMA_DIR  the llama.cpp tree (SB_LLAMA_DIR, default /work/cache/llama.cpp)
#   LLAMA_BIN  its built programs
#   SB_PY      a python3 that imports numpy (Debian's python3-numpy), with
#              llama.cpp's gguf-py on PYTHONPATH
# and defines llama_ready (true when the build tools/llama/build_llama.sh
# makes is present) and xcheck_require_llama (exits 77, which ctest reports
# as skipped, when it is not).
LLAMA_DIR="${SB_LLAMA_DIR:-/work/cache/llama.cpp}"
LLAMA_BIN="$LLAMA_DIR/build/bin"
export PYTHONPATH="$LLAMA_DIR/gguf-py${PYTHONPATH:+:$PYTHONPATH}"
SB_PY=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import numpy" 2>/dev/null; then
    SB_PY="$(command -v "$candidate")"
    break
  fi
done
llama_ready() {
  [[ -x "$LLAMA_BIN/llama-bench" && -x "$LLAMA_BIN/llama-quantize" && -f "$LLAMA_DIR/build/src/libllama.a" &&
     -n "$SB_PY" && -f "$LLAMA_DIR/gguf-py/gguf/__init__.py" ]]
}
xcheck_require_llama() {
  llama_ready && return 0
  echo "xcheck: not run: no llama.cpp build at $LLAMA_DIR or no python3 with numpy (tools/llama/build_llama.sh, apt-get install python3-numpy)" >&2
  exit 77
}
