//! Foreign load: CPU the box spent on processes that are not part of the run, once a second,
//! from `/proc/stat` (all CPUs' busy time) minus the run's own processes' `utime + stime`
//! (proc(5)), split into the client (workers and conductor), the server (the built-in mock or a
//! local server the run watches) and the rest. Seed 001's pitfall — "don't build while benchmarking" — made visible: seconds in
//! which others used more than a threshold of cores are windows the attribution can blame late
//! packets on when nothing better explains them. On a virtual machine part of that load can be
//! *steal time* (`/proc/stat`'s eighth field): the hypervisor running something else on this
//! VM's CPUs. It stalls the run as another process would, but no process on the box is to blame
//! for it, so it is counted in the foreign load and named apart.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Foreign load over this many cores in a second marks that second.
pub const DEFAULT_THRESHOLD_CORES: f64 = 0.5;

/// What the host load came to over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostLoad {
    pub threshold_cores: f64,
    /// Seconds sampled.
    pub seconds: u64,
    /// Seconds in which other processes used more than `threshold_cores`.
    pub seconds_over_threshold: u64,
    /// The most cores other processes used in one second, and on average (steal time
    /// included).
    pub foreign_cores_max: f64,
    pub foreign_cores_mean: f64,
    /// Of the foreign load, the steal time: CPU the hypervisor gave to something else while
    /// this VM wanted it (0 on bare metal), at most in one second and on average, in cores.
    #[serde(default)]
    pub steal_cores_max: f64,
    #[serde(default)]
    pub steal_cores_mean: f64,
    /// The run's own processes (workers, mock, conductor) on average, in cores.
    pub run_cores_mean: f64,
    /// The CPU split on average: the client (workers and conductor), the watched server (the
    /// built-in mock or `--server-pid`; absent when none is watched), the whole box, in cores.
    #[serde(default)]
    pub client_cores_mean: f64,
    #[serde(default)]
    pub server_cores_mean: Option<f64>,
    #[serde(default)]
    pub server_cores_max: Option<f64>,
    #[serde(default)]
    pub host_cores_mean: f64,
    /// `[from_s, to_s]` of consecutive seconds over the threshold (monotonic clock).
    pub windows: Vec<[f64; 2]>,
}

impl HostLoad {
    /// `, of it steal 0.12 (at most 0.60)` when the hypervisor took enough to show, else
    /// nothing: for the summaries' CPU split, after the foreign load it is part of.
    pub fn steal_note(&self) -> String {
        if self.steal_cores_max >= STEAL_SHOWN_CORES {
            format!(
                ", of it steal {:.2} (at most {:.2})",
                self.steal_cores_mean, self.steal_cores_max
            )
        } else {
            String::new()
        }
    }
}

/// All CPUs' time from `/proc/stat`'s first line, in jiffies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoxJiffies {
    /// user, nice, system, irq, softirq and steal (guest time is already inside user).
    pub busy: u64,
    /// steal alone: the hypervisor ran something else while this VM wanted its CPUs.
    pub steal: u64,
}

pub fn parse_box_jiffies(stat: &str) -> Option<BoxJiffies> {
    let line = stat.lines().next()?;
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    Some(BoxJiffies {
        busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7),
        steal: at(7),
    })
}

/// `utime + stime` of a whole process from `/proc/<pid>/stat`, in jiffies.
fn process_jiffies(root: &Path, pid: u32) -> u64 {
    std::fs::read_to_string(root.join(pid.to_string()).join("stat"))
        .ok()
        .and_then(|t| super::procfs::parse_stat(&t))
        .map_or(0, |s| s.utime + s.stime)
}

/// One second's CPU split, in cores, as the live views show it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuSplit {
    pub client_cores: f64,
    /// `None` when no server process is watched.
    pub server_cores: Option<f64>,
    /// Everything else on the box: its busy time minus the client, the server and the steal.
    pub other_cores: f64,
    /// Steal time: the hypervisor ran something else while this VM wanted its CPUs.
    pub steal_cores: f64,
}

/// Steal below this many cores is not worth a word in the live views and the summaries.
const STEAL_SHOWN_CORES: f64 = 0.01;

impl CpuSplit {
    /// `client 0.05, server 0.03, other 1.60 cores`, with `, steal 0.20` before `cores` when
    /// the hypervisor took some.
    pub fn describe(&self) -> String {
        let steal = self.steal_note();
        match self.server_cores {
            Some(server) => format!(
                "client {:.2}, server {server:.2}, other {:.2}{steal} cores",
                self.client_cores, self.other_cores
            ),
            None => format!(
                "client {:.2}, other {:.2}{steal} cores (no server watched)",
                self.client_cores, self.other_cores
            ),
        }
    }

    /// `, steal 0.20` when the steal is worth showing, else nothing.
    pub fn steal_note(&self) -> String {
        if self.steal_cores >= STEAL_SHOWN_CORES {
            format!(", steal {:.2}", self.steal_cores)
        } else {
            String::new()
        }
    }

    /// Other processes and steal: the load that is not the run's.
    pub fn foreign_cores(&self) -> f64 {
        self.other_cores + self.steal_cores
    }
}

/// Samples the host once a second.
pub struct HostLoadTracker {
    root: PathBuf,
    client_pids: Vec<u32>,
    server_pid: Option<u32>,
    ticks_per_second: f64,
    threshold_cores: f64,
    /// (time, the box, client, server) jiffies at the previous sample.
    last: Option<(f64, BoxJiffies, u64, u64)>,
    out: HostLoad,
    foreign_sum: f64,
    steal_sum: f64,
    run_sum: f64,
    client_sum: f64,
    server_sum: f64,
    host_sum: f64,
    /// The latest second's split, for the live views.
    pub latest: Option<CpuSplit>,
}

impl HostLoadTracker {
    /// Follows the client's `client_pids` and the server's `server_pid` under `root`;
    /// `/proc/stat` is `root/stat`.
    pub fn new(
        root: PathBuf,
        client_pids: Vec<u32>,
        server_pid: Option<u32>,
        threshold_cores: f64,
    ) -> Self {
        HostLoadTracker {
            root,
            client_pids,
            server_pid,
            ticks_per_second: rustix::param::clock_ticks_per_second() as f64,
            threshold_cores,
            last: None,
            out: HostLoad {
                threshold_cores,
                ..HostLoad::default()
            },
            foreign_sum: 0.0,
            steal_sum: 0.0,
            run_sum: 0.0,
            client_sum: 0.0,
            server_sum: 0.0,
            host_sum: 0.0,
            latest: None,
        }
    }

    /// One sample at `now_s` (call about once a second).
    pub fn sample(&mut self, now_s: f64) {
        let Some(host) = std::fs::read_to_string(self.root.join("stat"))
            .ok()
            .and_then(|t| parse_box_jiffies(&t))
        else {
            return;
        };
        let client: u64 = self
            .client_pids
            .iter()
            .map(|&p| process_jiffies(&self.root, p))
            .sum();
        let server = self
            .server_pid
            .map_or(0, |p| process_jiffies(&self.root, p));
        if let Some((last_s, last_host, last_client, last_server)) = self.last {
            let wall_s = now_s - last_s;
            if wall_s > 0.0 {
                let cores = |j: u64| j as f64 / self.ticks_per_second / wall_s;
                let client_cores = cores(client.saturating_sub(last_client));
                let server_cores = cores(server.saturating_sub(last_server));
                let host_cores = cores(host.busy.saturating_sub(last_host.busy));
                // A process that exits takes its CPU time with it: never below zero.
                let foreign = (host_cores - client_cores - server_cores).max(0.0);
                let steal = cores(host.steal.saturating_sub(last_host.steal)).min(foreign);
                self.client_sum += client_cores;
                self.server_sum += server_cores;
                self.host_sum += host_cores;
                if self.server_pid.is_some() {
                    let max = self.out.server_cores_max.get_or_insert(0.0);
                    *max = max.max(server_cores);
                }
                self.latest = Some(CpuSplit {
                    client_cores,
                    server_cores: self.server_pid.map(|_| server_cores),
                    other_cores: foreign - steal,
                    steal_cores: steal,
                });
                self.record(last_s, now_s, foreign, steal, client_cores + server_cores);
            }
        }
        self.last = Some((now_s, host, client, server));
    }

    /// One second: `foreign` cores not the run's, `steal` of them the hypervisor's.
    fn record(&mut self, from_s: f64, to_s: f64, foreign: f64, steal: f64, run_cores: f64) {
        let o = &mut self.out;
        o.seconds += 1;
        self.foreign_sum += foreign;
        self.steal_sum += steal;
        self.run_sum += run_cores;
        o.foreign_cores_max = o.foreign_cores_max.max(foreign);
        o.steal_cores_max = o.steal_cores_max.max(steal);
        if foreign > self.threshold_cores {
            o.seconds_over_threshold += 1;
            match o.windows.last_mut() {
                Some(w) if (from_s - w[1]).abs() < 1e-6 => w[1] = to_s,
                _ => o.windows.push([from_s, to_s]),
            }
        }
    }

    pub fn finish(mut self) -> HostLoad {
        if self.out.seconds > 0 {
            let n = self.out.seconds as f64;
            let mean = |sum: f64| (sum / n * 1000.0).round() / 1000.0;
            self.out.foreign_cores_mean = mean(self.foreign_sum);
            self.out.steal_cores_mean = mean(self.steal_sum);
            self.out.run_cores_mean = mean(self.run_sum);
            self.out.client_cores_mean = mean(self.client_sum);
            self.out.host_cores_mean = mean(self.host_sum);
            if self.server_pid.is_some() {
                self.out.server_cores_mean = Some(mean(self.server_sum));
            }
        }
        self.out.foreign_cores_max = (self.out.foreign_cores_max * 1000.0).round() / 1000.0;
        self.out.steal_cores_max = (self.out.steal_cores_max * 1000.0).round() / 1000.0;
        self.out.server_cores_max = self
            .out
            .server_cores_max
            .map(|m| (m * 1000.0).round() / 1000.0);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_time_leaves_out_idle_and_iowait_and_keeps_steal_apart() {
        let stat = "cpu  100 5 20 1000 50 3 2 1 7 0\ncpu0 50 2 10 500 25 1 1 0 0 0\n";
        assert_eq!(
            parse_box_jiffies(stat),
            Some(BoxJiffies {
                busy: 100 + 5 + 20 + 3 + 2 + 1,
                steal: 1
            })
        );
        assert_eq!(parse_box_jiffies("intr 1 2 3"), None);
    }

    #[test]
    fn seconds_over_the_threshold_merge_into_windows_issue_15() {
        let mut t = HostLoadTracker::new(PathBuf::from("/nonexistent"), vec![], None, 0.5);
        t.record(10.0, 11.0, 0.9, 0.0, 0.2);
        t.record(11.0, 12.0, 1.1, 0.7, 0.2);
        t.record(12.0, 13.0, 0.1, 0.0, 0.2);
        t.record(13.0, 14.0, 0.8, 0.1, 0.2);
        let load = t.finish();
        assert_eq!(load.seconds_over_threshold, 3);
        assert_eq!(load.windows, vec![[10.0, 12.0], [13.0, 14.0]]);
        assert_eq!(load.foreign_cores_max, 1.1);
        assert!((load.foreign_cores_mean - 0.725).abs() < 1e-9);
        assert_eq!(load.steal_cores_max, 0.7);
        assert!((load.steal_cores_mean - 0.2).abs() < 1e-9);
        assert_eq!(load.steal_note(), ", of it steal 0.20 (at most 0.70)");
        let calm = HostLoad {
            steal_cores_max: 0.009,
            ..HostLoad::default()
        };
        assert_eq!(calm.steal_note(), "");
    }

    #[test]
    fn foreign_load_is_the_box_minus_the_client_and_the_server_on_a_fake_proc_issue_15() {
        let root =
            std::env::temp_dir().join(format!("duplexbench-hostload-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("42")).unwrap();
        std::fs::create_dir_all(root.join("43")).unwrap();
        let proc_stat = |pid: u32, jiffies: u64| {
            let mut fields = vec!["0".to_string(); 50];
            fields[10] = jiffies.to_string();
            std::fs::write(
                root.join(pid.to_string()).join("stat"),
                format!("{pid} (p) S {}\n", fields.join(" ")),
            )
            .unwrap();
        };
        // `busy` jiffies of user time and `steal` more of steal time.
        let write = |busy: u64, steal: u64, run: u64| {
            std::fs::write(
                root.join("stat"),
                format!("cpu  {busy} 0 0 5000 0 0 0 {steal} 0 0\n"),
            )
            .unwrap();
            let mut fields = vec!["0"; 50];
            let run = run.to_string();
            fields[10] = &run;
            std::fs::write(
                root.join("42").join("stat"),
                format!("42 (worker) S {}\n", fields[..50].join(" ")),
            )
            .unwrap();
        };
        let mut t = HostLoadTracker::new(root.clone(), vec![42], Some(43), 0.5);
        t.ticks_per_second = 100.0;
        write(1000, 0, 100);
        proc_stat(43, 500);
        t.sample(1.0);
        // One second later the box used 150 jiffies (1.5 cores), the client 30 (0.3 cores),
        // the server 20 (0.2 cores).
        // One more second: the box's busy and steal jiffies, the client's and the server's.
        let mut second = |at_s: f64, busy: u64, steal: u64, client: u64, server: u64| {
            write(busy, steal, client);
            proc_stat(43, server);
            t.sample(at_s);
            t.latest.unwrap()
        };
        assert_eq!(
            second(2.0, 1150, 0, 130, 520).describe(),
            "client 0.30, server 0.20, other 1.00 cores"
        );
        // The next second the box was as busy, but 0.6 cores of it were the hypervisor's
        // (steal): other processes used 0.4.
        let split = second(3.0, 1240, 60, 160, 540);
        assert_eq!(
            split.describe(),
            "client 0.30, server 0.20, other 0.40, steal 0.60 cores"
        );
        assert!((split.foreign_cores() - 1.0).abs() < 1e-9);
        let load = t.finish();
        assert_eq!(load.seconds, 2);
        assert!((load.foreign_cores_max - 1.0).abs() < 1e-9, "{load:?}");
        assert!((load.steal_cores_max - 0.6).abs() < 1e-9, "{load:?}");
        assert!((load.steal_cores_mean - 0.3).abs() < 1e-9, "{load:?}");
        assert!((load.run_cores_mean - 0.5).abs() < 1e-9);
        assert!((load.client_cores_mean - 0.3).abs() < 1e-9);
        assert_eq!(load.server_cores_mean, Some(0.2));
        assert!((load.host_cores_mean - 1.5).abs() < 1e-9);
        // Steal is load the run did not make: both seconds are over the threshold.
        assert_eq!(load.seconds_over_threshold, 2);
        let _ = std::fs::remove_dir_all(&root);
    }
}
