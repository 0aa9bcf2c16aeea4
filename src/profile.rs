//! The models a native `/v1/realtime` server serves (docs/protocol-native.md, "Profiles"). A
//! server serves one model, and the model fixes the terms it grants: the native unit it produces
//! output in, the output sample rate and the output modalities. The mock serves one profile, and
//! `conform` checks a server against the profile its grant names.

use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Nemotron VoiceChat: 80 ms units, 22050 Hz output, audio only.
    Voicechat,
    /// MiniCPM-o native: 1000 ms units, 24000 Hz output, audio and text.
    Minicpmo,
}

impl Profile {
    pub const ALL: [Profile; 2] = [Profile::Voicechat, Profile::Minicpmo];

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Voicechat => "voicechat",
            Profile::Minicpmo => "minicpmo",
        }
    }

    /// Input audio per native unit, and the boundary the tail is padded to.
    pub fn unit_ms(self) -> u32 {
        match self {
            Profile::Voicechat => 80,
            Profile::Minicpmo => 1000,
        }
    }

    pub fn output_sample_rate(self) -> u32 {
        match self {
            Profile::Voicechat => 22_050,
            Profile::Minicpmo => 24_000,
        }
    }

    /// Every output modality the model can produce; a session may ask for fewer.
    pub fn output_modalities(self) -> &'static [&'static str] {
        match self {
            Profile::Voicechat => &["audio"],
            Profile::Minicpmo => &["audio", "text"],
        }
    }

    /// Whether the model speaks for every unit, so that the output audio is exactly one unit of
    /// audio per native unit (VoiceChat). MiniCPM-o may stay silent for a unit.
    pub fn continuous_output(self) -> bool {
        matches!(self, Profile::Voicechat)
    }

    /// Whether a response ends (`response.done`, reason `stop`) only after the client's end of
    /// input: VoiceChat's does; MiniCPM-o's model stops replies of its own mid-session.
    pub fn stop_requires_end(self) -> bool {
        matches!(self, Profile::Voicechat)
    }

    /// The profile whose native unit is `unit_ms`: how `conform` tells which model it talks to.
    pub fn from_unit_ms(unit_ms: f64) -> Option<Profile> {
        Profile::ALL
            .into_iter()
            .find(|p| f64::from(p.unit_ms()) == unit_ms)
    }
}

/// Bytes of PCM16 output in one native unit at `rate_hz` (the tail unit is padded to a whole one).
pub fn unit_output_bytes(unit_ms: u32, rate_hz: u32) -> usize {
    (u64::from(rate_hz) * u64::from(unit_ms) / 1000) as usize * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voicechat_units_carry_1764_samples() {
        let p = Profile::Voicechat;
        assert_eq!(unit_output_bytes(p.unit_ms(), p.output_sample_rate()), 3528);
        let p = Profile::Minicpmo;
        assert_eq!(
            unit_output_bytes(p.unit_ms(), p.output_sample_rate()),
            48_000
        );
    }

    #[test]
    fn a_grant_names_its_profile_by_its_unit() {
        assert_eq!(Profile::from_unit_ms(80.0), Some(Profile::Voicechat));
        assert_eq!(Profile::from_unit_ms(1000.0), Some(Profile::Minicpmo));
        assert_eq!(Profile::from_unit_ms(40.0), None);
    }
}
