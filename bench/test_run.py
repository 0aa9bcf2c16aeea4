"""Unit checks of bench/run.py's bookkeeping (no clients are started): `python3 bench/test_run.py`.

.ci/run runs these before the smoke, which exercises the rest of run.py end to end."""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def record(cpu, complete=True, ok=True, qualified=True, p99=1.0):
    return {
        "ok": ok,
        "complete": complete,
        "qualified": qualified,
        "cpu_s_per_session_s": cpu,
        "deviation_p99_ms": p99,
        "late_packets": 0,
    }


def cells(table, label):
    """The cells of the table row that starts with `label`, stripped."""
    row = next(line for line in table if line.startswith(f"| {label}"))
    return [c.strip() for c in row.split("|")]


class Medians(unittest.TestCase):
    def test_incomplete_runs_are_left_out_when_a_run_completed(self):
        # The case that printed 1.20 x the floor: one run whose sessions all failed in set-up.
        broken = record(0.00002, complete=False, p99=0.0)
        good = record(0.00046, p99=7.7)
        self.assertEqual(run.measured_runs([broken, good]), [good])
        self.assertEqual(run.median_of(run.measured_runs([broken, good]), "cpu_s_per_session_s"), 0.00046)

    def test_with_no_complete_run_the_others_are_used_and_failed_runs_never(self):
        a, b = record(1.0, complete=False), record(3.0, complete=False)
        failed = record(100.0, ok=False)
        self.assertEqual(run.measured_runs([a, b, failed]), [a, b])
        self.assertEqual(run.measured_runs([failed]), [])

    def test_the_table_says_which_runs_the_medians_are_of(self):
        table = run.layout_table({
            run.OURS: [record(0.00002, complete=False), record(0.00046)],
            run.REF: [record(0.003), record(0.003)],
            run.FLOOR: [record(0.00020), record(0.00020)],
        })
        runs_row = next(line for line in table if line.startswith("| runs |"))
        self.assertIn("2 of 2 qualified, 1 complete; medians of the 1 complete", runs_row)
        self.assertNotIn("medians of", runs_row.split("|")[3])
        row = cells(table, "client CPU-s per session-s |")
        self.assertEqual(row[2], "0.00046")
        self.assertEqual(row[-2], "2.30")  # ours / floor, from the complete run only

    def test_steal_is_the_share_of_cpu_time_the_host_gave_elsewhere(self):
        self.assertEqual(run.steal_share((10, 1000), (60, 2000)), 0.05)
        self.assertIsNone(run.steal_share(None, (60, 2000)))
        self.assertIsNone(run.steal_share((10, 1000), (10, 1000)))
        steal = run.cpu_jiffies()
        if os.path.exists("/proc/stat"):
            self.assertIsNotNone(steal)
            self.assertLessEqual(steal[0], steal[1])
        table = run.layout_table({
            run.OURS: [dict(record(0.00046), host_steal_pct=11.2)],
            run.REF: [record(0.003)],
            run.FLOOR: [dict(record(0.00020), host_steal_pct=0.4)],
        })
        row = cells(table, "host steal during the run")
        self.assertEqual(row[2], "11.2")
        self.assertEqual(row[5], "0.4")
        # A share of the host's time is no client's figure: no ratios of it.
        self.assertEqual(row[4], "–")
        self.assertEqual(row[6], "–")
        self.assertEqual(row[7], "–")

    def test_tcp_segments_and_timer_acks_are_counted_a_packet(self):
        before = {"segments": 1000, "delayed_acks": 10}
        after = {"segments": 5000, "delayed_acks": 1110}
        self.assertEqual(
            run.tcp_per_packet(before, after, 1000),
            {"tcp_segments_per_packet": 4.0, "delayed_acks_per_packet": 1.1},
        )
        self.assertEqual(run.tcp_per_packet(None, after, 1000), {})
        self.assertEqual(run.tcp_per_packet(before, after, 0), {})
        if os.path.exists("/proc/net/netstat"):
            # The host's real counters move with real segments on loopback.
            import socket
            first = run.tcp_counters()
            self.assertIsNotNone(first)
            with socket.create_server(("127.0.0.1", 0)) as server:
                client = socket.create_connection(server.getsockname())
                peer, _ = server.accept()
                for _ in range(5):
                    client.sendall(b"append")
                    self.assertEqual(peer.recv(16), b"append")
                client.close()
                peer.close()
            second = run.tcp_counters()
            self.assertGreaterEqual(second["segments"] - first["segments"], 5)
            self.assertGreaterEqual(second["delayed_acks"], first["delayed_acks"])
        table = run.layout_table({
            run.OURS: [dict(record(0.00046), tcp_segments_per_packet=3.97, delayed_acks_per_packet=0.01)],
            run.REF: [record(0.003)],
            run.FLOOR: [dict(record(0.00020), tcp_segments_per_packet=3.88, delayed_acks_per_packet=1.11)],
        })
        row = cells(table, "ACKs sent by the delayed-ACK timer a packet")
        self.assertEqual((row[2], row[5]), ("0.01", "1.11"))
        self.assertEqual((row[4], row[7]), ("–", "–"), "counts of the host's, not ratios")
        row = cells(table, "TCP segments a packet")
        self.assertEqual((row[2], row[5]), ("3.97", "3.88"))

    def test_each_floor_has_its_own_columns(self):
        table = run.layout_table({
            run.OURS: [record(0.00046)],
            run.REF: [record(0.003)],
            run.FLOOR: [record(0.00020)],
            run.FLOOR_ARRIVAL: [record(0.00040)],
        })
        self.assertIn(f"| ours / {run.FLOOR} | {run.FLOOR_ARRIVAL} |", table[0])
        widths = {line.count("|") for line in table}
        self.assertEqual(len(widths), 1, table)
        row = cells(table, "client CPU-s per session-s |")
        self.assertEqual((row[-5], row[-2]), ("2.30", "1.15"))  # ours / each floor

    def test_streaming_cpu_is_compared_with_the_floors_and_not_the_reference(self):
        workers = [
            {"role": "worker", "streaming": {"seconds": 19.9, "cpu_seconds": 1.5}},
            {"role": "worker", "streaming": {"seconds": 20.1, "cpu_seconds": 1.75}},
        ]
        self.assertEqual(run.streaming_of(workers), {"streaming_cpu_seconds": 3.25, "streaming_seconds": 40.0})
        counted = [dict(w, streaming=dict(w["streaming"], allocations=n)) for w, n in zip(workers, (120, 80))]
        self.assertEqual(run.streaming_of(counted)["streaming_allocations"], 200)
        self.assertNotIn("streaming_allocations", run.streaming_of([counted[0], workers[1]]))
        # A worker without the window (an older build, a run stopped early): no figure at all.
        self.assertEqual(run.streaming_of([workers[0], {"role": "worker"}]), {})
        floor = run.figures_from_floor([{
            "cpu_s": 1.3, "sys_s": 1.1, "cores": 0.06, "streaming_cpu_s": 1.2, "streaming_s": 20.0,
            "appends": 64000, "max_lateness_ms": 1.0,
        }])
        self.assertEqual((floor["streaming_cpu_seconds"], floor["streaming_seconds"]), (1.2, 20.0))
        table = run.layout_table({
            run.OURS: [dict(record(0.00046), streaming_cpu_s_per_session_s=0.00036)],
            run.REF: [record(0.003)],
            run.FLOOR: [dict(record(0.00020), streaming_cpu_s_per_session_s=0.00024)],
        })
        row = cells(table, "client CPU-s per session-s, streaming only |")
        self.assertEqual((row[2], row[3], row[4]), ("0.00036", "–", "–"))
        self.assertEqual((row[5], row[7]), ("0.00024", "1.50"))  # the floor; ours / floor

    def test_the_cpu_a_packet_is_split_into_user_space_and_the_kernel(self):
        workers = [
            {"role": "worker", "system_cpu_seconds": 0.75},
            {"role": "worker", "system_cpu_seconds": 0.25},
        ]
        self.assertEqual(run.system_of(workers), {"client_system_cpu_seconds": 1.0})
        self.assertEqual(run.system_of([workers[0], {"role": "worker"}]), {})  # an older build
        ours = {"client_cpu_seconds": 3.0, "packets": 500_000, "client_system_cpu_seconds": 1.0}
        self.assertEqual(run.per_packet(ours), {"user_us_per_packet": 4.0, "system_us_per_packet": 2.0})
        floor = run.figures_from_floor([{
            "cpu_s": 1.5, "sys_s": 1.25, "cores": 0.06, "streaming_cpu_s": 1.2, "streaming_s": 20.0,
            "appends": 250_000, "max_lateness_ms": 1.0,
        }])
        self.assertEqual(run.per_packet(floor), {"user_us_per_packet": 1.0, "system_us_per_packet": 5.0})
        # The reference says nothing of its kernel share: no split, rather than a guess.
        self.assertEqual(run.per_packet({"client_cpu_seconds": 9.0, "packets": 500_000}), {})
        table = run.layout_table({
            run.OURS: [dict(record(0.00046), user_us_per_packet=4.0, system_us_per_packet=2.0)],
            run.REF: [record(0.003)],
            run.FLOOR: [dict(record(0.00020), user_us_per_packet=1.0, system_us_per_packet=5.0)],
        })
        user, kernel = cells(table, "client user CPU a packet"), cells(table, "client kernel CPU a packet")
        self.assertEqual((user[2], user[3], user[5], user[7]), ("4.0", "–", "1.0", "4.00"))
        self.assertEqual((kernel[2], kernel[5], kernel[7]), ("2.0", "5.0", "0.40"))


class WorkDir(unittest.TestCase):
    def test_a_used_work_dir_is_refused_before_anything_runs(self):
        with tempfile.TemporaryDirectory() as work:
            open(os.path.join(work, "old-run"), "w").close()
            done = subprocess.run(
                [sys.executable, run.__file__, "--layout", "1x1", "--no-floor",
                 "--binary", "/bin/true", "--work-dir", work],
                capture_output=True, text=True, timeout=60,
            )
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn("already holds files", done.stderr)
            self.assertIn("--work-dir", done.stderr)
            self.assertEqual(os.listdir(work), ["old-run"])

    def test_a_sigterm_stops_the_mock_and_the_client_of_the_run_in_progress(self):
        with tempfile.TemporaryDirectory() as tmp:
            # A stand-in for the binary: `mock` says where it listens, `run` waits; both wait in
            # a shell whose command line names this script, so that they can be found.
            fake = os.path.join(tmp, "fake-duplexbench")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\n"
                        "[ \"$1\" = mock ] && echo 'listening on 127.0.0.1:9'\n"
                        "trap 'kill $!; exit 0' TERM\n"
                        "sleep 30 & wait\n")
            os.chmod(fake, 0o755)
            bench = subprocess.Popen(
                [sys.executable, run.__file__, "--layout", "1x1", "--duration", "5", "--repeats", "1",
                 "--no-floor", "--binary", fake, "--work-dir", os.path.join(tmp, "work"),
                 "--results-dir", os.path.join(tmp, "results")],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )
            try:
                deadline = time.monotonic() + 30
                while len(processes_of(fake)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertEqual(len(processes_of(fake)), 2, "the mock and the client run")
                bench.send_signal(signal.SIGTERM)
                _, err = bench.communicate(timeout=30)
            finally:
                bench.kill()
            self.assertEqual(bench.returncode, 130, err)
            self.assertIn("interrupted", err)
            deadline = time.monotonic() + 10
            while processes_of(fake) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertEqual(processes_of(fake), [], "nothing is left running")


def processes_of(path):
    """Pids whose command line names `path`."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if path.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


if __name__ == "__main__":
    unittest.main(verbosity=1)
