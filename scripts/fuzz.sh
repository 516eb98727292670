#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (Swift with -sanitize=fuzzer) and runs each for a bounded time.
# Usage: scripts/fuzz.sh [seconds per target, default 60]. A crash leaves its input in fuzz-artifacts/;
# turn it into a regression test before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
swift build -c release --package-path Fuzz -Xswiftc -sanitize=fuzzer 2>&1 | grep -E "error|warning: unre|Compiling Fuzz|Build" || true
bin="$(swift build -c release --package-path Fuzz --show-bin-path)"
mkdir -p fuzz-artifacts
status=0
for target in FuzzVaultHeader FuzzIndex FuzzJournal FuzzFileBlob FuzzRecoveryPhrase; do
  corpus="fuzz-artifacts/corpus-$target"; mkdir -p "$corpus"
  if "$bin/$target" -max_total_time="$SECONDS_EACH" -max_len=8192 -rss_limit_mb=1024 -timeout=5 \
       -artifact_prefix="fuzz-artifacts/$target-" -print_final_stats=1 "$corpus" > "fuzz-artifacts/$target.log" 2>&1; then
    echo "$target: $(grep -E 'stat::number_of_executed_units' "fuzz-artifacts/$target.log" | awk '{print $2}') runs, no crash"
  else
    echo "$target: CRASH — see fuzz-artifacts/$target.log"; status=1
  fi
done
exit $status
