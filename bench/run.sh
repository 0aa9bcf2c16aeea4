#!/usr/bin/env bash
# Side-by-side benchmark of duplexbench-tui against the Python reference client (issue #5).
#
#   bash bench/run.sh --smoke                      # 1 x 8 for 3 s, one run each (< 60 s once built)
#   bash bench/run.sh                              # 1 x 64, 1 x 128, 1 x 256, 30 s, --trace full
#   bash bench/run.sh --knee                       # largest qualified 1 x S per client, full and meta
#   bash bench/run.sh --layout 1x64 --duration 10 --trace full --repeats 1
#
# Makes bench/.venv (websockets pinned in bench/reference/requirements.txt) if missing, builds
# the release binary, then runs bench/run.py with every argument. Everything listens on
# 127.0.0.1 only; every run is bounded in time. Results: docs/benchmarks.md and
# docs/benchmarks.json (smoke: a temp folder unless --record).
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$bench")"
venv="$bench/.venv"
req="$bench/reference/requirements.txt"

if [[ ! -x "$venv/bin/python" ]]; then
  echo "[bench] creating $venv" >&2
  python3 -m venv "$venv"
fi
# (Re)install when the pinned requirements changed since the last install.
if ! cmp -s "$req" "$venv/.requirements.installed"; then
  echo "[bench] installing $(tr '\n' ' ' < "$req")into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.requirements.installed"
fi

if [[ "${BENCH_SKIP_BUILD:-}" == 1 ]]; then
  echo "[bench] BENCH_SKIP_BUILD=1: using the binary already in target/release" >&2
  # Results are labelled with the checkout's commit: a binary older than the sources would
  # measure something else under that label (`cargo build --release --examples` does not
  # rebuild it).
  binary="$repo/target/release/duplexbench-tui"
  newer=$(find "$repo/src" "$repo/Cargo.toml" "$repo/Cargo.lock" -newer "$binary" -type f 2>/dev/null | head -n 1)
  if [[ ! -x "$binary" || -n "$newer" ]]; then
    echo "[bench] $binary is missing or older than ${newer:-the sources}: build it (cargo build --release) or run without BENCH_SKIP_BUILD=1" >&2
    exit 2
  fi
else
  echo "[bench] cargo build --release (and the floor client, bench/floor.rs)" >&2
  (cd "$repo" && cargo build --release --quiet && cargo build --release --quiet --example floor)
fi

BENCH_COMMAND="bash bench/run.sh"
if (($#)); then BENCH_COMMAND+="$(printf ' %q' "$@")"; fi
export BENCH_COMMAND
exec "$venv/bin/python" "$bench/run.py" "$@"
