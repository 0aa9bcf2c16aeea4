//! The client's classifier of server frames, native protocol: any text or binary frame a
//! server sends gets a meaning or a reason, never a panic.

#![no_main]

use duplexbench_tui::protocol::native::Native;
use duplexbench_tui::protocol::ClientProtocol;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let native = Native::default();
    let _ = native.classify_binary(data);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(received) = native.classify(text) {
            // Touch every part of the meaning, as the session does.
            let _ = format!("{received:?}");
        }
    }
});
