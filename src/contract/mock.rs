//! The mock's statistics file (`mock-stats.json`, `mock --stats-output`): what the mock process
//! hands the conductor (and anyone else) when it stops. Built and written by `mock::stats`.

use crate::contract::ProcessUsage;
use crate::looplag::LoopLagStats;
use crate::stats::ShortPercentiles;
use serde::{Deserialize, Serialize};

/// The version of the statistics file layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The mock's statistics file (`--stats-output`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MockStats {
    pub schema_version: u32,
    pub pid: u32,
    pub listen_addr: String,
    /// WebSocket handshakes accepted.
    pub sessions_served: u64,
    /// Sessions that reached `session.closed`; `sessions_served - sessions_closed` ended otherwise
    /// (the client disconnected, or the session was still open when the mock stopped).
    pub sessions_closed: u64,
    /// Handshakes refused with HTTP 503 because `--max-sessions` were open.
    pub sessions_rejected: u64,
    /// `input_audio_buffer.append` events received, rejected ones included.
    pub appends_received: u64,
    /// `error` events sent, plus sessions ended by unreadable input.
    pub protocol_errors: u64,
    /// Per accepted packet: |(arrival − arrival of seq 0) − (t_start − t_start of seq 0)|, pooled
    /// over all sessions, in ms.
    pub arrival_deviation_ms: ShortPercentiles,
    /// Wake-up lateness of a 10 ms ticker on the mock's runtime, in ms.
    pub loop_lag_ms: LoopLagStats,
    pub usage: ProcessUsage,
    /// Handshake header names (lowercase) and how many handshakes carried each; values are
    /// never kept.
    #[serde(default)]
    pub request_headers: std::collections::BTreeMap<String, u64>,
}

/// The stdout line that carries the statistics when the file cannot be written.
pub const STATS_LINE_PREFIX: &str = "stats ";
