//! The Fun-ASR mock's speech segments: the real server's `DynamicStreamingVAD`
//! (`funasr/models/fsmn_vad_streaming/dynamic_vad.py` over fsmn-vad) with the mock's energy
//! VAD ([`crate::mock::vad`]) standing in for the model.
//!
//! What is kept from the server: the silence that ends a segment grows shorter the longer the
//! segment has run — 2 s while it is at most 5 s long, then 1.5 s (10 s), 1 s (15 s), 0.8 s
//! (30 s), 0.4 s (45 s), 0.1 s beyond — measured from the segment's start to the end of the
//! audio fed, and set once per chunk fed, as the server sets it before each `feed`; a segment
//! starts fsmn-vad's 200 ms before the speech it heard (`lookback_time_start_point`) and ends
//! 100 ms after the last speech (`lookahead_time_end_point`), never before the last segment's
//! end nor after the audio fed. Not kept: fsmn-vad's model (loudness decides here) and its
//! 60 s cap on one segment (`max_single_segment_time`; the 0.1 s silence past 45 s ends long
//! speech sooner in practice).

use crate::mock::vad::{Vad, VadEvent};

/// 16 kHz PCM16: bytes per ms.
const BYTES_PER_MS: u64 = 32;
/// `DEFAULT_SILENCE_SCHEDULE`: (segment length up to, ms; the silence that ends it, ms).
const SILENCE_SCHEDULE: [(u64, u64); 6] = [
    (5_000, 2_000),
    (10_000, 1_500),
    (15_000, 1_000),
    (30_000, 800),
    (45_000, 400),
    (u64::MAX, 100),
];
/// fsmn-vad's `lookback_time_start_point`.
const LOOKBACK_MS: u64 = 200;
/// fsmn-vad's `lookahead_time_end_point`.
const LOOKAHEAD_MS: u64 = 100;

/// What a chunk fed made happen, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A segment of speech opened at this ms of the input.
    Opened { start_ms: u64 },
    /// The open segment closed: it covers these ms of the input.
    Closed { start_ms: u64, end_ms: u64 },
}

#[derive(Debug)]
pub struct Segmenter {
    vad: Vad,
    /// Audio fed, in bytes.
    fed_bytes: u64,
    /// The open segment's start, in ms of the input.
    open: Option<u64>,
    /// The end of the last closed segment.
    last_end_ms: u64,
    /// The silence the VAD was last set to wait for.
    silence_ms: u64,
    events: Vec<VadEvent>,
}

impl Default for Segmenter {
    fn default() -> Segmenter {
        Segmenter::new()
    }
}

impl Segmenter {
    pub fn new() -> Segmenter {
        let mut vad = Vad::new(16_000);
        let silence_ms = SILENCE_SCHEDULE[0].1;
        vad.set_silence_ms(silence_ms);
        Segmenter {
            vad,
            fed_bytes: 0,
            open: None,
            last_end_ms: 0,
            silence_ms,
            events: Vec::new(),
        }
    }

    /// The open segment's start (the server's `vad.current_speech_start`).
    pub fn open_start_ms(&self) -> Option<u64> {
        self.open
    }

    /// Feeds the next PCM16 bytes; pushes what they made happen into `changes`.
    pub fn feed(&mut self, pcm: &[u8], changes: &mut Vec<Change>) {
        self.fed_bytes += pcm.len() as u64;
        let fed_ms = self.fed_bytes / BYTES_PER_MS;
        // The server sets the threshold from the segment's length with this chunk in it.
        let length_ms = self.open.map_or(0, |start| fed_ms.saturating_sub(start));
        self.silence_ms = silence_after(length_ms);
        self.vad.set_silence_ms(self.silence_ms);
        self.events.clear();
        self.vad.feed(pcm, &mut self.events);
        for event in &self.events {
            match *event {
                VadEvent::Started { audio_start_ms } => {
                    let start_ms = audio_start_ms
                        .saturating_sub(LOOKBACK_MS)
                        .max(self.last_end_ms);
                    self.open = Some(start_ms);
                    changes.push(Change::Opened { start_ms });
                }
                VadEvent::Stopped { audio_end_ms } => {
                    // `audio_end_ms` is where the silence window ended.
                    let speech_end_ms = audio_end_ms.saturating_sub(self.silence_ms);
                    let start_ms = self.open.take().unwrap_or(self.last_end_ms);
                    let end_ms = (speech_end_ms + LOOKAHEAD_MS).min(fed_ms).max(start_ms);
                    self.last_end_ms = end_ms;
                    changes.push(Change::Closed { start_ms, end_ms });
                }
            }
        }
    }

    /// The input ended (the server's `finalize` at `STOP`): the open segment, closed at the
    /// end of the audio fed.
    pub fn finish(&mut self) -> Option<(u64, u64)> {
        let start_ms = self.open.take()?;
        let end_ms = (self.fed_bytes / BYTES_PER_MS).max(start_ms);
        self.last_end_ms = end_ms;
        Some((start_ms, end_ms))
    }
}

/// The silence that ends a segment this long (`_get_silence_threshold`).
fn silence_after(length_ms: u64) -> u64 {
    SILENCE_SCHEDULE
        .iter()
        .find(|(up_to, _)| length_ms <= *up_to)
        .map_or(100, |(_, silence)| *silence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::vad::tests::{speech_sample_pcm, tone};

    fn fed(audio: &[u8], packet: usize) -> Vec<Change> {
        let mut s = Segmenter::new();
        let mut changes = Vec::new();
        for chunk in audio.chunks(packet) {
            s.feed(chunk, &mut changes);
        }
        changes
    }

    #[test]
    fn the_silence_that_ends_a_segment_shrinks_as_it_grows_as_dynamic_vad() {
        assert_eq!(silence_after(0), 2_000);
        assert_eq!(silence_after(5_000), 2_000);
        assert_eq!(silence_after(5_001), 1_500);
        assert_eq!(silence_after(14_000), 1_000);
        assert_eq!(silence_after(29_000), 800);
        assert_eq!(silence_after(44_000), 400);
        assert_eq!(silence_after(46_000), 100);
    }

    #[test]
    fn a_short_pause_early_is_not_an_end_a_long_segment_ends_at_a_shorter_one() {
        // 3 s of speech, a 1.2 s pause (under the 2 s it takes while short), 8 s of speech,
        // a 1.2 s pause (over the 1 s it takes past 10 s), speech again.
        let mut audio = tone(300, 0);
        audio.extend(tone(3_000, 3_000));
        audio.extend(tone(1_200, 0));
        audio.extend(tone(8_000, 3_000));
        audio.extend(tone(1_200, 0));
        audio.extend(tone(1_000, 3_000));
        for packet in [3_200, 2_560, 999] {
            assert_eq!(
                fed(&audio, packet),
                [
                    Change::Opened { start_ms: 100 },
                    // The last speech ended at 12.5 s; 100 ms after it.
                    Change::Closed {
                        start_ms: 100,
                        end_ms: 12_600
                    },
                    // Heard at 13.7 s, opened 200 ms before.
                    Change::Opened { start_ms: 13_500 },
                ],
                "packets of {packet} bytes"
            );
        }
    }

    #[test]
    fn a_segment_never_starts_before_the_last_one_ended() {
        // Past 45 s a 100 ms pause ends a segment; the next speech, heard 100 ms later, would
        // open 200 ms before it.
        let mut audio = tone(46_000, 3_000);
        audio.extend(tone(100, 0));
        audio.extend(tone(500, 3_000));
        let changes = fed(&audio, 3_200);
        let Change::Closed { end_ms, .. } = changes[1] else {
            panic!("{changes:?}")
        };
        assert_eq!(end_ms, 46_100);
        assert_eq!(changes[2], Change::Opened { start_ms: 46_100 });
    }

    #[test]
    fn finish_closes_the_open_segment_at_the_end_of_the_input() {
        let mut s = Segmenter::new();
        let mut changes = Vec::new();
        s.feed(&tone(1_000, 3_000), &mut changes);
        s.feed(&tone(500, 0), &mut changes);
        assert_eq!(s.open_start_ms(), Some(0));
        assert_eq!(s.finish(), Some((0, 1_500)));
        assert_eq!(s.finish(), None, "nothing open after it");
        let mut quiet = Segmenter::new();
        quiet.feed(&tone(3_000, 0), &mut changes);
        assert_eq!(quiet.finish(), None, "silence opens nothing");
    }

    #[test]
    fn the_shipped_speech_sample_is_one_segment_and_looped_it_is_cut_at_its_pause() {
        let pcm = speech_sample_pcm();
        // Once: its 1.1 s pause is under the 2 s a short segment waits for.
        let once = fed(&pcm, 3_200);
        assert!(
            matches!(once[..], [Change::Opened { start_ms: 0 }]),
            "{once:?}"
        );
        // Five times (29 s): the pause ends a segment once it has run past 10 s.
        let looped: Vec<u8> = pcm.iter().copied().cycle().take(pcm.len() * 5).collect();
        let changes = fed(&looped, 3_200);
        let closed: Vec<(u64, u64)> = changes
            .iter()
            .filter_map(|c| match *c {
                Change::Closed { start_ms, end_ms } => Some((start_ms, end_ms)),
                Change::Opened { .. } => None,
            })
            .collect();
        assert!(
            (1..=3).contains(&closed.len()),
            "segments of 10-15 s: {changes:?}"
        );
        for (start, end) in closed {
            assert!((8_000..=16_000).contains(&(end - start)), "{changes:?}");
        }
    }
}
