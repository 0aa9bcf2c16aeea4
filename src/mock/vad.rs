//! The openai mock's server VAD: voice activity on energy alone, enough to cut the shipped
//! speech sample (assets/speech-16k.wav) into turns at its pause. Fed PCM16 as it arrives, in
//! 20 ms frames; speech starts after [`START_MS`] of loud frames and stops after
//! [`SILENCE_MS`] of quiet ones (OpenAI's default `silence_duration_ms`, or the session's), stated where the
//! silence window ends: OpenAI's `speech_stopped.audio_end_ms` "includes the
//! `min_silence_duration_ms`" (openai-python's `InputAudioBufferSpeechStoppedEvent`).

/// Frames are this long.
const FRAME_MS: u64 = 20;
/// Loud frames in a row that start speech.
const START_MS: u64 = 60;
/// Quiet time that stops speech.
pub const SILENCE_MS: u64 = 500;
/// A frame whose RMS passes this (of 32768) is loud: about −34 dBFS.
const RMS_THRESHOLD: f64 = 650.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadEvent {
    /// Speech started this many ms into the input.
    Started { audio_start_ms: u64 },
    /// Speech stopped this many ms into the input: the end of the last loud frame and the
    /// silence window after it.
    Stopped { audio_end_ms: u64 },
}

#[derive(Debug)]
pub struct Vad {
    frame_samples: usize,
    /// Samples of the frame being filled, and their sum of squares.
    in_frame: usize,
    energy: f64,
    /// A byte of a sample split across two appends.
    odd_byte: Option<u8>,
    frames: u64,
    loud_run: u64,
    quiet_run: u64,
    speaking: bool,
    /// Quiet time that stops speech.
    silence_ms: u64,
}

impl Vad {
    pub fn new(sample_rate: u32) -> Vad {
        Vad {
            frame_samples: (sample_rate as usize * FRAME_MS as usize / 1000).max(1),
            in_frame: 0,
            energy: 0.0,
            odd_byte: None,
            frames: 0,
            loud_run: 0,
            quiet_run: 0,
            speaking: false,
            silence_ms: SILENCE_MS,
        }
    }

    /// Speech stops after `ms` of quiet (a session's `silence_duration_ms`), whole frames.
    pub fn set_silence_ms(&mut self, ms: u64) {
        self.silence_ms = ms.max(FRAME_MS);
    }

    /// Takes the next PCM16 little-endian bytes; pushes what they make happen.
    pub fn feed(&mut self, pcm: &[u8], events: &mut Vec<VadEvent>) {
        let mut bytes = pcm;
        if let Some(low) = self.odd_byte.take() {
            if let Some((&high, rest)) = bytes.split_first() {
                self.sample(i16::from_le_bytes([low, high]), events);
                bytes = rest;
            } else {
                self.odd_byte = Some(low);
                return;
            }
        }
        let mut pairs = bytes.chunks_exact(2);
        for pair in &mut pairs {
            self.sample(i16::from_le_bytes([pair[0], pair[1]]), events);
        }
        if let [last] = pairs.remainder() {
            self.odd_byte = Some(*last);
        }
    }

    fn sample(&mut self, sample: i16, events: &mut Vec<VadEvent>) {
        let v = f64::from(sample);
        self.energy += v * v;
        self.in_frame += 1;
        if self.in_frame == self.frame_samples {
            let rms = (self.energy / self.in_frame as f64).sqrt();
            self.in_frame = 0;
            self.energy = 0.0;
            self.frames += 1;
            self.frame(rms >= RMS_THRESHOLD, events);
        }
    }

    fn frame(&mut self, loud: bool, events: &mut Vec<VadEvent>) {
        let end_ms = self.frames * FRAME_MS;
        if loud {
            self.loud_run += 1;
            self.quiet_run = 0;
            if !self.speaking && self.loud_run * FRAME_MS >= START_MS {
                self.speaking = true;
                events.push(VadEvent::Started {
                    audio_start_ms: end_ms - self.loud_run * FRAME_MS,
                });
            }
        } else {
            self.loud_run = 0;
            self.quiet_run += 1;
            if self.speaking && self.quiet_run * FRAME_MS >= self.silence_ms {
                self.speaking = false;
                events.push(VadEvent::Stopped {
                    audio_end_ms: end_ms,
                });
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `ms` of 16 kHz PCM16 square wave (silence at amplitude 0).
    pub fn tone(ms: u64, amplitude: i16) -> Vec<u8> {
        (0..16 * ms)
            .flat_map(|i| {
                let s = if i % 2 == 0 { amplitude } else { -amplitude };
                s.to_le_bytes()
            })
            .collect()
    }

    #[test]
    fn speech_between_silences_makes_one_turn_whatever_the_packet_cut_issue_12() {
        // Speech 300..1300 ms; the stop is stated after the 500 ms silence window, as OpenAI's
        // audio_end_ms includes it.
        let mut audio = tone(300, 0);
        audio.extend(tone(1000, 3000));
        audio.extend(tone(800, 0));
        for packet in [2560, 1001, 7] {
            let mut vad = Vad::new(16_000);
            let mut events = Vec::new();
            for chunk in audio.chunks(packet) {
                vad.feed(chunk, &mut events);
            }
            assert_eq!(
                events,
                [
                    VadEvent::Started {
                        audio_start_ms: 300
                    },
                    VadEvent::Stopped { audio_end_ms: 1800 }
                ],
                "packets of {packet} bytes"
            );
        }
    }

    /// The shipped speech sample (assets/speech-16k.wav) as PCM16 bytes.
    pub fn speech_sample_pcm() -> Vec<u8> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/speech-16k.wav");
        let mut reader = hound::WavReader::open(path).unwrap();
        reader
            .samples::<i16>()
            .flat_map(|s| s.unwrap().to_le_bytes())
            .collect()
    }

    #[test]
    fn the_shipped_speech_sample_makes_turns_issue_12() {
        let pcm = speech_sample_pcm();
        let mut vad = Vad::new(16_000);
        let mut events = Vec::new();
        vad.feed(&pcm, &mut events);
        vad.feed(&vec![0; 16_000 * 2], &mut events);
        let stops = events
            .iter()
            .filter(|e| matches!(e, VadEvent::Stopped { .. }))
            .count();
        assert!(stops >= 2, "the pause splits it: {events:?}");
    }
}
