//! The models a native `/v1/realtime` server serves (docs/protocol-native.md, "Profiles"). A
//! server serves one model, and the model fixes the terms it grants: the native unit it produces
//! output in, the input and output sample rates and the output modalities. The mock serves one profile, and
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
    /// PersonaPlex (NVIDIA personaplex-7b): 80 ms units, 24000 Hz input and output, audio only.
    Personaplex,
}

impl Profile {
    pub const ALL: [Profile; 3] = [Profile::Voicechat, Profile::Minicpmo, Profile::Personaplex];

    /// The name used on the command line and in output.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Voicechat => "voicechat",
            Profile::Minicpmo => "minicpmo",
            Profile::Personaplex => "personaplex",
        }
    }

    /// Input audio per native unit, and the boundary the tail is padded to.
    /// Whether the model takes video frames (`sglang.input_image.append`): MiniCPM-o's
    /// deployment grants `image` input.
    pub fn takes_images(self) -> bool {
        matches!(self, Profile::Minicpmo)
    }

    pub fn unit_ms(self) -> u32 {
        match self {
            Profile::Voicechat | Profile::Personaplex => 80,
            Profile::Minicpmo => 1000,
        }
    }

    pub fn output_sample_rate(self) -> u32 {
        match self {
            Profile::Voicechat => 22_050,
            Profile::Minicpmo | Profile::Personaplex => 24_000,
        }
    }

    /// The PCM16 rate the model takes (sglang-omni's gates resample their 16 kHz dataset to
    /// 24 kHz for PersonaPlex, `benchmarks/duplex/gates/models/personaplex.env`).
    pub fn input_sample_rate(self) -> u32 {
        match self {
            Profile::Voicechat | Profile::Minicpmo => 16_000,
            Profile::Personaplex => 24_000,
        }
    }

    /// `--profile voicechat or --profile minicpmo`: the profiles that take PCM16 at `rate`, as a
    /// message offers them; `None` when none does.
    pub fn offered_for(rate: u32) -> Option<String> {
        let flags: Vec<String> = Profile::ALL
            .iter()
            .filter(|p| p.input_sample_rate() == rate)
            .map(|p| format!("--profile {}", p.name()))
            .collect();
        (!flags.is_empty()).then(|| flags.join(" or "))
    }

    /// Every output modality the model can produce; a session may ask for fewer.
    pub fn output_modalities(self) -> &'static [&'static str] {
        match self {
            Profile::Voicechat | Profile::Personaplex => &["audio"],
            Profile::Minicpmo => &["audio", "text"],
        }
    }

    /// Whether the model speaks for every unit, so that the output audio is exactly one unit of
    /// audio per native unit (VoiceChat, PersonaPlex: their `continuous_output` in sglang-omni's
    /// benchmark profiles). MiniCPM-o may stay silent for a unit.
    pub fn continuous_output(self) -> bool {
        matches!(self, Profile::Voicechat | Profile::Personaplex)
    }

    /// Whether a response ends (`response.done`, reason `stop`) only after the client's end of
    /// input: VoiceChat's and PersonaPlex's do; MiniCPM-o's model stops replies of its own
    /// mid-session.
    pub fn stop_requires_end(self) -> bool {
        matches!(self, Profile::Voicechat | Profile::Personaplex)
    }

    /// A profile whose native unit is `unit_ms`. VoiceChat and PersonaPlex share theirs, and
    /// every term that depends on the unit alone (continuous output, stop after the end):
    /// [`Profile::from_grant`] tells them apart by their input rate.
    pub fn from_unit_ms(unit_ms: f64) -> Option<Profile> {
        Profile::ALL
            .into_iter()
            .find(|p| f64::from(p.unit_ms()) == unit_ms)
    }

    /// The profile whose native unit is `unit_ms` and whose input rate is `input_rate_hz`
    /// (16 kHz when the grant does not say): how `conform` tells which model it talks to.
    pub fn from_grant(unit_ms: f64, input_rate_hz: Option<f64>) -> Option<Profile> {
        let rate = input_rate_hz.unwrap_or(16_000.0);
        Profile::ALL
            .into_iter()
            .find(|p| f64::from(p.unit_ms()) == unit_ms && f64::from(p.input_sample_rate()) == rate)
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
        assert_eq!(
            Profile::from_grant(80.0, Some(24_000.0)),
            Some(Profile::Personaplex)
        );
        assert_eq!(Profile::from_grant(80.0, None), Some(Profile::Voicechat));
        assert_eq!(
            Profile::from_grant(1000.0, Some(16_000.0)),
            Some(Profile::Minicpmo)
        );
        assert_eq!(Profile::from_grant(1000.0, Some(24_000.0)), None);
    }
}
