#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (coverage-instrumented Swift with AddressSanitizer) and runs each
# for a bounded time.
# Usage: scripts/fuzz.sh [seconds per target, default 60]. A crash leaves its input in fuzz-artifacts/;
# turn it into a regression test before fixing it, and copy the input into Fuzz/corpus/<target>/ (kept
# in git): every run starts from those seeds, so a past crash is tried again each time.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
# Coverage instrumentation and AddressSanitizer, with libFuzzer's runtime linked without its main():
# SwiftPM names an executable's entry point <target>_main, and each target hands it to LLVMFuzzerRunDriver.
runtime="$(dirname "$(swiftc -print-target-info 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["paths"]["runtimeResourcePath"])')")/clang"
runtime="$(ls "$runtime"/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a 2>/dev/null | head -1)"
[ -n "$runtime" ] || runtime="$(find /opt/swift /usr/lib -name 'libclang_rt.fuzzer_no_main-x86_64.a' 2>/dev/null | head -1)"
if ! swift build -c release --package-path Fuzz -Xswiftc -sanitize=address \
     -Xswiftc -sanitize-coverage=edge,trace-cmp,pc-table,inline-8bit-counters \
     -Xlinker --whole-archive -Xlinker "$runtime" -Xlinker --no-whole-archive -Xlinker -lstdc++ > fuzz-build.log 2>&1; then
  grep -E "error" fuzz-build.log | head -20; echo "fuzz: build failed"; exit 2
fi
bin="$(swift build -c release --package-path Fuzz --show-bin-path)"
mkdir -p fuzz-artifacts
mv fuzz-build.log fuzz-artifacts/build.log
export SWIFT_BACKTRACE=enable=no  # let libFuzzer and ASan report traps, not the Swift backtracer
status=0
for target in FuzzVaultHeader FuzzIndex FuzzJournal FuzzFileBlob FuzzRecoveryPhrase FuzzThumbnail; do
  corpus="fuzz-artifacts/corpus-$target"; mkdir -p "$corpus"
  # New inputs go to the first directory (the run's own); the seeds are only read.
  seeds=(); [ -d "Fuzz/corpus/$target" ] && seeds=("Fuzz/corpus/$target")
  if "$bin/$target" -max_total_time="$SECONDS_EACH" -max_len=8192 -rss_limit_mb=1024 -timeout=5 \
       -artifact_prefix="fuzz-artifacts/$target-" -print_final_stats=1 "$corpus" "${seeds[@]}" > "fuzz-artifacts/$target.log" 2>&1; then
    echo "$target: $(grep -E 'stat::number_of_executed_units' "fuzz-artifacts/$target.log" | awk '{print $2}') runs, no crash"
  else
    echo "$target: CRASH — see fuzz-artifacts/$target.log"; status=1
  fi
done
exit $status
