#!/usr/bin/env bash
# The soak benchmark (issue 13): 1 × 256 sessions for 60 minutes with --trace meta against the
# built-in mock, the RSS of every process of the run sampled once a minute. It is a benchmark,
# not a test: it records a curve (docs/benchmarks.md) whose last 50 minutes must be flat.
#
#   bash bench/soak.sh [MINUTES] [OUT_DIR]     (defaults: 60, bench/out/soak-<time>)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-60}
out=${2:-bench/out/soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$(dirname "$out")"
cargo build --release --locked --quiet
bin=target/release/duplexbench-tui
"$bin" run --no-tui -s 256 -d "${minutes}m" --trace meta --output "$out" \
  >"$out.stdout" 2>"$out.stderr" &
conductor=$!
csv="$out.rss.csv"
echo "minute,role,pid,rss_kib" >"$csv"
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }
for ((m = 0; m <= minutes; m++)); do
  kill -0 "$conductor" 2>/dev/null || break
  echo "$m,conductor,$conductor,$(rss "$conductor")" >>"$csv"
  for child in $(pgrep -P "$conductor" || true); do
    role=worker
    tr '\0' ' ' <"/proc/$child/cmdline" 2>/dev/null | grep -q -- ' mock ' && role=mock
    echo "$m,$role,$child,$(rss "$child")" >>"$csv"
  done
  # Bounded: one sample a minute for at most MINUTES + 1 minutes.
  sleep 60
done
wait "$conductor" || true
echo "RSS samples: $csv; summary: $out/summary.md"
