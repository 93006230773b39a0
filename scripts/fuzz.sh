#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build (BUILD/fuzz/fuzz_<target>) from their seed corpus
# tests/fuzz/corpus/<target>/.
#   scripts/fuzz.sh BUILD replay          every seed once (CI)
#   scripts/fuzz.sh BUILD fuzz SECONDS    each target for SECONDS; new inputs go to BUILD/fuzz/corpus/<target>
#   FUZZ_TARGETS="bpe config" ...         only these targets
# A crash, sanitizer report, FUZZ_CHECK, slow input (> 10 s) or memory blow-up (> 2 GB) stops the
# run with the reproducer in BUILD/fuzz/artifacts/ (replay it: BUILD/fuzz/fuzz_<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 mode=$2 seconds=${3:-60}
targets=("$build"/fuzz/fuzz_*)
if [[ -n ${FUZZ_TARGETS:-} ]]; then targets=(); for t in $FUZZ_TARGETS; do targets+=("$build/fuzz/fuzz_$t"); done; fi
[[ -x ${targets[0]} ]] || { echo "no fuzz targets in $build/fuzz (configure with -DMXSERVE_FUZZ=ON)"; exit 1; }
mkdir -p "$build/fuzz/artifacts"
for bin in "${targets[@]}"; do
  name=${bin##*/fuzz_}
  seeds=tests/fuzz/corpus/$name
  opts=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$build/fuzz/artifacts/$name-")
  if [[ $mode == replay ]]; then
    "$bin" "${opts[@]}" -runs=0 "$seeds" 2>&1 | grep -E "INITED|ERROR|SUMMARY|Done" | sed "s/^/$name: /"
  else
    mkdir -p "$build/fuzz/corpus/$name"
    "$bin" "${opts[@]}" -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 \
      "$build/fuzz/corpus/$name" "$seeds" 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY|Done" | sed "s/^/$name: /"
  fi
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "$name: FAILED (artifacts in $build/fuzz/artifacts)"; exit 1; }
done
