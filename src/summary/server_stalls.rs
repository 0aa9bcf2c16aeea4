//! The summary's `server_stalls`: the workers' reply seconds searched for latency jumps the
//! client does not explain (see [`crate::sampler::server_stall`]).

use super::RunRecord;
use crate::contract::Role;
use crate::sampler::server_stall::{self, Found, Inputs};
use crate::sampler::{Episode, STALL_MS};

/// Searches the run for server stalls; `episodes` are the sampler's (empty without it).
pub fn find(record: &RunRecord<'_>, episodes: &[Episode]) -> Found {
    let results: Vec<_> = record
        .workers
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .collect();
    let worker_pids: Vec<u32> = results.iter().map(|r| r.pid).collect();
    let mut client_windows: Vec<[f64; 2]> = Vec::new();
    for r in &results {
        // A packet late because the server stopped reading is the server's doing
        // (send_backpressure), not a client stall.
        let w = crate::sampler::attribution::WorkerWindows::of(r);
        client_windows.extend(
            w.late_packets
                .iter()
                .enumerate()
                .filter(|&(i, _)| !w.held_back(i))
                .map(|(_, l)| *l),
        );
        client_windows.extend_from_slice(&r.loop_lag_windows);
    }
    client_windows.extend(
        episodes
            .iter()
            .filter(|e| e.loop_thread && e.duration_ms >= STALL_MS && worker_pids.contains(&e.pid))
            .map(|e| [e.start_s, e.end_s]),
    );
    let gate_s = results
        .iter()
        .filter_map(|r| r.gate_s)
        .reduce(f64::min)
        .unwrap_or(record.anchor.monotonic_s);
    server_stall::find(&Inputs {
        seconds: results.iter().map(|r| r.reply_seconds.as_slice()).collect(),
        client_windows,
        server_episodes: episodes
            .iter()
            .filter(|e| matches!(e.role, Role::Mock | Role::Server))
            .collect(),
        gate_s,
    })
}
