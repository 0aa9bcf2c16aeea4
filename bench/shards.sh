#!/usr/bin/env bash
# Three shards against one conductor (issue 16): the same total layout, N × 1 × S sessions, run
# once as N shard conductors held at one --start-at and merged, and once as one conductor of
# N × S (-p N -s S), both against one external mock on loopback. Prints the pooled p99
# deviation, the workers' CPU per session-second and the gate spread of each (docs/benchmarks.md).
#
#   bash bench/shards.sh [SHARDS] [SESSIONS] [DURATION] [OUT_DIR]   (defaults: 3, 64, 20s, bench/out/shards-<time>)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
s=${2:-64}
d=${3:-20s}
out=${4:-bench/out/shards-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
cargo build --release --locked --quiet
bin=target/release/duplexbench-tui
"$bin" mock --port 0 >"$out/mock.out" 2>"$out/mock.err" &
mock=$!
trap 'kill "$mock" 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$out/mock.out" && break; sleep 0.1; done
url="ws://$(sed -n 's/^listening on //p' "$out/mock.out")/v1/realtime"
common=(--no-tui --url "$url" --trace meta -d "$d")

start_at=$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%S.%3NZ)
pids=()
for ((i = 0; i < n; i++)); do
  "$bin" run "${common[@]}" -p 1 -s "$s" --shard-index "$i" --shard-count "$n" \
    --run-id "bench-shards" --start-at "$start_at" -o "$out/shards/$i" >/dev/null 2>"$out/shard-$i.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
"$bin" merge "$out"/shards/* --output "$out/merged" >/dev/null || true
"$bin" run "${common[@]}" -p "$n" -s "$s" --start-at +3s -o "$out/single" >/dev/null 2>"$out/single.err" || true

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    return json.load(open(f"{out}/{name}/summary.json"))
def cpu_per_session_s(s):
    cpu = sum(p["cpu_seconds"] for p in s["processes"] if p["role"] == "worker")
    return cpu / (s["layout"]["sessions_total"] * s["settings"]["duration_s"])
m, one = load("merged"), load("single")
for name, s in (("shards merged", m), ("one conductor", one)):
    print(f"{name:14} sessions {s['layout']['sessions_total']}  packets {s['pacing']['packets']}  "
          f"late {s['pacing']['late_packets']}  p99 {s['pacing']['deviation_ms']['p99']:.2f} ms  "
          f"p99.9 {s['pacing']['deviation_ms']['p999']:.2f} ms  max {s['pacing']['deviation_ms']['max']:.2f} ms  "
          f"worker CPU {cpu_per_session_s(s) * 1000:.2f} ms per session-second  peak {s['peak_overlapping_streams']}")
print(f"gate spread of the shards' first packets: {m['merge']['first_packet_spread_ms']} ms; "
      f"overlap {m['merge']['overlap_fraction'] * 100:.1f} %")
print("per shard opened late (ms):", [r["start_gate"]["opened_late_ms"] for r in m["merge"]["shards"]])
print("host:", one["host"]["cpu_model"], one["host"]["logical_cpus"], "CPUs")
PY
