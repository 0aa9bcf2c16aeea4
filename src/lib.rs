//! duplexbench-tui: a paced load generator for full-duplex realtime speech WebSocket servers
//! that proves its own pacing while it runs.
//!
//! The process diagram of SPEC §3, as modules:
//!
//! * [`conductor`]: the process the user runs. Starts the [`mock`] child (unless `--url`) and the
//!   worker children, gates their start, reads their telemetry, and merges their result files
//!   into the summary ([`summary`], rendered by [`report`]). [`headless`] prints progress.
//! * [`worker`]: one worker process: S paced sessions on one async runtime, a [`looplag`]
//!   monitor and one [`trace`] writer thread.
//! * [`protocol`]: the wire protocols (native, openai, vllm) spoken by the worker and the mock;
//!   [`tls`] and [`secret`]: wss:// and the credentials that must never be written.
//! * [`cli`] and [`options`]: the command line as parsed, and as validated.
//! * [`stats`], [`clock`], [`procstat`], [`host`], [`sys`]: shared measurement plumbing.

// Tests may unwrap: a panic is how they fail.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod app;
pub mod audio;
pub mod cli;
pub mod clock;
pub mod conductor;
pub mod conform;
pub mod contract;
pub mod host;
pub mod live;
pub mod looplag;
pub mod mock;
pub mod options;
pub mod pacing;
pub mod procstat;
pub mod profile;
pub mod protocol;
pub mod report;
pub mod sampler;
pub mod secret;
pub mod stats;
pub mod summary;
pub mod sys;
pub mod tls;
pub mod trace;
pub mod ui;
pub mod verdict;
pub mod worker;
