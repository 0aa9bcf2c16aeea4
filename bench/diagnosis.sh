#!/usr/bin/env bash
# The eight diagnosis cases (issue 15): each cause injected once into a 2 × 8, 8 s run against
# the built-in mock, and what the summary attributes it to. Prints one Markdown table row per
# case (docs/sampler.md holds the table). Every run and every helper process is bounded.
#
#   bash bench/diagnosis.sh [OUT_DIR]      (default bench/out/diagnosis-<time>; BIN=… to pick a build)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/out/diagnosis-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked --quiet
  BIN=target/release/duplexbench-tui
fi
common=(run --no-tui -p 2 -s 8 --trace meta)

run() { # NAME ARGS…: a run into $out/NAME (8 s unless ARGS give -d)
  local name=$1
  shift
  local duration=(-d 8s)
  [[ " $* " == *" -d "* ]] && duration=()
  "$BIN" "${common[@]}" "${duration[@]}" --output "$out/$name" --force "$@" >"$out/$name.stdout" 2>"$out/$name.stderr" || true
}

run busy --inject-stall-ms 300
run disk --inject-disk-stall-mb 256
run starvation --inject-cpu-starvation-ms 300
run clean

# stopped: SIGSTOP worker 0 for 500 ms, 4 s into the stream.
"$BIN" "${common[@]}" -d 8s --output "$out/stopped" --force >"$out/stopped.stdout" 2>"$out/stopped.stderr" &
conductor=$!
worker=""
for _ in $(seq 100); do
  worker=$(pgrep -P "$conductor" -f ' worker ' | head -1 || true)
  [ -n "$worker" ] && break
  sleep 0.1
done
sleep 4
kill -STOP "$worker"
sleep 0.5
kill -CONT "$worker"
wait "$conductor" || true

run server-stall --stall-at 4s --stall-ms 500

# foreign load: two bounded busy loops (one per CPU of the 2-CPU box) beside the run.
timeout 14 sh -c 'while :; do :; done' &
timeout 14 sh -c 'while :; do :; done' &
run foreign-load
wait

# send backpressure: the mock stops reading for 8 s of a 12 s run and the client's send buffer
# is small; once the mock's receive buffers are full (128 KiB a connection at first, autotuned
# beyond: a 5 s stall blocked the sends in one run of two), sends block (the send timeout is
# raised so that the sessions survive it).
run send-backpressure -d 12s --stall-at 2s --stall-ms 8000 --send-buffer-bytes 16384 --send-timeout 15s

python3 - "$out" <<'EOF'
import json, sys, os
out = sys.argv[1]
classes = ["disk_wait", "cpu_starvation", "busy", "stopped", "send_backpressure", "foreign_load", "unknown"]
print("| injected cause | late packets | attributed to (late packets) | loop stalls > 20 ms | server stalls | other processes: s over 0.5 cores, mean / max cores | qualified |")
print("|---|---|---|---|---|---|---|")
for name in ["busy", "disk", "starvation", "clean", "stopped", "server-stall", "foreign-load", "send-backpressure"]:
    s = json.load(open(os.path.join(out, name, "summary.json")))
    a = s["attribution"]
    late = ", ".join(f"{c} {a['late_packets'][c]}" for c in classes if a["late_packets"][c]) or "–"
    loops = ", ".join(f"{c} {a['loop_stalls'][c]}" for c in classes if a["loop_stalls"][c]) or "–"
    stalls = ", ".join(f"{st['size_ms']:.0f} ms at {st['run_time_s']:.1f} s" for st in s.get("server_stalls", [])) or "–"
    load = s["sampler"]["host_load"]
    print(f"| {name} | {s['pacing']['late_packets']} | {late} | {loops} | {stalls} | {load['seconds_over_threshold']} of {load['seconds']}, {load['foreign_cores_mean']:.2} / {load['foreign_cores_max']:.2} | {s['verdict']['pacing_qualified']} |")
EOF
