#!/usr/bin/env bash
# The protocols side by side (issue 12's note, docs/benchmarks.md): 1 × 64 sessions for about
# 30 s against each built-in mock (native, openai and funasr with the speech sample looped 5
# times = 29.1 s, vllm 30 s of silence), then the wss:// overhead: the same layout against the
# same mock started alone, plain and with a self-signed certificate, run back to back. The whole
# set is repeated REPS times (default 2) because the machine is shared with other builds.
# Prints the tables from each summary.json. Usage: bash bench/protocols.sh [OUT_DIR] [REPS]
set -euo pipefail
out=${1:-/tmp/bench-protocols}
reps=${2:-2}
cargo build --release --quiet
bin=./target/release/duplexbench-tui
mkdir -p "$out"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$out/key.pem" -out "$out/cert.pem" 2>/dev/null

speech=(--audio assets/speech-16k.wav --loops 5)
flags_for() {
  case $1 in
    native) echo "-d 30s" ;;
    openai) echo "${speech[*]} --input-sample-rate 16000" ;;
    vllm) echo "-d 30s --model duplexbench-mock" ;;
    funasr) echo "${speech[*]}" ;;
  esac
}
path_for() { [ "$1" = funasr ] && echo / || echo /v1/realtime; }

# A run against a mock started here (plain or TLS): the mock's pid is ours to stop.
against_own_mock() {
  local protocol=$1 tls=$2 dir=$3
  local mock_flags=() scheme=ws client_tls=()
  if [ "$tls" = on ]; then
    mock_flags=(--tls-cert "$out/cert.pem" --tls-key "$out/key.pem")
    scheme=wss
    client_tls=(--insecure)
  fi
  mkdir -p "$dir"
  "$bin" mock --protocol "$protocol" --port 0 "${mock_flags[@]}" > "$dir.mock.out" 2> "$dir.mock.err" &
  local mock=$!
  for _ in $(seq 100); do
    grep -q "listening on" "$dir.mock.out" 2>/dev/null && break
    sleep 0.1
  done
  local addr
  addr=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$dir.mock.out" | head -1)
  # shellcheck disable=SC2046
  "$bin" run --no-tui -p 1 -s 64 --protocol "$protocol" $(flags_for "$protocol") \
    --url "$scheme://$addr$(path_for "$protocol")" "${client_tls[@]}" \
    --output "$dir" --force > "$dir.txt" 2>&1 || true
  kill "$mock" 2>/dev/null || true
  wait "$mock" 2>/dev/null || true
}

for rep in $(seq "$reps"); do
  for protocol in native openai vllm funasr; do
    # shellcheck disable=SC2046
    "$bin" run --no-tui -p 1 -s 64 --protocol "$protocol" $(flags_for "$protocol") \
      --output "$out/$rep-$protocol" --force > "$out/$rep-$protocol.txt" 2>&1 || true
  done
  for protocol in native openai vllm funasr; do
    for tls in off on; do
      against_own_mock "$protocol" "$tls" "$out/$rep-$protocol-tls-$tls"
    done
  done
done

python3 - "$out" "$reps" <<'PY'
import json, sys, pathlib
out, reps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
protocols = ("native", "openai", "vllm", "funasr")

def load(name):
    return json.loads((out / name / "summary.json").read_text())

def cpu_us(s):
    cpu = sum(p["cpu_seconds"] for p in s["processes"] if p["role"] == "worker")
    return cpu / (s["layout"]["sessions_total"] * s["settings"]["duration_s"]) * 1e6

def kernel(s):
    """ (61 % kernel): the workers' share of their CPU spent in the kernel, when they say it."""
    workers = [p for p in s["processes"] if p["role"] == "worker"]
    cpu = sum(p["cpu_seconds"] for p in workers)
    if not cpu or any(p.get("system_cpu_seconds") is None for p in workers):
        return ""
    return f" ({100 * sum(p['system_cpu_seconds'] for p in workers) / cpu:.0f} % kernel)"

def pct(x):
    return "–" if x is None else f"{x['p50']:.1f} / {x['p99']:.1f}"

def latency(protocol, s):
    if protocol == "native":
        v = s["server"]
        return f"accepted {pct(v['accepted_ms'])}; unit lag {pct(v['unit_lag_ms'])}; first audio {pct(v['first_audio_ms'])}"
    if protocol == "funasr":
        f = s["funasr"]["summary"]
        return (f"first update {f['first_update_ms_p50']:.1f} / {f['first_update_ms_p95']:.1f} (p50 / p95); "
                f"final after STOP {f['final_after_stop_ms_p50']:.1f} / {f['final_after_stop_ms_p95']:.1f}; "
                f"response lag p95 max {f['client_response_lag_ms_p95_max']:.1f}; partials {f['partial_messages']}")
    t = s[protocol]
    parts = [f"first text {pct(t['first_text_after_end_ms'])}"]
    if t.get("first_text_after_start_ms"):
        parts.append(f"text from start {pct(t['first_text_after_start_ms'])}")
    if t.get("first_audio_after_end_ms"):
        parts.append(f"first audio {pct(t['first_audio_after_end_ms'])}")
    parts.append(f"done {pct(t['done_after_end_ms'])}")
    if t.get("speech_stopped_after_audio_ms"):
        parts.append(f"speech stopped {pct(t['speech_stopped_after_audio_ms'])}")
    parts.append(f"{t['text_deltas_per_s']} text deltas/s; {t['ended']} turns")
    return "; ".join(parts)

def verdict(s):
    v = s["verdict"]
    return ("qualified" if v["pacing_qualified"] else "UNQUALIFIED") + (", complete" if v["complete"] else ", NOT complete")

print("| rep | protocol | verdict | packets | late | deviation p50 / p99 / max (ms) | protocol latencies (ms, p50 / p99 unless said) | client CPU per session-second |")
print("|---|---|---|---|---|---|---|---|")
for rep in range(1, reps + 1):
    for protocol in protocols:
        s = load(f"{rep}-{protocol}")
        p = s["pacing"]
        d = p["deviation_ms"]
        print(f"| {rep} | {protocol} | {verdict(s)} | {p['packets']} | {p['late_packets']} | "
              f"{d['p50']:.2f} / {d['p99']:.2f} / {d['max']:.2f} | {latency(protocol, s)} | {cpu_us(s):.0f} µs{kernel(s)} |")
print()
print("| rep | protocol | ws:// CPU per session-second | wss:// CPU per session-second | wss / ws | ws late / deviation p99 | wss late / deviation p99 |")
print("|---|---|---|---|---|---|---|")
for rep in range(1, reps + 1):
    for protocol in protocols:
        off, on = load(f"{rep}-{protocol}-tls-off"), load(f"{rep}-{protocol}-tls-on")
        a, b = cpu_us(off), cpu_us(on)
        print(f"| {rep} | {protocol} | {a:.0f} µs{kernel(off)} | {b:.0f} µs{kernel(on)} | {b / a:.2f} | "
              f"{off['pacing']['late_packets']} / {off['pacing']['deviation_ms']['p99']:.2f} ms | "
              f"{on['pacing']['late_packets']} / {on['pacing']['deviation_ms']['p99']:.2f} ms |")
PY
