//! The mock's parser of client frames (`mock::client_event`): it must never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = duplexbench_tui::mock::client_event::parse(text);
    }
});
