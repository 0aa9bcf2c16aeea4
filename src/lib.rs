//! duplexbench-tui: a paced load generator for full-duplex realtime speech WebSocket servers
//! that proves its own pacing while it runs.
//!
//! The process diagram (docs/architecture.md), as modules:
//!
//! * [`app`]: the table of contents — parse, validate ([`cli`] → [`options`]), run, exit code.
//! * [`conductor`]: the process the user runs. Starts the [`mock`] child (unless `--url`) and the
//!   worker children, claims the run folder, gates their start, follows their telemetry into
//!   the [`live`] state that the [`ui`] (dashboard or headless lines) reads, runs the
//!   [`sampler`], and builds the [`summary`] from their result files ([`report`] renders it).
//! * [`worker`]: one worker process: S paced sessions on one runtime (each a sans-I/O state
//!   machine speaking a [`protocol`]), a [`looplag`] monitor and one [`trace`] writer thread.
//! * [`contract`]: what crosses a process boundary — worker config and result, telemetry,
//!   process roles; [`paths`] names every path of a run folder.
//! * [`protocol`]: the seam to a wire protocol; [`mock`] serves the same protocols with no model;
//!   [`conform`] checks a server's events against a protocol's rules; [`profile`] is what a
//!   native server serves; a [`frame`] is what a protocol builds and a trace records.
//! * [`tls`] and [`secret`]: wss:// for every protocol, and the credentials that must never be
//!   written.
//! * [`sweep`]: the same run at several loads, one conductor run per level, and the knees.
//! * [`pacing`] and [`verdict`]: the one vocabulary for packets and the one verdict.
//! * [`audio`], [`stats`], [`clock`], [`procstat`], [`host`], [`sys`]: shared plumbing.

// Tests may unwrap: a panic is how they fail.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod app;
pub mod audio;
pub mod cli;
pub mod clock;
pub mod conductor;
pub mod conform;
pub mod contract;
pub mod frame;
pub mod host;
pub mod live;
pub mod looplag;
pub mod merge;
pub mod mock;
pub mod options;
pub mod pacing;
pub mod paths;
pub mod procstat;
pub mod profile;
pub mod protocol;
pub mod report;
pub mod sampler;
pub mod secret;
pub mod stats;
pub mod summary;
pub mod sweep;
pub mod sys;
pub mod tls;
pub mod trace;
pub mod ui;
pub mod verdict;
pub mod worker;
