//! The built-in mocks' sessions fed arbitrary client frames (`mock::feed_every_mock`: the
//! native one as MiniCPM-o, vllm, openai GA and beta): no client frame may panic a session.
//!
//! The input is lines, one client text frame each (a line that is not UTF-8 is skipped).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let texts: Vec<&str> = data
        .split(|&b| b == b'\n')
        .filter_map(|line| std::str::from_utf8(line).ok())
        .take(256)
        .collect();
    duplexbench_tui::mock::feed_every_mock(&texts);
});
