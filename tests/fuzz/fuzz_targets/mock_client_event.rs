//! The mock's parser of client frames. Kept tiny: the mock's own code may move the parser.
//!
//! Not built yet (see Cargo.toml): the parser moved from `protocol::parse_client_event` into the
//! private module `mock::client_event`; `pub mod client_event;` in src/mock.rs enables it.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = duplexbench_tui::mock::client_event::parse(text);
    }
});
