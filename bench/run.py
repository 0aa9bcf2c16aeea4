#!/usr/bin/env python3
"""Side-by-side benchmark: duplexbench-tui against the Python reference client (issue #5).

Stdlib only. Started by bench/run.sh (which makes the venv and builds the release binary), or
directly:  bench/.venv/bin/python bench/run.py [mode] [options]

Every run gets a fresh `duplexbench-tui mock --port 0` on 127.0.0.1, then one client drives it;
the clients alternate A B A B within each layout so that machine drift hits both. Figures come
from each client's summary.json and the mock's statistics file.

Modes:
  --smoke                  1 x 8 for 3 s, one run each, results in a temp folder (CI check)
  (default)                1 x 64, 1 x 128, 1 x 256 for 30 s, --trace full
  --knee                   per client and per trace (full, meta): the largest 1 x S, S = 64,
                           128, ... 2048, that stays pacing-qualified (and complete)
  --layout PxS [...]       custom layouts (with --duration, --trace)

Default, custom and smoke comparisons also run the floor client (bench/floor.rs, built by
run.sh; --no-floor leaves it out): per packet one read that discards the replies and one write
of the append, nothing else. Its CPU is the least any client of this protocol can spend here.
It runs twice (--floor-reads): `floor` reads a socket just before that session's next send,
`floor-arrival` as the replies arrive, as a client that times them must.

Results: a Markdown section appended to docs/benchmarks.md and the raw figures appended to the
list in docs/benchmarks.json (smoke: a temp folder unless --record).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from array import array

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH_DIR)
OURS = "duplexbench-tui"
REF = "python-reference"
# bench/floor.rs: only the system calls every client must make (one read, one write per packet),
# reading each session's socket just before its next send ...
FLOOR = "floor"
# ... or as the replies arrive (its --on-arrival), as a client that times them must.
FLOOR_ARRIVAL = "floor-arrival"
FLOORS = (FLOOR, FLOOR_ARRIVAL)
CLIENTS = (OURS, REF)
KNEE_START, KNEE_MAX = 64, 2048
MOCK_START_TIMEOUT_S = 10.0
MOCK_STOP_TIMEOUT_S = 15.0
# A client run may take its duration plus set-up, draining and closing; past this it is killed.
RUN_SLACK_S = 240.0
# Full traces: about 110 kB per session-second; keep a margin of free disk on top.
TRACE_BYTES_PER_SESSION_S = 130_000
DISK_MARGIN_BYTES = 2 << 30


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def kill_group(proc: subprocess.Popen, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_with_rusage(proc: subprocess.Popen, timeout_s: float):
    """Waits for `proc` with wait4, so that its CPU time (and that of the children it reaped)
    is known. Returns (exit code or None on time-out, cpu_seconds or None)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            return None, None
        time.sleep(0.05)


class Mock:
    """`duplexbench-tui mock --port 0 --stats-output FILE` in its own process group."""

    def __init__(self, binary: str, run_dir: str):
        self.stats_path = os.path.join(run_dir, "mock-stats.json")
        out_path = os.path.join(run_dir, "mock.out")
        self.out = open(out_path, "w+")
        self.err = open(os.path.join(run_dir, "mock.log"), "w")
        self.proc = subprocess.Popen(
            [binary, "mock", "--host", "127.0.0.1", "--port", "0", "--stats-output", self.stats_path],
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            start_new_session=True,
        )
        self.addr = None
        deadline = time.monotonic() + MOCK_START_TIMEOUT_S
        while time.monotonic() < deadline:
            with open(out_path) as f:
                for line in f:
                    if line.startswith("listening on "):
                        self.addr = line[len("listening on "):].strip()
                        break
            if self.addr or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if not self.addr:
            self.stop()
            raise RuntimeError(f"the mock did not say `listening on ADDR` (see {run_dir}/mock.log)")

    @property
    def url(self) -> str:
        return f"ws://{self.addr}/v1/realtime"

    def stop(self) -> dict | None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(MOCK_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                kill_group(self.proc)
                self.proc.wait()
        self.out.close()
        self.err.close()
        try:
            with open(self.stats_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------


def pct(sorted_values, p: float) -> float:
    """Nearest rank, as the reference client and an HdrHistogram report it."""
    n = len(sorted_values)
    if not n:
        return 0.0
    rank = max(1, math.ceil(p / 100.0 * n))
    return sorted_values[min(rank, n) - 1]


def cpu_jiffies() -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs from /proc/stat's first line; None off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]
    if len(values) < 8:
        return None  # a kernel without a steal field
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    return values[7], sum(values)


def steal_share(before, after) -> float | None:
    """Steal time as a share of all CPU time between two cpu_jiffies() readings: on a VM, the
    time the hypervisor ran something else while this VM wanted its CPUs. A run with steal
    measures the host as much as the client."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def tcp_counters() -> dict | None:
    """System-wide TCP counters: segments sent (/proc/net/snmp, Tcp OutSegs) and ACKs the
    kernel's delayed-ACK timer sent (/proc/net/netstat, TcpExt DelayedACKs); None off Linux.
    Both ends of the benchmark are on this host's loopback, so the client's and the mock's
    segments both count."""
    wanted = {("Tcp", "OutSegs"): "segments", ("TcpExt", "DelayedACKs"): "delayed_acks"}
    counters = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            return None
        # Each group is two lines: "Tcp: Name Name …" then "Tcp: value value …".
        for names, values in zip(lines[::2], lines[1::2]):
            group, *keys = names.split()
            for key, value in zip(keys, values.split()[1:]):
                name = wanted.get((group.rstrip(":"), key))
                if name is not None:
                    counters[name] = int(value)
    return counters if len(counters) == len(wanted) else None


def tcp_per_packet(before, after, packets) -> dict:
    """TCP segments and delayed-timer ACKs a packet sent, between two tcp_counters() readings.
    A client that reads replies as they come makes the kernel ACK them from its read, in the
    client's CPU time; one that reads later leaves the ACK to the delayed-ACK timer, in a soft
    interrupt no client is charged for: the same segments, billed differently."""
    if before is None or after is None or not packets:
        return {}
    return {
        "tcp_segments_per_packet": (after["segments"] - before["segments"]) / packets,
        "delayed_acks_per_packet": (after["delayed_acks"] - before["delayed_acks"]) / packets,
    }


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_json_line(path):
    """The last line of a file that parses as JSON, or None."""
    try:
        with open(path) as f:
            lines = [line for line in f if line.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def figures_from_floor(outs: list[dict]) -> dict:
    cpu = sum(o["cpu_s"] for o in outs)
    sys_s = sum(o["sys_s"] for o in outs)
    figures = {
        "client_cpu_seconds": round(cpu, 4),
        "client_cpu_cores": sum(o["cores"] for o in outs),
        "floor_sys_share": sys_s / cpu if cpu else 0.0,
        "client_system_cpu_seconds": sys_s,
        "streaming_cpu_seconds": sum(o["streaming_cpu_s"] for o in outs),
        "streaming_seconds": sum(o["streaming_s"] for o in outs),
        "floor_appends": sum(o["appends"] for o in outs),
        "floor_max_lateness_ms": max(o["max_lateness_ms"] for o in outs),
    }
    # Older floor builds printed no deviation. With P > 1 the pooled p50/p99 are not known
    # exactly: the largest process's is taken (P = 1 is exact).
    if all("deviation_ms" in o for o in outs):
        for k in ("p50", "p99", "max"):
            figures[f"deviation_{k}_ms"] = max(o["deviation_ms"][k] for o in outs)
        figures["floor_one_gate"] = all(o.get("one_gate") for o in outs)
    figures["floor_on_arrival"] = all(o.get("on_arrival") for o in outs)
    if all("reads" in o for o in outs):
        figures["floor_reads"] = sum(o["reads"] for o in outs)
    return figures


def figures_from_ours(summary: dict) -> dict:
    pacing = summary["pacing"]
    workers = [p for p in summary.get("processes", []) if p.get("role") == "worker"]
    return {
        "qualified": bool(summary["verdict"]["pacing_qualified"]),
        "complete": bool(summary["verdict"]["complete"]),
        "packets": pacing["packets"],
        "late_packets": pacing["late_packets"],
        # Figures keep their first names (docs/benchmarks.json holds older runs); summary.json
        # schema 2 calls them slow_sends and sessions_with_late_packets.
        "sends_over_20ms": pacing["slow_sends"],
        "sessions_with_violation": pacing["sessions_with_late_packets"],
        "deviation_p50_ms": pacing["deviation_ms"]["p50"],
        "deviation_p99_ms": pacing["deviation_ms"]["p99"],
        "deviation_max_ms": pacing["deviation_ms"]["max"],
        "websocket_send_p99_ms": pacing["websocket_send_ms"]["p99"],
        "sessions_completed": summary["sessions"]["completed"],
        "sessions_configured": summary["sessions"]["configured"],
        "client_cpu_cores": sum(p["cpu_cores"] for p in workers),
        "client_cpu_seconds": sum(p["cpu_seconds"] for p in workers),
        "client_peak_rss_bytes": sum(p["peak_rss_bytes"] for p in workers),
        "loop_lag_max_ms": max((p["loop_lag_ms"]["max"] for p in workers), default=0.0),
        **streaming_of(workers),
        **system_of(workers),
    }


def system_of(workers: list[dict]) -> dict:
    """The workers' kernel CPU (summary.json's `processes[].system_cpu_seconds`), summed;
    nothing when a worker has none (an older build)."""
    system = [p.get("system_cpu_seconds") for p in workers]
    if not system or any(s is None for s in system):
        return {}
    return {"client_system_cpu_seconds": sum(system)}


def packets_sent(record: dict):
    """The packets a client sent: the floors count appends, ours and the reference packets."""
    return record.get("floor_appends", record.get("packets"))


def per_packet(record: dict) -> dict:
    """The client's CPU a packet sent, split into user space and the kernel (µs), where the
    client says how much of its CPU was the kernel's: ours and the floors. The whole run's CPU
    over its packets, set-up included, as `cpu_s_per_session_s`."""
    packets = packets_sent(record)
    system = record.get("client_system_cpu_seconds")
    if not packets or system is None:
        return {}
    cpu = record["client_cpu_seconds"]
    return {
        "user_us_per_packet": (cpu - system) / packets * 1e6,
        "system_us_per_packet": system / packets * 1e6,
    }


def streaming_of(workers: list[dict]) -> dict:
    """The workers' CPU from their gate to their last packet (summary.json's
    `processes[].streaming`), summed, with the seconds those windows lasted summed; nothing
    when a worker has none (an older build, or a run stopped before its last packets)."""
    windows = [p.get("streaming") for p in workers]
    if not windows or any(w is None for w in windows):
        return {}
    figures = {
        "streaming_cpu_seconds": sum(w["cpu_seconds"] for w in windows),
        "streaming_seconds": sum(w["seconds"] for w in windows),
    }
    # The runtime threads' allocations over the same windows (builds of 2026-12-04 on).
    if all("allocations" in w for w in windows):
        figures["streaming_allocations"] = sum(w["allocations"] for w in windows)
    return figures


def figures_from_reference(summaries: list[dict], dev_files: list[str]) -> dict:
    """Pools the reference client's processes (one for P = 1): counts add up, percentiles come
    from every packet's |deviation| (deviations.f64), exactly."""
    if len(summaries) == 1:
        s = summaries[0]
        pacing = s["pacing"]
        p50, p99, mx = (pacing["deviation_ms"][k] for k in ("p50", "p99", "max"))
        send_p99 = pacing["websocket_send_ms"]["p99"]
    else:
        devs = array("d")
        for path in dev_files:
            with open(path, "rb") as f:
                devs.frombytes(f.read())
        d = sorted(devs)
        p50, p99 = (round(pct(d, p) * 1000, 3) for p in (50, 99))
        mx = round((d[-1] if d else 0.0) * 1000, 3)
        send_p99 = max(s["pacing"]["websocket_send_ms"]["p99"] for s in summaries)
    procs = [s["processes"][0] for s in summaries]
    return {
        "qualified": all(s["verdict"]["pacing_qualified"] for s in summaries),
        "complete": all(s["verdict"]["complete"] for s in summaries),
        "packets": sum(s["pacing"]["packets"] for s in summaries),
        "late_packets": sum(s["pacing"]["late_packets"] for s in summaries),
        "sends_over_20ms": sum(s["pacing"]["sends_over_20ms"] for s in summaries),
        "sessions_with_violation": sum(s["pacing"]["sessions_with_violation"] for s in summaries),
        "deviation_p50_ms": p50,
        "deviation_p99_ms": p99,
        "deviation_max_ms": mx,
        "websocket_send_p99_ms": send_p99,
        "sessions_completed": sum(s["sessions"]["completed"] for s in summaries),
        "sessions_configured": sum(s["sessions"]["configured"] for s in summaries),
        "client_cpu_cores": sum(p["cpu_cores"] for p in procs),
        "client_cpu_seconds": sum(p["cpu_seconds"] for p in procs),
        "client_peak_rss_bytes": sum(p["peak_rss_bytes"] for p in procs),
        "loop_lag_max_ms": max(p["loop_lag_ms"]["max"] for p in procs),
    }


def delete_traces(run_dir: str) -> None:
    for root, _dirs, files in os.walk(run_dir):
        for name in files:
            if name == "trace.jsonl":
                try:
                    os.remove(os.path.join(root, name))
                except OSError:
                    pass


def run_one(cfg, client: str, processes: int, sessions: int, duration: int, trace: str, run_dir: str) -> dict:
    os.makedirs(run_dir, exist_ok=True)
    record = {
        "client": client,
        "layout": f"{processes}x{sessions}",
        "processes": processes,
        "sessions_per_process": sessions,
        "duration_s": duration,
        "trace": trace,
        "start": cfg.start or "gate, floor staggered",
        "run_dir": run_dir,
        "started_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ok": False,
    }
    if trace == "full":
        need = processes * sessions * duration * TRACE_BYTES_PER_SESSION_S + DISK_MARGIN_BYTES
        free = shutil.disk_usage(run_dir).free
        if free < need:
            record["error"] = f"not enough free disk for full traces: {free >> 20} MiB free, {need >> 20} MiB needed"
            log(record["error"])
            return record
    mock = Mock(cfg.binary, run_dir)
    timeout_s = duration + RUN_SLACK_S
    started = time.monotonic()
    started_wall = time.time()
    exit_codes, wait4_cpu, procs = [], 0.0, []
    jiffies_before = cpu_jiffies()
    tcp_before = tcp_counters()
    try:
        if client == OURS:
            out_dir = os.path.join(run_dir, "client")
            cmd = [
                cfg.binary, "run", "--no-tui", "--url", mock.url,
                "-p", str(processes), "-s", str(sessions), "-d", f"{duration}s",
                "--trace", trace, "--output", out_dir,
            ]
            if cfg.start == "stagger":
                cmd.append("--stagger")
            cmds = [(cmd, out_dir)]
        elif client in FLOORS:
            cmds = []
            for k in range(processes):
                out_dir = os.path.join(run_dir, f"floor-p{k}")
                cmd = [cfg.floor_binary, mock.url, str(sessions), str(duration)]
                if cfg.start == "gate":
                    cmd.append("--one-gate")
                if client == FLOOR_ARRIVAL:
                    cmd.append("--on-arrival")
                cmds.append((cmd, out_dir))
        else:
            cmds = []
            for k in range(processes):
                out_dir = os.path.join(run_dir, f"client-p{k}")
                cmds.append(([
                    cfg.python, os.path.join(BENCH_DIR, "reference", "client.py"),
                    "--url", mock.url, "--sessions", str(sessions), "--duration", str(duration),
                    "--trace", trace, "--output", out_dir,
                ], out_dir))
        record["command"] = [shlex.join(c) for c, _ in cmds]
        for cmd, out_dir in cmds:
            os.makedirs(out_dir, exist_ok=True)
            name = os.path.basename(out_dir)
            with open(os.path.join(run_dir, f"{name}.stdout"), "w") as out, open(
                os.path.join(run_dir, f"{name}.stderr"), "w"
            ) as err:
                procs.append(subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
                ))
        for proc in procs:
            left = max(1.0, timeout_s - (time.monotonic() - started))
            code, cpu = wait_with_rusage(proc, left)
            if code is None:
                log(f"{client} pid {proc.pid} went past {timeout_s:.0f} s: killing it")
                kill_group(proc)
                code, cpu = wait_with_rusage(proc, 10.0)
            exit_codes.append(code)
            wait4_cpu += cpu or 0.0
    finally:
        for p in procs:
            if p.poll() is None:
                kill_group(p)
        mock_stats = mock.stop()
    record["wall_s"] = round(time.monotonic() - started, 3)
    tcp_after = tcp_counters()
    share = steal_share(jiffies_before, cpu_jiffies())
    if share is not None:
        record["host_steal_pct"] = round(100 * share, 2)
    record["exit_codes"] = exit_codes
    # CPU of the client's whole process tree as wait4 saw it (ours: conductor and workers).
    record["client_tree_cpu_seconds"] = round(wait4_cpu, 4)
    if client == OURS:
        summary_path = os.path.join(run_dir, "client", "summary.json")
        summary = read_json(summary_path)
        if summary is not None and os.path.getmtime(summary_path) < started_wall:
            summary = None  # an earlier run's, left in the folder: this client wrote none
        if summary is None:
            record["error"] = f"no summary.json (exit {exit_codes}); see {run_dir}"
        else:
            record.update(figures_from_ours(summary))
            record["ok"] = True
    elif client in FLOORS:
        outs = []
        for _cmd, out_dir in cmds:
            o = read_json_line(os.path.join(run_dir, f"{os.path.basename(out_dir)}.stdout"))
            if o is None:
                break
            outs.append(o)
        if len(outs) != len(cmds) or any(c != 0 for c in exit_codes):
            record["error"] = f"a floor process failed (exit {exit_codes}); see {run_dir}"
        else:
            record.update(figures_from_floor(outs))
            record["ok"] = True
    else:
        summaries, devs = [], []
        for _cmd, out_dir in cmds:
            s = read_json(os.path.join(out_dir, "summary.json"))
            if s is None:
                break
            summaries.append(s)
            devs.append(os.path.join(out_dir, "deviations.f64"))
        if len(summaries) != len(cmds):
            record["error"] = f"a reference process left no summary.json (exit {exit_codes}); see {run_dir}"
        else:
            record.update(figures_from_reference(summaries, devs))
            record["ok"] = True
    if record["ok"]:
        session_s = processes * sessions * duration
        record["cpu_s_per_session_s"] = record["client_cpu_seconds"] / session_s
        record.update(per_packet(record))
        record.update(tcp_per_packet(tcp_before, tcp_after, packets_sent(record)))
        if record.get("streaming_allocations") is not None and record.get("packets"):
            record["allocations_per_packet"] = record["streaming_allocations"] / record["packets"]
        # The same while streaming only (ours and the floors): set-up and closing, which cost
        # per session and not per second (creating a session's files on ext4 took from 0.05 to
        # 0.2 CPU-s at 1 x 256, with the file system's state), left out of both.
        if record.get("streaming_seconds"):
            record["streaming_cpu_s_per_session_s"] = record["streaming_cpu_seconds"] / (
                sessions * record["streaming_seconds"]
            )
    if mock_stats:
        record["mock_cpu_cores"] = mock_stats["usage"]["cpu_cores"]
        record["mock_arrival_p99_ms"] = mock_stats["arrival_deviation_ms"]["p99"]
        record["mock_arrival_max_ms"] = mock_stats["arrival_deviation_ms"]["max"]
        record["mock_appends_received"] = mock_stats["appends_received"]
    else:
        record["mock_error"] = "the mock left no statistics file"
    if not cfg.keep_traces:
        delete_traces(run_dir)
    os.sync()  # start the next run with no dirty trace pages left from this one
    if record["ok"] and client in FLOORS:
        log(
            f"{client:17s} {record['layout']:>7s} {duration}s: {record['floor_appends']} appends, "
            f"{record.get('floor_reads', '?')} reads, "
            f"{record['client_cpu_cores']:.3f} cores ({record['floor_sys_share']:.0%} system), "
            f"max lateness {record['floor_max_lateness_ms']:.1f} ms, "
            f"deviation p50 {record.get('deviation_p50_ms', '?')} p99 {record.get('deviation_p99_ms', '?')} "
            f"max {record.get('deviation_max_ms', '?')} ms{' (one gate)' if record.get('floor_one_gate') else ''}, mock {record.get('mock_cpu_cores', 0):.3f} cores, "
            f"steal {record.get('host_steal_pct', '?')} %"
        )
    elif record["ok"]:
        log(
            f"{client:17s} {record['layout']:>7s} {trace:4s} {duration}s: "
            f"{'qualified' if record['qualified'] else 'UNQUALIFIED'}"
            f"{'' if record['complete'] else ' INCOMPLETE'}, late {record['late_packets']}, "
            f"p50 {record['deviation_p50_ms']} p99 {record['deviation_p99_ms']} max {record['deviation_max_ms']} ms, "
            f"{record['client_cpu_cores']:.3f} cores, {record['client_peak_rss_bytes'] / 2**20:.1f} MiB, "
            f"mock {record.get('mock_cpu_cores', 0):.3f} cores, steal {record.get('host_steal_pct', '?')} %"
        )
    else:
        log(f"{client} {record['layout']} {trace}: FAILED: {record.get('error')}")
    time.sleep(cfg.settle_s)
    return record


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

ROWS = [
    # (label, key, format, ratio?)
    ("late packets (median)", "late_packets", "{:.0f}", False),
    ("sends over 20 ms (median)", "sends_over_20ms", "{:.0f}", False),
    ("deviation p50 (ms)", "deviation_p50_ms", "{:.2f}", True),
    ("deviation p99 (ms)", "deviation_p99_ms", "{:.2f}", True),
    ("deviation max (ms)", "deviation_max_ms", "{:.2f}", True),
    ("websocket send p99 (ms)", "websocket_send_p99_ms", "{:.3f}", True),
    ("client CPU (cores, workers)", "client_cpu_cores", "{:.3f}", True),
    ("client CPU-s per session-s", "cpu_s_per_session_s", "{:.5f}", True),
    ("client CPU-s per session-s, streaming only", "streaming_cpu_s_per_session_s", "{:.5f}", True),
    ("client user CPU a packet (µs)", "user_us_per_packet", "{:.1f}", True),
    ("client kernel CPU a packet (µs)", "system_us_per_packet", "{:.1f}", True),
    ("allocations a packet while streaming (runtime thread)", "allocations_per_packet", "{:.2f}", False),
    ("client CPU-s, whole process tree", "client_tree_cpu_seconds", "{:.2f}", True),
    ("client peak RSS (MiB)", "client_peak_rss_mib", "{:.1f}", True),
    ("client loop lag max (ms)", "loop_lag_max_ms", "{:.1f}", True),
    # System-wide, so both ends: the same segments for every client; who sent the ACKs differs.
    ("TCP segments a packet (system-wide, both ends)", "tcp_segments_per_packet", "{:.2f}", False),
    ("ACKs sent by the delayed-ACK timer a packet", "delayed_acks_per_packet", "{:.2f}", False),
    ("mock CPU (cores)", "mock_cpu_cores", "{:.3f}", True),
    ("mock arrival p99 (ms)", "mock_arrival_p99_ms", "{:.2f}", True),
    # On a VM: CPU time the host gave elsewhere while the run wanted it (0 on bare metal).
    ("host steal during the run (% of CPU time)", "host_steal_pct", "{:.1f}", False),
]


def median_of(runs, key):
    vals = []
    for r in runs:
        if key == "client_peak_rss_mib":
            if "client_peak_rss_bytes" in r:
                vals.append(r["client_peak_rss_bytes"] / 2**20)
        elif r.get(key) is not None:
            vals.append(r[key])
    return statistics.median(vals) if vals else None


def measured_runs(runs):
    """The runs a client's medians are taken over: those whose sessions all completed. A run
    whose sessions failed sent only part of its packets, so its CPU per session-second and its
    percentiles describe a different load (a run with every session failing in set-up has a
    deviation of 0 and almost no CPU). Only when no run completed are the others used."""
    ok = [r for r in runs if r["ok"]]
    return [r for r in ok if r["complete"]] or ok


# Rows the floor client has a figure for.
FLOOR_ROWS = {"streaming_cpu_s_per_session_s", "user_us_per_packet", "system_us_per_packet", "deviation_p50_ms", "deviation_p99_ms", "deviation_max_ms", "client_cpu_cores", "cpu_s_per_session_s", "client_tree_cpu_seconds", "mock_cpu_cores", "mock_arrival_p99_ms", "host_steal_pct", "tcp_segments_per_packet", "delayed_acks_per_packet"}


def layout_table(runs_by_client: dict) -> list[str]:
    floors = [f for f in FLOORS if f in runs_by_client]
    floor_runs = {f: [r for r in runs_by_client[f] if r["ok"]] for f in floors}
    extra_head = "".join(f" {f} | {f} / reference | ours / {f} |" for f in floors)
    out = [
        f"| figure | {OURS} | {REF} | ours / reference |{extra_head}",
        "|---|---|---|---|" + "---|---|---|" * len(floors),
    ]
    cells = []
    for c in CLIENTS:
        rs = runs_by_client.get(c, [])
        ok = [r for r in rs if r["ok"]]
        q = sum(1 for r in ok if r["qualified"])
        comp = sum(1 for r in ok if r["complete"])
        failed = len(rs) - len(ok)
        cell = f"{q} of {len(rs)} qualified, {comp} complete"
        if failed:
            cell += f", {failed} failed to run"
        if 0 < comp < len(ok):
            cell += f"; medians of the {comp} complete"
        cells.append(cell)
    floor_cell = "".join(f" {len(floor_runs[f])} of {len(runs_by_client[f])} ran | | |" for f in floors)
    out.append(f"| runs | {cells[0]} | {cells[1]} | |{floor_cell}")
    for label, key, fmt, ratio in ROWS:
        meds = [median_of(measured_runs(runs_by_client.get(c, [])), key) for c in CLIENTS]
        shown = [fmt.format(m) if m is not None else "–" for m in meds]
        r = "–"
        if ratio and meds[0] is not None and meds[1]:
            r = f"{meds[0] / meds[1]:.2f}"
        extra = ""
        for floor in floors:
            f = median_of(floor_runs[floor], key) if key in FLOOR_ROWS else None
            fr = f"{f / meds[1]:.2f}" if ratio and f is not None and meds[1] else "–"
            of = f"{meds[0] / f:.2f}" if ratio and f and meds[0] is not None else "–"
            extra += f" {fmt.format(f) if f is not None else '–'} | {fr} | {of} |"
        out.append(f"| {label} | {shown[0]} | {shown[1]} | {r} |{extra}")
    late_total = [sum(r.get("late_packets", 0) for r in runs_by_client.get(c, [])) for c in CLIENTS]
    out.append(f"| late packets (all runs) | {late_total[0]} | {late_total[1]} | |{' – | | |' * len(floors)}")
    return out


def machine_info() -> dict:
    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    def git(*a):
        try:
            return subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    ref_version = None
    try:
        ref_version = subprocess.run(
            [CFG.python, "-c", "import sys, websockets; print(sys.version.split()[0], websockets.__version__)"],
            capture_output=True, text=True, timeout=30,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        pass
    ours_version = None
    try:
        ours_version = subprocess.run([CFG.binary, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "kernel": os.uname().release,
        "memory_total_bytes": mem,
        "git": git("describe", "--always", "--dirty"),
        "duplexbench_tui": ours_version,
        "python": ref_version[0] if ref_version and len(ref_version) == 2 else None,
        "websockets": ref_version[1] if ref_version and len(ref_version) == 2 else None,
    }


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------


def compare(cfg, layouts, duration, trace, repeats, work) -> tuple[list, list[str]]:
    records, md = [], []
    clients = CLIENTS + {"before-send": (FLOOR,), "on-arrival": (FLOOR_ARRIVAL,), "both": FLOORS, None: ()}[
        cfg.floor_reads if cfg.floor else None
    ]
    for (p, s) in layouts:
        by_client = {c: [] for c in clients}
        for rep in range(repeats):
            for client in clients:  # A B F F' A B F F'
                run_dir = os.path.join(work, f"{p}x{s}-{trace}-{duration}s", f"r{rep + 1}-{client}")
                r = run_one(cfg, client, p, s, duration, trace, run_dir)
                r["repeat"] = rep + 1
                by_client[client].append(r)
                records.append(r)
        md.append("")
        start = {None: "", "gate": ", one start gate (the floor too)", "stagger": ", staggered starts (both)"}[cfg.start]
        md.append(f"### {p} × {s}, {duration} s, trace {trace}{start}, {repeats} run{'s' if repeats > 1 else ''} per client")
        md.append("")
        md.extend(layout_table(by_client))
    return records, md


def knee_sizes(cfg) -> list[int]:
    sizes, s = [], cfg.knee_start
    while s <= cfg.knee_max:
        sizes.append(s)
        s *= 2
    return sizes


def knee(cfg, duration, traces, repeats, work) -> tuple[list, list[str]]:
    records = []
    sizes = knee_sizes(cfg)
    alive = {(c, t): True for c in CLIENTS for t in traces}
    best = {(c, t): None for c in CLIENTS for t in traces}
    first_bad = {(c, t): None for c in CLIENTS for t in traces}
    steps = []  # (client, trace, S, runs)
    for s in sizes:
        if not any(alive.values()):
            break
        step_runs = {k: [] for k in alive if alive[k]}
        for rep in range(repeats):
            for t in traces:
                for c in CLIENTS:  # interleaved at each size
                    if not alive[(c, t)]:
                        continue
                    run_dir = os.path.join(work, f"knee-1x{s}-{t}", f"r{rep + 1}-{c}")
                    r = run_one(cfg, c, 1, s, duration, t, run_dir)
                    r["repeat"] = rep + 1
                    r["knee_step"] = s
                    step_runs[(c, t)].append(r)
                    records.append(r)
        for k, rs in step_runs.items():
            good = all(r["ok"] and r["qualified"] and r["complete"] for r in rs)
            steps.append((k[0], k[1], s, rs))
            if good:
                best[k] = s
            else:
                alive[k] = False
                first_bad[k] = s
    md = ["", f"### Knee: the largest 1 × S that stays pacing-qualified and complete for {duration} s "
              f"({repeats} run{'s' if repeats > 1 else ''} per step, S doubling from {sizes[0]}, at most {sizes[-1]})", ""]
    md.append("| client | trace | largest qualified S | first unqualified S | there: late packets, deviation max (ms), client cores | CPU cores at the largest qualified S |")
    md.append("|---|---|---|---|---|---|")
    for t in traces:
        for c in CLIENTS:
            k = (c, t)
            there = "–"
            if first_bad[k] is not None:
                rs = [st for st in steps if st[0] == c and st[1] == t and st[2] == first_bad[k]][0][3]
                ok = [r for r in rs if r["ok"]]
                if ok:
                    there = "; ".join(
                        f"{r['late_packets']}, {r['deviation_max_ms']:.1f}, {r['client_cpu_cores']:.2f}"
                        + ("" if r["complete"] else " (incomplete)")
                        for r in ok
                    )
                else:
                    there = "failed to run: " + "; ".join(r.get("error", "?") for r in rs)
            cores = "–"
            if best[k] is not None:
                rs = [st for st in steps if st[0] == c and st[1] == t and st[2] == best[k]][0][3]
                cores = f"{statistics.median(r['client_cpu_cores'] for r in rs):.3f}"
            largest = str(best[k]) if best[k] is not None else f"none ({sizes[0]} failed)"
            if best[k] == sizes[-1]:
                largest += " (the cap)"
            md.append(f"| {c} | {t} | {largest} | {first_bad[k] or '–'} | {there} | {cores} |")
    md.append("")
    md.append("Every step:")
    md.append("")
    md.append("| client | trace | S | qualified runs | late packets | deviation p99 (ms) | max (ms) | client cores | CPU-s per session-s | peak RSS (MiB) | mock cores |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for c, t, s, rs in steps:
        ok = [r for r in rs if r["ok"]]
        q = sum(1 for r in ok if r["qualified"] and r["complete"])
        def m(key, fmt):
            v = median_of(measured_runs(rs), key)
            return fmt.format(v) if v is not None else "–"
        md.append(
            f"| {c} | {t} | {s} | {q} of {len(rs)} | {m('late_packets', '{:.0f}')} | {m('deviation_p99_ms', '{:.2f}')} | "
            f"{m('deviation_max_ms', '{:.2f}')} | {m('client_cpu_cores', '{:.3f}')} | {m('cpu_s_per_session_s', '{:.5f}')} | "
            f"{m('client_peak_rss_mib', '{:.1f}')} | {m('mock_cpu_cores', '{:.3f}')} |"
        )
    return records, md


def parse_layout(text: str):
    try:
        p, s = text.lower().replace("×", "x").split("x")
        p, s = int(p), int(s)
        if p < 1 or s < 1:
            raise ValueError
        return p, s
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a layout like 1x64 (processes x sessions)")


def main() -> int:
    ap = argparse.ArgumentParser(description="duplexbench-tui vs the Python reference client")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--smoke", action="store_true", help="1 x 8 for 3 s, one run each (CI check)")
    mode.add_argument("--knee", action="store_true", help="the largest qualified 1 x S per client and trace")
    ap.add_argument("--layout", type=parse_layout, action="append", help="PxS, e.g. 1x64 (repeatable)")
    ap.add_argument("--duration", type=int, help="seconds of audio per session (default 30; smoke 3)")
    ap.add_argument("--trace", choices=("full", "meta", "off"), help="trace mode (default full; knee: full and meta)")
    ap.add_argument("--repeats", type=int, help="runs per client per layout or knee step (default 2; smoke 1)")
    ap.add_argument("--knee-start", type=int, default=KNEE_START, help="knee: first S (default 64)")
    ap.add_argument("--knee-max", type=int, default=KNEE_MAX, help="knee: largest S tried (default 2048)")
    ap.add_argument("--record", action="store_true", help="smoke: write to docs/ as well")
    ap.add_argument("--results-dir", help="write benchmarks.md/.json here instead of docs/")
    ap.add_argument("--keep-traces", action="store_true", help="keep every trace.jsonl")
    ap.add_argument("--work-dir", help="where run folders go (default bench/runs/<time>; smoke: a temp folder)")
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "release", "duplexbench-tui"))
    ap.add_argument("--python", default=sys.executable, help="Python for the reference client (with websockets)")
    ap.add_argument("--floor-binary", default=os.path.join(REPO, "target", "release", "examples", "floor"))
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="leave out the floor client (bench/floor.rs)")
    ap.add_argument(
        "--floor-reads", choices=("before-send", "on-arrival", "both"), default="both",
        help="when the floor reads a session's socket: just before its next send (`floor`), as the "
        "replies arrive (`floor-arrival`, its --on-arrival: the kernel then ACKs from the read, in "
        "the client's time, as for every client that times replies), or both, each its own run "
        "(default)",
    )
    ap.add_argument(
        "--start", choices=("gate", "stagger"),
        help="how sessions start: `gate` = one start gate for ours and the floor (its --one-gate); "
        "`stagger` = ours with --stagger and the floor staggered. Default: ours one gate, the floor "
        "staggered (how every run before issue #17 was made)",
    )
    ap.add_argument("--settle-s", type=float, default=2.0, help="pause between runs (default 2 s)")
    ap.add_argument("--title", help="text for the results heading")
    global CFG
    cfg = CFG = ap.parse_args()
    # A SIGTERM (or a hang-up) unwinds like Ctrl-C, so the `finally` blocks stop the mock and
    # the client of the run in progress; by default Python would die and leave them running.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    if cfg.layout and (cfg.smoke or cfg.knee):
        ap.error("--layout is for custom comparisons, not with --smoke or --knee")
    if not os.access(cfg.binary, os.X_OK):
        ap.error(f"{cfg.binary} is not an executable; build it with `cargo build --release`")
    if cfg.knee:
        cfg.floor = False
    if cfg.floor and not os.access(cfg.floor_binary, os.X_OK):
        ap.error(f"{cfg.floor_binary} is not an executable; build it with `cargo build --release --example floor` (or pass --no-floor)")
    if cfg.smoke:
        mode_name, duration, repeats = "smoke", cfg.duration or 3, cfg.repeats or 1
        layouts, traces = [(1, 8)], [cfg.trace or "full"]
        cfg.settle_s = min(cfg.settle_s, 0.5)
    elif cfg.knee:
        mode_name, duration, repeats = "knee", cfg.duration or 30, cfg.repeats or 2
        layouts, traces = None, [cfg.trace] if cfg.trace else ["full", "meta"]
    elif cfg.layout:
        mode_name, duration, repeats = "custom", cfg.duration or 30, cfg.repeats or 2
        layouts, traces = cfg.layout, [cfg.trace or "full"]
    else:
        mode_name, duration, repeats = "default", cfg.duration or 30, cfg.repeats or 2
        layouts, traces = [(1, 64), (1, 128), (1, 256)], [cfg.trace or "full"]
    if duration < 1 or repeats < 1:
        ap.error("--duration and --repeats must be at least 1")
    if cfg.knee and not (1 <= cfg.knee_start <= cfg.knee_max):
        ap.error("--knee-start must be between 1 and --knee-max")

    to_docs = not cfg.smoke or cfg.record
    stamp = dt.datetime.now(dt.timezone.utc)
    if cfg.work_dir:
        work = os.path.abspath(cfg.work_dir)
    elif cfg.smoke:
        work = tempfile.mkdtemp(prefix="duplexbench-smoke-")
    else:
        work = os.path.join(BENCH_DIR, "runs", stamp.strftime("%Y%m%d-%H%M%S"))
    # Run folders are named by layout and repeat: an earlier bench's would be read back as this
    # one's (a client that refuses a used --output leaves the old summary.json there). The
    # default folder is named by the second the bench started, so two benches can meet there too.
    if os.path.isdir(work) and os.listdir(work):
        ap.error(f"the work folder {work} already holds files (an earlier bench's runs?); give --work-dir an empty or new folder")
    os.makedirs(work, exist_ok=True)
    if cfg.results_dir:
        docs = os.path.abspath(cfg.results_dir)
        os.makedirs(docs, exist_ok=True)
    else:
        docs = os.path.join(REPO, "docs") if to_docs else work
    # Many sessions need many descriptors (sockets, trace files) in clients and mock alike.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else max(soft, 65536), hard))

    command = os.environ.get("BENCH_COMMAND") or shlex.join([sys.executable, *sys.argv])
    machine = machine_info()
    log(f"mode {mode_name}, work folder {work}, results to {docs}")
    t0 = time.monotonic()
    records, md_body = [], []
    if cfg.knee:
        r, m = knee(cfg, duration, traces, repeats, work)
        records += r
        md_body += m
    else:
        for t in traces:
            r, m = compare(cfg, layouts, duration, t, repeats, work)
            records += r
            md_body += m
    elapsed = time.monotonic() - t0

    title = cfg.title or {
        "smoke": "smoke check",
        "default": "duplexbench-tui vs the Python reference client",
        "knee": "knee search: duplexbench-tui vs the Python reference client",
        "custom": "duplexbench-tui vs the Python reference client, custom layout",
    }[mode_name]
    md = [
        "",
        f"## {stamp.strftime('%Y-%m-%d %H:%M')} UTC — {title} (issue #5, bench/run.py)",
        "",
        f"Machine: {machine['cpu_model']}, {machine['logical_cpus']} logical CPUs, "
        f"{(machine['memory_total_bytes'] or 0) / 2**30:.0f} GiB, kernel {machine['kernel']}. "
        f"{machine['duplexbench_tui'] or OURS} (git {machine['git']}), release build; reference client: "
        f"Python {machine['python']}, websockets {machine['websockets']} "
        "(`bench/reference/client.py`, the seed's fixed client: one trace-writer thread per process).",
        f"Every run: a fresh `duplexbench-tui mock` on 127.0.0.1 (3 replies per append), then one "
        f"client on the same machine; clients interleaved A B A B (A B F F' A B F F' with both floors); "
        f"medians over runs (over the complete runs only, when some are not: a run whose sessions failed measured a smaller load); figures from each client's `summary.json` (the floor's own output) and "
        f"the mock's statistics. Took {elapsed / 60:.1f} min.",
        "",
        "```sh",
        command,
        "```",
    ] + md_body + [
        "",
        "Client CPU: the sum over the client's worker processes (the reference runs one per P) "
        "(`getrusage` over the process's wall time); CPU-s per session-s is that CPU time / "
        "(sessions × duration); streaming only, the CPU from the gate to the last packet's send "
        "over (sessions × those seconds): ours from summary.json's `processes[].streaming`, the "
        "floors' their `streaming_cpu_s` (set-up and closing cost per session, not per second); "
        "user and kernel CPU a packet: the client's CPU over the run split by its kernel share "
        "(ours: the workers' `processes[].system_cpu_seconds`, `stime` in 10 ms ticks; the floors: "
        "`getrusage`), over the packets it sent — the kernel samples that split at its timer ticks, so "
        "it is rough for a client that used only a few CPU-seconds (docs/metrics.md); allocations a packet: what the workers' runtime "
        "threads allocated from the gate to the last packet (summary.json's "
        "`processes[].streaming.allocations`) over the packets sent; "
        "the whole process tree (ours: conductor and workers) is what "
        "`wait4` reported for the client command. RSS: the sum of the client processes' peaks. "
        "A ratio below 1 means duplexbench-tui's figure is lower. "
        "The floor (`bench/floor.rs`) is no benchmark client: per packet it makes one `read` that "
        "discards the replies and one `write` of the append, and nothing else (no parsing, no "
        "timestamps, no traces); its CPU is the least any client of this protocol spends here, "
        "and most of it is the kernel's loopback TCP path. `floor` reads a socket just before "
        "that session's next send, long after the kernel's delayed-ACK timer acknowledged the "
        "replies (in a soft interrupt, charged to no client); `floor-arrival` reads each socket as "
        "its replies arrive (one `epoll`, a `timerfd` for the sends, one clock read a wake-up), "
        "as any client that times the replies must, and the kernel sends that ACK from its `recv`, "
        "in the client's time. TCP segments and delayed-timer ACKs a packet: the host's counters "
        "(`/proc/net/snmp` OutSegs, `/proc/net/netstat` DelayedACKs) over the client's run, both "
        "ends on loopback: equal segments with more timer ACKs mean the same acknowledgements, "
        "sent where the client is not charged for them.",
    ]
    md_path = os.path.join(docs, "benchmarks.md")
    json_path = os.path.join(docs, "benchmarks.json")
    with open(md_path, "a") as f:
        f.write("\n".join(md) + "\n")
    existing = []
    if os.path.exists(json_path):
        try:
            with open(json_path) as f:
                existing = json.load(f)
            if not isinstance(existing, list):
                existing = [existing]
        except ValueError:
            log(f"{json_path} is not valid JSON: keeping it as {json_path}.bad")
            shutil.copy(json_path, json_path + ".bad")
            existing = []
    existing.append({
        "date": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": mode_name,
        "command": command,
        "machine": machine,
        "duration_s": duration,
        "repeats": repeats,
        "traces": traces,
        "layouts": [f"{p}x{s}" for p, s in layouts] if layouts else [f"1x{s}" for s in knee_sizes(cfg)],
        "elapsed_s": round(elapsed, 1),
        "runs": records,
    })
    tmp = json_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(existing, f, indent=1)
        f.write("\n")
    os.replace(tmp, json_path)
    print("\n".join(md))
    log(f"results appended to {md_path} and {json_path} ({elapsed:.0f} s)")
    failed = [r for r in records if not r["ok"]]
    # A smoke check's temp folder (CI runs one every time) goes once it passed; a failed one is
    # kept to be read.
    temp_smoke = cfg.smoke and not cfg.work_dir and not cfg.record
    if failed:
        log(f"{len(failed)} run(s) failed to produce figures" + (f"; their folders are kept in {work}" if temp_smoke else ""))
        return 1
    if temp_smoke:
        shutil.rmtree(work, ignore_errors=True)
        log(f"removed the smoke check's temp folder {work}")
    return 0


CFG = None

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        # The run in progress was stopped (its mock and client too); nothing was recorded.
        log("interrupted: no results recorded (the run folders so far are kept)")
        sys.exit(130)
