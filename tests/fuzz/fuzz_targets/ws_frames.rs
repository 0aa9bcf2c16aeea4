//! The client's WebSocket frame decoder: any bytes a server sends, split into reads anywhere,
//! give the same messages (or the same error) as when they arrive in one read, and never a
//! panic or an allocation past the message limit.

#![no_main]

use bytes::BytesMut;
use duplexbench_tui::worker::session::wire::Decoder;
use libfuzzer_sys::fuzz_target;

/// The limit the decoder is given: small, so that the fuzzer reaches it.
const MAX_MESSAGE: usize = 4096;

/// What `reads` decode to, as text: each message, then the error that ended it, if any.
fn decoded<'a>(reads: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    let mut decoder = Decoder::new(MAX_MESSAGE);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(message)) => out.push(format!("{message:?}")),
                Ok(None) => break,
                Err(err) => {
                    out.push(format!("error: {err}"));
                    return out;
                }
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, bytes)) = data.split_first() else {
        return;
    };
    let whole = decoded(std::iter::once(bytes));
    let split = decoded(bytes.chunks(usize::from(step).max(1)));
    assert_eq!(whole, split, "the same bytes split into reads of {step}");
});
