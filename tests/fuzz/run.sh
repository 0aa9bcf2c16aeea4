#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (default 60 s each), starting from the committed
# seeds, with libFuzzer's RSS limit: any panic, crash or allocation past the limit fails.
#
#   bash tests/fuzz/run.sh [SECONDS]
#
# Where cargo-fuzz cannot work at all (it cannot be installed, no C++ compiler for libFuzzer,
# the fuzz crate's dependencies cannot be fetched) it prints "fuzzing skipped: <why>" and exits
# 0. A target that does not compile, or a lock file behind the crate's dependencies, is not a
# reason to skip: that fails.
set -uo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-60}
rss_limit_mb=512
dir=tests/fuzz
log=$(mktemp)
trap 'rm -f "$log"' EXIT

skip() {
  echo "fuzzing skipped: $*"
  exit 0
}

# The first error line of the last command's log (or its last line).
why() {
  grep -m 1 '^error' "$log" || tail -n 1 "$log"
}

started=$SECONDS
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz from crates.io"
  timeout 900 cargo install cargo-fuzz --locked >"$log" 2>&1 \
    || skip "cargo-fuzz could not be installed: $(why)"
fi
command -v c++ >/dev/null 2>&1 || skip "no C++ compiler (c++) to build libFuzzer's runtime"
# A lock file behind the crate's dependencies is ours to mend, not the machine's limit: fail.
if ! timeout 600 cargo fetch --locked --manifest-path "$dir/Cargo.toml" >"$log" 2>&1; then
  if grep -q 'cannot update the lock file' "$log"; then
    cat "$log"
    echo "$dir/Cargo.lock is behind the crate's dependencies: run" \
      "cargo update --manifest-path $dir/Cargo.toml --workspace and commit it"
    exit 1
  fi
  skip "the fuzz crate's dependencies cannot be fetched: $(why)"
fi

# AddressSanitizer needs -Zsanitizer: a nightly compiler, or RUSTC_BOOTSTRAP=1 on stable. If
# that is refused, fuzz without a sanitizer: panics and the RSS limit still count, and the
# targets are safe Rust.
export RUSTC_BOOTSTRAP=1
sanitizer=address
if ! timeout 1200 cargo fuzz build --fuzz-dir "$dir" >"$log" 2>&1; then
  echo "the AddressSanitizer build failed ($(why)); fuzzing without a sanitizer"
  sanitizer=none
  if ! timeout 1200 cargo fuzz build --fuzz-dir "$dir" --sanitizer none >"$log" 2>&1; then
    cat "$log"
    echo "the fuzz targets do not build"
    exit 1
  fi
fi
echo "fuzz targets built ($sanitizer sanitizer) in $((SECONDS - started)) s"

status=0
for target in $(cargo fuzz list --fuzz-dir "$dir"); do
  # A scratch copy of the seeds: the run's new inputs do not land in the committed corpus.
  corpus=$(mktemp -d)
  cp "$dir/corpus/$target/"* "$corpus/" 2>/dev/null || true
  if timeout $((seconds + 120)) cargo fuzz run --fuzz-dir "$dir" --sanitizer "$sanitizer" \
    "$target" "$corpus" -- -max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout=10 \
    >"$log" 2>&1; then
    echo "fuzz $target: $(grep -m 1 '^Done' "$log"), no crash"
  else
    tail -n 40 "$log"
    echo "fuzz $target FAILED: the input is in $dir/artifacts/$target/"
    status=1
  fi
  rm -rf "$corpus"
done
echo "fuzzing took $((SECONDS - started)) s"
exit $status
