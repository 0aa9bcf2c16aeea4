//! A frame for the server, as a [`crate::protocol`] builds it, the session's WebSocket sends it
//! and its [`crate::trace`] records it: one type both know, so that neither knows the other.

use std::cell::RefCell;
use std::rc::Rc;

/// Where a text packet's base64 audio sits in its frame: the bytes of the string value of its
/// `audio` key, without the quotes. The protocol knows it as it builds the frame; the meta
/// trace line, which writes the audio's length in its place, would otherwise search 3-5 kB of
/// cold memory a packet for the closing quote (about 2 % of the worker's CPU at 1 x 256, issue 17).
pub type AudioSpan = std::ops::Range<usize>;

/// Appends a packet's base64 audio to the frame being built and says where it put it.
pub fn push_audio(out: &mut String, audio_b64: &str) -> AudioSpan {
    let start = out.len();
    out.push_str(audio_b64);
    start..out.len()
}

/// A frame for the server, encoded once: the trace line is built from the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
}

impl Default for Outgoing {
    fn default() -> Self {
        Outgoing::Text(String::new())
    }
}

impl Outgoing {
    /// This frame made an empty text frame, keeping its buffer: a session builds each packet
    /// into the frame it built the last one in, so a packet allocates nothing (a 5 kB `String`
    /// a packet was malloc's slow path, and its free, on the runtime thread).
    pub fn text_buffer(&mut self) -> &mut String {
        if let Outgoing::Binary(bytes) = self {
            // Keeps the allocation too: an empty `Vec<u8>` is valid UTF-8.
            bytes.clear();
            let bytes = std::mem::take(bytes);
            *self = Outgoing::Text(String::from_utf8(bytes).unwrap_or_default());
        }
        match self {
            Outgoing::Text(text) => {
                text.clear();
                text
            }
            Outgoing::Binary(_) => unreachable!("made a text frame just above"),
        }
    }

    /// The same for a binary frame.
    pub fn binary_buffer(&mut self) -> &mut Vec<u8> {
        if let Outgoing::Text(text) = self {
            *self = Outgoing::Binary(std::mem::take(text).into_bytes());
        }
        match self {
            Outgoing::Binary(bytes) => {
                bytes.clear();
                bytes
            }
            Outgoing::Text(_) => unreachable!("made a binary frame just above"),
        }
    }

    /// The text of a text frame (what its trace line holds; binary frames have none).
    pub fn text(&self) -> Option<&str> {
        match self {
            Outgoing::Text(text) => Some(text),
            Outgoing::Binary(_) => None,
        }
    }
}

/// The buffers of frames already sent and laid out, shared by a worker's sessions: a packet is
/// built in the one given back last. A buffer a session kept for itself was cold in the cache
/// whenever its next packet came (256 sessions' frames are 1.3 MB); a handful of buffers
/// taken in turn stay warm. Bounded by the frames in flight at once: one when each packet's
/// line is laid out as it is sent (meta traces, no traces); at one start gate with full
/// traces, a frame a session.
#[derive(Debug, Clone, Default)]
pub struct FramePool(Rc<RefCell<Vec<Outgoing>>>);

impl FramePool {
    /// The buffer given back last, or an empty one.
    pub fn take(&self) -> Outgoing {
        self.0.borrow_mut().pop().unwrap_or_default()
    }

    /// A frame whose bytes are no longer needed, for a later packet to be built in.
    pub fn give_back(&self, frame: Outgoing) {
        self.0.borrow_mut().push(frame);
    }

    /// Buffers waiting to be taken (for tests: nothing else needs to know).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::{FramePool, Outgoing};

    #[test]
    fn the_pool_gives_the_buffer_given_back_last() {
        let pool = FramePool::default();
        assert_eq!(pool.take(), Outgoing::default(), "empty: a new buffer");
        pool.give_back(Outgoing::Text("a".into()));
        pool.give_back(Outgoing::Binary(vec![1]));
        let shared = pool.clone();
        assert_eq!(shared.len(), 2, "one pool for every clone");
        assert_eq!(shared.take(), Outgoing::Binary(vec![1]));
        assert_eq!(pool.take(), Outgoing::Text("a".into()));
        assert!(pool.is_empty());
    }

    #[test]
    fn a_frame_buffer_is_emptied_and_keeps_its_allocation_whatever_it_held() {
        let mut frame = Outgoing::Text("x".repeat(100));
        let text = frame.text_buffer();
        assert!(text.is_empty() && text.capacity() >= 100);
        text.push_str("{}");
        assert_eq!(frame.text(), Some("{}"));
        let bytes = frame.binary_buffer();
        assert!(
            bytes.is_empty() && bytes.capacity() >= 100,
            "the text's buffer, kept"
        );
        bytes.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(frame.text(), None, "binary frames have no text");
        let text = frame.text_buffer();
        assert!(
            text.is_empty() && text.capacity() >= 100,
            "not the bytes 0xff 0xfe"
        );
    }
}
