#!/usr/bin/env python3
"""Python reference client for duplexbench-tui's side-by-side benchmark (issue #5).

It re-creates the seed study's *fixed* Python client (benchmarks/duplex/client.py run_session
driven by pacing_probe.py run): asyncio and the `websockets` library, the native full-duplex
protocol of SPEC §4, packets paced on an absolute 80 ms clock from the actual send of packet 0,
full traces with base64 audio written by ONE writer thread per process (0.5 s batches per
session, session ends gathered within 50 ms, compact receipts dumped by the thread), and the
pacing figures of docs/metrics.md computed the same way as duplexbench-tui's.

It is meant to be the baseline users would otherwise run, not a straw man: the append frame is
built by string formatting around a base64 chunk encoded once, every sent frame is encoded once
and its trace line wraps the same string, received frames go to the trace as they arrived, the
garbage collector freezes the set-up heap before streaming, and nothing but the trace hand-off
and the figures' bookkeeping runs on the event loop per packet.

Usage:
    python client.py --url ws://127.0.0.1:8765/v1/realtime --sessions 64 --duration 30 \
        --trace full --output out/ref1

Writes OUTPUT/summary.json (keys mirror duplexbench-tui's where they overlap, with
tool.name = "python-reference"), OUTPUT/deviations.f64 (every packet's |deviation| in seconds,
native float64, so several processes can be pooled exactly), and per session
OUTPUT/sessions/w0-sNNNN/{trace.jsonl,input-send-receipts.json}. Traces are deleted at the end
of the run unless --keep-traces, as the seed's probe did. Exit code 0 when the run is
pacing-qualified and complete, 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import gc
import json
import math
import os
import resource
import signal
import socket
import sys
import threading
import time
from array import array

PROCESS_START_S = time.monotonic()

import websockets  # noqa: E402  (after the start time, so its import counts in the wall time)
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

monotonic = time.monotonic  # CLOCK_MONOTONIC on Linux; asyncio's loop.time() is the same clock

INPUT_SAMPLE_RATE = 16_000
BYTES_PER_SAMPLE = 2
LATE_THRESHOLD_FACTOR = 1.0  # late: |deviation| > one packet
SLOW_SEND_THRESHOLD_S = 0.020
TRACE_BATCH_S = 0.5
END_GATHER_S = 0.050
GATE_LEAD_S = 0.25  # as duplexbench-tui's conductor
LOOP_TICK_S = 0.010
CONNECT_TIMEOUT_S = 10.0
RECV_TIMEOUT_S = 30.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
ADMISSION_RETRIES = 3
ADMISSION_RETRY_INTERVAL_S = 0.25


# --------------------------------------------------------------------------------------------
# Trace writer: one thread per process does every file write (the seed's TraceWriter).
# --------------------------------------------------------------------------------------------


class SessionTrace:
    """What one session hands to the writer thread. The event loop only appends to `lines`
    (a deque: append on the loop and popleft in the thread are safe without a lock) and to
    `receipts` (read by the thread only after the session ended)."""

    __slots__ = (
        "directory",
        "mode",
        "lines",
        "receipts",
        "session_start_s",
        "file",
        "error",
        "done",
        "ended_at",
        "loop",
    )

    def __init__(self, directory: str, mode: str, loop: asyncio.AbstractEventLoop):
        self.directory = directory
        self.mode = mode
        self.lines: collections.deque[str] = collections.deque()
        self.receipts: list[tuple[str, int, float, float, float]] = []
        self.session_start_s: float | None = None
        self.file = None
        self.error: str | None = None
        self.done: asyncio.Future | None = None
        self.ended_at = 0.0
        self.loop = loop


class TraceWriter(threading.Thread):
    def __init__(self, loop: asyncio.AbstractEventLoop, mode: str):
        super().__init__(name="trace-writer", daemon=True)
        self.loop = loop
        self.mode = mode
        self.cond = threading.Condition()
        self.active: list[SessionTrace] = []
        self.ending: collections.deque[SessionTrace] = collections.deque()
        self.stopping = False

    # ---- called on the event loop ----

    def open(self, directory: str) -> SessionTrace:
        trace = SessionTrace(directory, self.mode, self.loop)
        with self.cond:
            self.active.append(trace)
        return trace

    def finish(self, trace: SessionTrace) -> asyncio.Future:
        """The session has ended: the thread writes its last lines and its receipts, gathering
        sessions that end within END_GATHER_S of each other, then resolves the future with the
        first write error (or None)."""
        trace.done = self.loop.create_future()
        trace.ended_at = monotonic()
        with self.cond:
            self.ending.append(trace)
            self.cond.notify()
        return trace.done

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()
        self.join()

    # ---- the thread ----

    def run(self) -> None:
        next_tick = monotonic() + TRACE_BATCH_S
        while True:
            with self.cond:
                while True:
                    now = monotonic()
                    if self.ending and (
                        self.stopping or now >= self.ending[0].ended_at + END_GATHER_S
                    ):
                        break
                    if now >= next_tick or (self.stopping and not self.ending):
                        break
                    wake = next_tick
                    if self.ending:
                        wake = min(wake, self.ending[0].ended_at + END_GATHER_S)
                    self.cond.wait(wake - now)
                ended: list[SessionTrace] = []
                now = monotonic()
                if self.ending and (self.stopping or now >= self.ending[0].ended_at + END_GATHER_S):
                    ended = list(self.ending)
                    self.ending.clear()
                    for trace in ended:
                        try:
                            self.active.remove(trace)
                        except ValueError:
                            pass
                tick = now >= next_tick
                active = list(self.active) if tick else []
                stopping = self.stopping and not self.ending
            if tick:
                for trace in active:
                    self._flush(trace)
                next_tick += TRACE_BATCH_S
                if next_tick <= monotonic():
                    next_tick = monotonic() + TRACE_BATCH_S
            for trace in ended:
                self._flush(trace)
                self._close(trace)
            if ended:
                results = [(t.done, t.error) for t in ended]
                self.loop.call_soon_threadsafe(_resolve_all, results)
            if stopping:
                return

    def _flush(self, trace: SessionTrace) -> None:
        lines = trace.lines
        n = len(lines)
        if not n:
            return
        popleft = lines.popleft
        chunk = "".join([popleft() for _ in range(n)])
        if trace.error is not None:
            return
        try:
            if trace.file is None:
                os.makedirs(trace.directory, exist_ok=True)
                trace.file = open(
                    os.path.join(trace.directory, "trace.jsonl"), "w", encoding="utf-8"
                )
            trace.file.write(chunk)
        except OSError as err:
            trace.error = f"trace write failed: {err}"

    def _close(self, trace: SessionTrace) -> None:
        try:
            if trace.file is not None:
                trace.file.close()
            elif trace.mode != "off" and trace.error is None:
                os.makedirs(trace.directory, exist_ok=True)
                open(os.path.join(trace.directory, "trace.jsonl"), "w").close()
        except OSError as err:
            trace.error = trace.error or f"trace close failed: {err}"
        # Receipts, dumped compactly here and not on the loop (the seed's change).
        origin = trace.session_start_s
        receipts = {
            "session_start_s": origin,
            "appends": [
                {
                    "event_id": event_id,
                    "seq": seq,
                    "scheduled_s": scheduled_s,
                    "start_s": start_s,
                    "completed_s": completed_s,
                }
                for (event_id, seq, scheduled_s, start_s, completed_s) in trace.receipts
            ],
        }
        try:
            os.makedirs(trace.directory, exist_ok=True)
            with open(
                os.path.join(trace.directory, "input-send-receipts.json"), "w", encoding="utf-8"
            ) as f:
                json.dump(receipts, f, separators=(",", ":"))
        except OSError as err:
            trace.error = trace.error or f"receipts write failed: {err}"


def _resolve_all(results) -> None:
    for fut, error in results:
        if not fut.done():
            fut.set_result(error)


# --------------------------------------------------------------------------------------------
# Frames: encoded once, with the base64 audio formatted in.
# --------------------------------------------------------------------------------------------


def event_id(session: int, seq: int) -> str:
    # The same packing as duplexbench-tui: worker << 48 | session << 32 | seq, 16 hex digits.
    return f"{((session & 0xFFFF) << 32) | (seq & 0xFFFFFFFF):016x}"


def session_update_frame(eid: str) -> str:
    return (
        '{"type":"session.update","event_id":"%s","session":{"output_modalities":["audio"]}}' % eid
    )


def control_frame(kind: str, eid: str) -> str:
    return '{"type":"%s","event_id":"%s"}' % (kind, eid)


class AppendTemplate:
    """`{"type":"input_audio_buffer.append","event_id":…,"audio":…,"sglang":{…}}` with the
    base64 audio encoded once; a frame costs one string formatting."""

    def __init__(self, pcm: bytes):
        self.audio_b64 = base64.b64encode(pcm).decode("ascii")
        self.b64_chars = len(self.audio_b64)
        self.full = (
            '{"type":"input_audio_buffer.append","event_id":"%s","audio":"'
            + self.audio_b64
            + '","sglang":{"seq":%d,"t_start_ms":%d}}'
        )
        self.meta_line = (
            '{"direction":"send","time_s":%.6f,"event":{"type":"input_audio_buffer.append",'
            '"event_id":"%s","audio":null,"audio_b64_chars":'
            + str(self.b64_chars)
            + ',"sglang":{"seq":%d,"t_start_ms":%d}}}\n'
        )


SEND_LINE = '{"direction":"send","time_s":%.6f,"event":%s}\n'
RECEIVE_LINE = '{"direction":"receive","time_s":%.6f,"event":%s}\n'
ERROR_LINE = '{"direction":"error","time_s":%.6f,"event":%s}\n'


# --------------------------------------------------------------------------------------------
# Run-wide state
# --------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.packet_s = args.packet_ms / 1000.0
        self.late_s = self.packet_s * LATE_THRESHOLD_FACTOR
        total_ms = int(round(args.duration * 1000))
        self.packets_per_session = max(1, math.ceil(total_ms / args.packet_ms))
        packet_bytes = INPUT_SAMPLE_RATE * args.packet_ms // 1000 * BYTES_PER_SAMPLE
        last_ms = total_ms - (self.packets_per_session - 1) * args.packet_ms
        last_bytes = INPUT_SAMPLE_RATE * last_ms // 1000 * BYTES_PER_SAMPLE
        self.full = AppendTemplate(bytes(packet_bytes))
        self.last = AppendTemplate(bytes(last_bytes))
        # Pooled figures: |deviation| and websocket.send() time of every packet, seconds.
        self.deviations = array("d")
        self.send_times = array("d")
        self.late_packets = 0
        self.sends_over_20ms = 0
        self.sessions_with_violation = 0
        self.completed = 0
        self.incomplete = 0
        self.rejected = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.protocol_errors = 0
        self.error_events = 0
        # Start gate: every session sets up, then all start streaming at one time.
        self.arrived = 0
        self.gate: asyncio.Future = loop.create_future()
        self.stop = False
        self.writer = TraceWriter(loop, args.trace)

    def arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.args.sessions and not self.gate.done():
            self.gate.set_result(monotonic() + GATE_LEAD_S)


class SessionFailed(Exception):
    pass


class Rejected(Exception):
    pass


# --------------------------------------------------------------------------------------------
# One session
# --------------------------------------------------------------------------------------------


class Session:
    def __init__(self, run: Run, index: int):
        self.run = run
        self.index = index
        self.trace: SessionTrace = run.writer.open(
            os.path.join(run.args.output, "sessions", f"w0-s{index:04d}")
        )
        self.trace_lines = self.trace.lines
        self.mode = run.args.trace
        self.want: str | None = None
        self.want_future: asyncio.Future | None = None
        self.ws = None
        self.failure: str | None = None
        self.closed = False  # session.closed seen: the server closing the socket is expected

    # ---- receive loop: takes every event as it comes ----

    async def receive(self, ws) -> None:
        lines = self.trace_lines
        mode = self.mode
        try:
            async for frame in ws:
                now = monotonic()
                if isinstance(frame, str):
                    try:
                        event = json.loads(frame)
                        kind = event.get("type") if isinstance(event, dict) else None
                    except ValueError:
                        event, kind = None, None
                    if mode == "full":
                        if frame.isascii() and "\n" not in frame and "\r" not in frame:
                            lines.append(RECEIVE_LINE % (now, frame))
                        elif event is not None:
                            lines.append(
                                RECEIVE_LINE % (now, json.dumps(event, separators=(",", ":")))
                            )
                        else:
                            lines.append(RECEIVE_LINE % (now, json.dumps(frame)))
                    elif mode == "meta":
                        if kind == "response.output_audio.delta" and isinstance(
                            event.get("delta"), str
                        ):
                            stripped = dict(event)
                            stripped["audio_b64_chars"] = len(stripped["delta"])
                            stripped["delta"] = None
                            lines.append(
                                RECEIVE_LINE % (now, json.dumps(stripped, separators=(",", ":")))
                            )
                        elif frame.isascii() and "\n" not in frame and "\r" not in frame:
                            lines.append(RECEIVE_LINE % (now, frame))
                        elif event is not None:
                            lines.append(
                                RECEIVE_LINE % (now, json.dumps(event, separators=(",", ":")))
                            )
                        else:
                            lines.append(RECEIVE_LINE % (now, json.dumps(frame)))
                    if kind is None:
                        self.protocol_error(now, "server frame is not a JSON event")
                        continue
                    if kind == "error":
                        self.run.error_events += 1
                        sg = event.get("sglang") or {}
                        if isinstance(sg, dict) and sg.get("fatal"):
                            err = event.get("error") or {}
                            self.fail(
                                "the server ended the session with error %s: %s"
                                % (err.get("code", "?"), err.get("message", ""))
                            )
                            return
                    if kind == "session.closed":
                        self.closed = True
                    if kind == self.want:
                        fut = self.want_future
                        self.want = None
                        if fut is not None and not fut.done():
                            fut.set_result(now)
                else:
                    self.protocol_error(now, f"unexpected binary frame of {len(frame)} bytes")
        except ConnectionClosed as err:
            if not self.closed:
                self.fail(f"the server closed the connection mid-session ({err})")
            return
        if not self.closed:
            self.fail("the server closed the connection mid-session")

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
        fut = self.want_future
        if fut is not None and not fut.done():
            fut.set_exception(SessionFailed(self.failure))

    def protocol_error(self, now: float, why: str) -> None:
        self.run.protocol_errors += 1
        if self.mode != "off":
            self.trace_lines.append(ERROR_LINE % (now, json.dumps({"message": why})))

    async def expect(self, kind: str, trigger: str | None = None) -> None:
        """Arms the wait for `kind`, sends `trigger` (if any), and waits for the event."""
        if self.failure is not None:
            raise SessionFailed(self.failure)
        self.want = kind
        self.want_future = self.run.loop.create_future()
        if trigger is not None:
            await self.send_control(trigger)
        try:
            await asyncio.wait_for(self.want_future, RECV_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise SessionFailed(f"no {kind} within {RECV_TIMEOUT_S:g} s") from None

    async def send_control(self, frame: str) -> None:
        if self.mode != "off":
            self.trace_lines.append(SEND_LINE % (monotonic(), frame))
        try:
            await self.ws.send(frame)
        except ConnectionClosed as err:
            raise SessionFailed(f"sending to the server failed: {err}") from None

    # ---- the session ----

    async def connect(self):
        url = self.run.args.url
        for attempt in range(1, ADMISSION_RETRIES + 2):
            try:
                return await connect(
                    url,
                    open_timeout=CONNECT_TIMEOUT_S,
                    ping_interval=None,
                    close_timeout=1.0,
                    max_size=MAX_MESSAGE_BYTES,
                    compression=None,
                )
            except InvalidStatus as err:
                if err.response.status_code != 503:
                    raise SessionFailed(f"cannot connect to {url}: {err}") from None
                if attempt <= ADMISSION_RETRIES:
                    await asyncio.sleep(ADMISSION_RETRY_INTERVAL_S)
            except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as err:
                raise SessionFailed(f"cannot connect to {url}: {err!r}") from None
        raise Rejected(
            f"the server refused the connection with HTTP 503 on all {ADMISSION_RETRIES + 1} attempts"
        )

    async def drive(self) -> None:
        run = self.run
        receiver = None
        try:
            try:
                self.want = "session.created"
                self.want_future = run.loop.create_future()
                self.ws = await self.connect()
                receiver = asyncio.create_task(self.receive(self.ws))
                try:
                    await asyncio.wait_for(self.want_future, RECV_TIMEOUT_S)
                except asyncio.TimeoutError:
                    raise SessionFailed(f"no session.created within {RECV_TIMEOUT_S:g} s") from None
                await self.expect(
                    "session.updated", session_update_frame(event_id(self.index, 0xFFFFFFFF))
                )
            finally:
                run.arrive()  # set up or failed: the gate waits for every session either way
            start_at = await run.gate
            sent = await self.stream(start_at)
            if sent:
                await self.expect(
                    "sglang.input_audio.drained",
                    control_frame("sglang.input_audio.end", event_id(self.index, 0xFFFFFFFE)),
                )
            await self.expect(
                "session.closed", control_frame("session.close", event_id(self.index, 0xFFFFFFFD))
            )
            # The server closes the socket after session.closed; let the receive loop see it.
            try:
                await asyncio.wait_for(asyncio.shield(receiver), 1.0)
            except asyncio.TimeoutError:
                pass
        finally:
            if receiver is not None and not receiver.done():
                receiver.cancel()
            if self.ws is not None:
                try:
                    await asyncio.wait_for(self.ws.close(), 1.0)
                except Exception:
                    pass

    async def stream(self, start_at: float) -> int:
        """The paced send loop: packet N is due at start_s(0) + N × packet_s, where start_s(0)
        is the actual send start of packet 0; a late packet does not move later deadlines."""
        run = self.run
        ws = self.ws
        packet_s = run.packet_s
        packet_ms = run.args.packet_ms
        late_s = run.late_s
        n = run.packets_per_session
        lines = self.trace_lines
        receipts = self.trace.receipts
        deviations = run.deviations
        send_times = run.send_times
        mode = self.mode
        index_bits = (self.index & 0xFFFF) << 32
        violation = False
        origin = None
        delay = start_at - monotonic()
        await asyncio.sleep(delay if delay > 0 else 0)
        seq = 0
        while seq < n:
            if run.stop:
                break
            if self.failure is not None:
                raise SessionFailed(self.failure)
            template = run.last if seq == n - 1 else run.full
            start_s = monotonic()  # before the frame is built and sent
            if origin is None:
                origin = start_s
                self.trace.session_start_s = start_s
            scheduled_s = origin + seq * packet_s
            eid = "%016x" % (index_bits | seq)
            t_start_ms = seq * packet_ms
            frame = template.full % (eid, seq, t_start_ms)
            # The trace line wraps the frame as sent, stamped with start_s (queued before the
            # send, so the lines of a trace never go backwards in time).
            if mode == "full":
                lines.append(SEND_LINE % (start_s, frame))
            elif mode == "meta":
                lines.append(template.meta_line % (start_s, eid, seq, t_start_ms))
            try:
                await ws.send(frame)
            except ConnectionClosed as err:
                raise SessionFailed(f"sending packet {seq} failed: {err}") from None
            completed_s = monotonic()
            receipts.append((eid, seq, scheduled_s, start_s, completed_s))
            deviation = abs(start_s - scheduled_s)
            deviations.append(deviation)
            send_times.append(completed_s - start_s)
            if deviation > SLOW_SEND_THRESHOLD_S:
                run.sends_over_20ms += 1
            if deviation > late_s:
                run.late_packets += 1
                if not violation:
                    violation = True
                    run.sessions_with_violation += 1
            seq += 1
            delay = origin + seq * packet_s - monotonic()
            await asyncio.sleep(delay if delay > 0 else 0)
        return seq

    async def run_session(self) -> None:
        run = self.run
        status, why = "completed", None
        try:
            await self.drive()
        except Rejected as err:
            status, why = "rejected", str(err)
        except SessionFailed as err:
            status, why = "incomplete", str(err)
        except asyncio.CancelledError:
            status, why = "incomplete", "the run went past its deadline"
        except Exception as err:  # noqa: BLE001 - any other failure makes the session incomplete
            status, why = "incomplete", f"{type(err).__name__}: {err}"
        # A session closes only after its lines are written; a write error fails it.
        error = await run.writer.finish(self.trace)
        if error is not None and status == "completed":
            status, why = "incomplete", error
        if status == "completed":
            run.completed += 1
        elif status == "rejected":
            run.rejected += 1
            run.errors[why] += 1
        else:
            run.incomplete += 1
            run.errors[why] += 1


# --------------------------------------------------------------------------------------------
# Loop lag
# --------------------------------------------------------------------------------------------


class LoopLag:
    def __init__(self):
        self.samples = array("d")
        self.max = 0.0
        self.over_20ms = 0
        self.over_80ms = 0

    async def run(self) -> None:
        next_s = monotonic() + LOOP_TICK_S
        while True:
            delay = next_s - monotonic()
            await asyncio.sleep(delay if delay > 0 else 0)
            now = monotonic()
            lag = now - next_s
            if lag < 0:
                lag = 0.0
            self.samples.append(lag)
            if lag > self.max:
                self.max = lag
            if lag > 0.020:
                self.over_20ms += 1
                if lag > 0.080:
                    self.over_80ms += 1
            next_s += LOOP_TICK_S
            if next_s <= now:  # ticks a stall swallowed are skipped: one stall counts once
                next_s += math.ceil((now - next_s) / LOOP_TICK_S) * LOOP_TICK_S
                if next_s <= now:
                    next_s += LOOP_TICK_S


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def percentile(sorted_values, p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p % of the values at or below
    it (what an HdrHistogram reports, without its bucketing)."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    rank = max(1, math.ceil(p / 100.0 * n))
    return sorted_values[min(rank, n) - 1]


def full_ms(values) -> dict:
    s = sorted(values)
    return {
        "p50": round(percentile(s, 50) * 1000, 3),
        "p90": round(percentile(s, 90) * 1000, 3),
        "p99": round(percentile(s, 99) * 1000, 3),
        "p999": round(percentile(s, 99.9) * 1000, 3),
        "max": round((s[-1] if s else 0.0) * 1000, 3),
    }


def short_ms(values) -> dict:
    s = sorted(values)
    return {
        "p50": round(percentile(s, 50) * 1000, 3),
        "p99": round(percentile(s, 99) * 1000, 3),
        "max": round((s[-1] if s else 0.0) * 1000, 3),
    }


def host_info() -> dict:
    cpu_model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model,
        "logical_cpus": os.cpu_count(),
        "kernel": os.uname().release,
    }


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


async def main_async(args) -> dict:
    loop = asyncio.get_running_loop()
    run = Run(args, loop)
    def on_signal() -> None:
        run.stop = True
        print("signal received: ending the sessions", file=sys.stderr)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
        except (NotImplementedError, RuntimeError):
            pass

    run.writer.start()
    lag = LoopLag()
    lag_task = asyncio.create_task(lag.run())
    sessions = [Session(run, i) for i in range(args.sessions)]
    # Freeze what exists before recording, so collections do not walk it (the seed's change).
    gc.collect()
    gc.freeze()
    started_s = monotonic()
    tasks = [asyncio.create_task(s.run_session()) for s in sessions]
    deadline_s = args.duration + 2 * RECV_TIMEOUT_S + CONNECT_TIMEOUT_S * 4 + 30.0
    done, pending = await asyncio.wait(tasks, timeout=deadline_s)
    cancelled_for_deadline = bool(pending)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=10.0)
    ended_s = monotonic()
    lag_task.cancel()
    run.writer.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall_s = monotonic() - PROCESS_START_S
    cpu_seconds = usage.ru_utime + usage.ru_stime

    packets = len(run.deviations)
    qualified = run.late_packets == 0
    complete = (
        run.completed == args.sessions
        and not cancelled_for_deadline
        and not run.stop
    )
    reasons = []
    if not qualified:
        reasons.append(
            f"{run.late_packets} late packets in {run.sessions_with_violation} sessions"
        )
    if run.completed != args.sessions:
        reasons.append(f"{args.sessions - run.completed} of {args.sessions} sessions did not complete")
    if run.stop:
        reasons.append("stopped by a signal")
    lag_sorted = sorted(lag.samples)
    with open(os.path.join(args.output, "deviations.f64"), "wb") as f:
        run.deviations.tofile(f)
    summary = {
        "schema_version": 1,
        "tool": {
            "name": "python-reference",
            "version": "1",
            "python": sys.version.split()[0],
            "websockets": websockets.__version__,
        },
        "command_line": " ".join(sys.argv),
        "cancelled": run.stop,
        "wall_seconds": round(ended_s - started_s, 3),
        "verdict": {"pacing_qualified": qualified, "complete": complete, "reasons": reasons},
        "layout": {"processes": 1, "sessions_per_process": args.sessions, "sessions_total": args.sessions},
        "settings": {
            "url": args.url,
            "sessions": args.sessions,
            "duration_s": args.duration,
            "packet_ms": args.packet_ms,
            "packets_per_session": run.packets_per_session,
            "late_threshold_ms": round(run.late_s * 1000, 3),
            "slow_send_threshold_ms": 20,
            "trace": args.trace,
            "trace_writer": "thread",
            "keep_traces": args.keep_traces,
            "start_gate": True,
        },
        "host": host_info(),
        "pacing": {
            "packets": packets,
            "late_packets": run.late_packets,
            "late_threshold_ms": round(run.late_s * 1000, 3),
            "sends_over_20ms": run.sends_over_20ms,
            "sessions_with_violation": run.sessions_with_violation,
            "deviation_ms": full_ms(run.deviations),
            "websocket_send_ms": short_ms(run.send_times),
        },
        "sessions": {
            "configured": args.sessions,
            "completed": run.completed,
            "incomplete": run.incomplete,
            "rejected": run.rejected,
            "errors": [
                {"message": m, "count": c} for m, c in run.errors.most_common(10)
            ],
        },
        "processes": [
            {
                "role": "worker",
                "index": 0,
                "pid": os.getpid(),
                "cpu_cores": cpu_seconds / wall_s if wall_s > 0 else 0.0,
                "cpu_seconds": cpu_seconds,
                "wall_seconds": wall_s,
                "peak_rss_bytes": usage.ru_maxrss * 1024,
                "loop_lag_ms": {
                    "p50": round(percentile(lag_sorted, 50) * 1000, 3),
                    "p99": round(percentile(lag_sorted, 99) * 1000, 3),
                    "max": round(lag.max * 1000, 3),
                    "over_80ms": lag.over_80ms,
                    "over_20ms": lag.over_20ms,
                },
            }
        ],
        "server": {"protocol_errors": run.protocol_errors, "error_events": run.error_events},
        "output_dir": args.output,
    }
    return summary


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Python reference client (the seed's fixed client) for duplexbench-tui's benchmark"
    )
    p.add_argument("--url", required=True, help="e.g. ws://127.0.0.1:8765/v1/realtime")
    p.add_argument("--sessions", "-s", type=int, default=32, help="concurrent sessions")
    p.add_argument("--duration", "-d", type=float, default=30.0, help="audio per session, seconds")
    p.add_argument("--packet-ms", type=int, default=80, help="packet length in ms")
    p.add_argument("--trace", choices=("full", "meta", "off"), default="full")
    p.add_argument("--keep-traces", action="store_true", help="keep trace.jsonl files")
    p.add_argument("--output", "-o", required=True, help="output folder")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.duration <= 0 or args.packet_ms < 1:
        p.error("--sessions, --duration and --packet-ms must be positive")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.makedirs(args.output, exist_ok=True)
    summary = asyncio.run(main_async(args))
    with open(os.path.join(args.output, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    if not args.keep_traces and args.trace != "off":
        sessions_dir = os.path.join(args.output, "sessions")
        for name in os.listdir(sessions_dir) if os.path.isdir(sessions_dir) else []:
            try:
                os.remove(os.path.join(sessions_dir, name, "trace.jsonl"))
            except FileNotFoundError:
                pass
    pc = summary["pacing"]
    d = pc["deviation_ms"]
    proc = summary["processes"][0]
    s = summary["sessions"]
    verdict = "pacing-qualified" if summary["verdict"]["pacing_qualified"] else "UNQUALIFIED"
    print(
        f"python-reference  {verdict}, {s['completed']}/{s['configured']} sessions completed\n"
        f"packets           {pc['packets']} sent, {pc['late_packets']} late, "
        f"{pc['sends_over_20ms']} over 20 ms, {pc['sessions_with_violation']} sessions with a violation\n"
        f"deviation (ms)    p50 {d['p50']}  p90 {d['p90']}  p99 {d['p99']}  p99.9 {d['p999']}  max {d['max']}\n"
        f"process           {proc['cpu_cores']:.3f} cores, {proc['peak_rss_bytes'] / 2**20:.1f} MiB peak RSS, "
        f"loop lag max {proc['loop_lag_ms']['max']} ms\n"
        f"summary           {os.path.join(args.output, 'summary.json')}"
    )
    ok = summary["verdict"]["pacing_qualified"] and summary["verdict"]["complete"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
