//! Integration tests: real processes, real WebSocket connections on 127.0.0.1, real /proc.
//! One test binary with a module per topic.

#![allow(clippy::unwrap_used)]

mod audio_input;
mod bad_input;
mod conform;
mod connection_hints;
mod dashboard;
mod fake_funasr;
mod fake_server;
mod first_hour;
mod frozen;
mod funasr;
mod limits;
mod mock_protocol;
mod multihost;
mod openai;
mod orphans;
mod reliability;
mod report;
mod run_folder;
mod runs;
mod sampler;
mod suspects;
mod sweep;
mod traces;
mod util;
