//! The run's contracts: everything that crosses a process boundary or lands in the run folder
//! for another process to read — the worker's configuration, telemetry and commands, its result
//! file, the mock's statistics, process roles and names (the paths of a run folder are
//! [`crate::paths`]). The conductor, the workers, the sampler and the summary meet here instead
//! of in each other's internals.

pub mod figures;
pub mod mock;
pub mod telemetry;
pub mod worker;

use serde::{Deserialize, Serialize};

/// What a child process of a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Worker,
    Mock,
    /// A local server the run drives (`--server-pid`, or found listening on a loopback `--url`).
    Server,
}

/// `worker 3` or `mock`: how every output names a process.
pub fn process_name(role: Role, index: Option<u32>) -> String {
    match (role, index) {
        (Role::Worker, Some(i)) => format!("worker {i}"),
        (Role::Worker, None) => "worker".to_string(),
        (Role::Mock, _) => "mock".to_string(),
        (Role::Server, _) => "server".to_string(),
    }
}

/// CPU and memory a process used, as reported in result files.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ProcessUsage {
    /// User plus system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Wall time the CPU time is divided by.
    pub wall_seconds: f64,
    /// `cpu_seconds / wall_seconds`.
    pub cpu_cores: f64,
    /// Peak resident set size (`ru_maxrss`).
    pub peak_rss_bytes: u64,
    /// The part of `cpu_seconds` spent in the kernel on the process's behalf (system calls,
    /// the loopback TCP path they run): `/proc/self/stat`'s `stime`, in clock ticks (10 ms).
    /// Absent where `/proc` could not be read, and in results of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_cpu_seconds: Option<f64>,
    /// A worker's CPU while it streamed (absent for other processes, and when no session
    /// sent its last packet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<StreamingUsage>,
}

/// The CPU a worker spent from its start gate to the moment its last packet was sent (by the
/// last session streaming; when that one failed, to when it stopped): set-up
/// (connections, handshakes, session files) and the end (the last replies, closing, the last
/// writes) left out, as the floor client (`bench/floor.rs`) measures its own `streaming_cpu_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamingUsage {
    /// From the gate to the end of the last packet's send.
    pub seconds: f64,
    /// User plus system CPU time over those seconds.
    pub cpu_seconds: f64,
    /// Heap allocations (and reallocations) the worker's runtime thread made over those
    /// seconds. Every session's I/O, parsing and lines run there, so over the packets sent it
    /// is what a packet allocates (by design next to nothing: the lines' batch buffers, a few
    /// a session every half second). Absent where not counted and in results of earlier
    /// versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<u64>,
    /// The worker's memory on transparent huge pages at the window's end (`AnonHugePages` of
    /// `/proc/self/smaps_rollup`): whether its heap got the huge pages it asks for
    /// (docs/metrics.md). Absent where that file could not be read and in results of earlier
    /// versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_page_bytes: Option<u64>,
}
