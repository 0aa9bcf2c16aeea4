#!/usr/bin/env bash
# The Fun-ASR benchmark of docs/benchmarks.md: 8, 16 and 64 clients, each streaming the built-in
# speech sample 5 times (29.1 s), against the built-in Fun-ASR mock with decode batching on (its
# defaults: 10 ms wait, batches of 16) and off (no wait, batches of 1). Prints one table row per
# run from each summary.json. Usage: bash bench/funasr.sh [OUT_DIR]
set -euo pipefail
out=${1:-/tmp/bench-funasr}
cargo build --release --quiet
bin=./target/release/duplexbench-tui
mkdir -p "$out"
for clients in 8 16 64; do
  for batching in on off; do
    flags=()
    if [ "$batching" = off ]; then
      flags=(--decode-batch-wait-ms 0 --decode-max-batch-size 1)
    fi
    dir="$out/${clients}c-$batching"
    "$bin" run --no-tui --protocol funasr --clients "$clients" --loops 5 \
      --output "$dir" --force --output-jsonl "$dir.jsonl" "${flags[@]}" > "$dir.txt" 2>&1 || true
  done
done
python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print("| clients | decode batching | wall time | aggregate audio/wall | first update p50/p95 | final after STOP p50/p95 | response lag p95 max | errors | partial / final messages | our verdict | late packets | deviation p99 / max | start lateness max | client CPU per session-second |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for clients in (8, 16, 64):
    for batching in ("on", "off"):
        s = json.loads((out / f"{clients}c-{batching}" / "summary.json").read_text())
        f = s["funasr"]["summary"]
        p = s["pacing"]
        v = s["verdict"]
        verdict = ("qualified" if v["pacing_qualified"] else "UNQUALIFIED") + (", complete" if v["complete"] else ", NOT complete")
        cpu = sum(x["cpu_seconds"] for x in s["processes"] if x["role"] == "worker")
        session_s = s["layout"]["sessions_total"] * s["settings"]["duration_s"]
        # A figure the run has no sample of (no final came: the run was stopped first) is "–".
        ms = lambda a, b: "–" if a is None else f"{a:,.1f} / {b:,.1f} ms"
        print(f"| {clients} | {batching} | {f['elapsed_seconds']:.3f} s | {f['aggregate_audio_per_wall']:.3f}x | "
              f"{ms(f['first_update_ms_p50'], f['first_update_ms_p95'])} | {ms(f['final_after_stop_ms_p50'], f['final_after_stop_ms_p95'])} | "
              f"{'–' if f['client_response_lag_ms_p95_max'] is None else format(f['client_response_lag_ms_p95_max'], ',.1f') + ' ms'} | {f['errors']} | {f['partial_messages']} / {f['final_messages']} | {verdict} | "
              f"{p['late_packets']} | {p['deviation_ms']['p99']:.2f} / {p['deviation_ms']['max']:.2f} ms | {p['start_lateness_ms']['max']:.2f} ms | "
              f"{cpu / session_s * 1e6:.0f} µs |")
PY
