//! The protocol's own latency figures, live: one mechanism for every protocol. A worker tallies
//! what its protocol measures as events arrive (histograms and counters, O(1) per event), and
//! once a second turns the tallies into a [`ProtocolFigures`] — a titled list of named latencies,
//! counts and rates — that rides its `histogram` telemetry. The conductor pools the workers'
//! lists figure by figure, and the dashboard's protocol panel and the headless lines render
//! whatever list they get without knowing the protocol. Which figures a protocol has and what
//! they are called is decided here, once, by [`ProtocolFigures::of`].
//!
//! Live figures are for watching a run: the summary's figures are computed from the sessions'
//! own records (Fun-ASR's from its per-client values, as its benchmark does) and never from
//! these.

use super::worker::{TurnCounts, WorkerHistograms};
use crate::options::Settings;
use crate::protocol::{Protocol, SessionType, TurnDetection};
use crate::stats::{DurationHistogram, SignedHistogram};
use serde::{Deserialize, Serialize};

/// What a worker tallies for the live figures of a transcript protocol (Fun-ASR), beside the
/// per-client records its result carries.
#[derive(Debug, Clone, Default)]
pub struct TranscriptTally {
    /// Audio start → the client's first result, once per client.
    pub first_update: DurationHistogram,
    /// STOP sent → the client's last final, once per client, when its session ends.
    pub final_after_stop: DurationHistogram,
    /// (receive − audio start) − `duration_ms` of every non-final result.
    pub response_lag: SignedHistogram,
    /// Results with a non-empty partial.
    pub partials: u64,
    pub finals: u64,
    /// The benchmark's error strings, counted as clients end.
    pub errors: u64,
}

/// One figure's value.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A latency, shown as p50 / p95 and its sample count.
    Latency(SignedHistogram),
    Count(u64),
    /// Events over the seconds they spanned (pooled by adding both).
    Rate {
        events: u64,
        seconds: f64,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    pub name: String,
    pub value: Value,
}

/// A protocol's live figures, in the order every output shows them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProtocolFigures {
    /// What the panel is called (`Fun-ASR`, `OpenAI turns`).
    pub title: String,
    pub figures: Vec<Figure>,
}

fn latency(name: &str, h: SignedHistogram) -> Figure {
    Figure {
        name: name.to_string(),
        value: Value::Latency(h),
    }
}

fn count(name: &str, n: u64) -> Figure {
    Figure {
        name: name.to_string(),
        value: Value::Count(n),
    }
}

impl ProtocolFigures {
    /// The figures of the run's protocol from a worker's histograms and tallies (its turn
    /// counts: what its sessions' turns counted so far). The native protocol's are
    /// sglang-omni's serving metrics under their names (`benchmarks/duplex/serving_metrics.py`)
    /// beside the client's own `accepted`.
    pub fn of(
        settings: &Settings,
        hist: &WorkerHistograms,
        transcripts: &TranscriptTally,
        turn_counts: &TurnCounts,
    ) -> ProtocolFigures {
        let turns = &hist.turns;
        let turn_figures = |title: &str, with_audio: bool, with_vad: bool, streaming: bool| {
            let mut figures = vec![latency(
                "first text",
                SignedHistogram::of(&turns.first_text_after_end),
            )];
            if streaming {
                figures.push(latency(
                    "text from start",
                    SignedHistogram::of(&turns.first_text_after_start),
                ));
            }
            if with_audio {
                figures.push(latency(
                    "first audio",
                    SignedHistogram::of(&turns.first_audio_after_end),
                ));
            }
            figures.push(latency("done", SignedHistogram::of(&turns.done_after_end)));
            if with_vad {
                figures.push(latency(
                    "speech stopped",
                    SignedHistogram::of(&turns.speech_stopped),
                ));
            }
            figures.push(Figure {
                name: "text deltas/s".to_string(),
                value: Value::Rate {
                    events: turn_counts.text_intervals,
                    seconds: turn_counts.text_span_s,
                },
            });
            figures.push(count("turns", turn_counts.ended));
            figures.push(count("answered", turn_counts.answered));
            figures.push(count("failed", turn_counts.failed));
            if turn_counts.refused > 0 {
                figures.push(count("refused", turn_counts.refused));
            }
            if turn_counts.unmatched > 0 {
                figures.push(count("answers to no turn", turn_counts.unmatched));
            }
            if turn_counts.unanswered > 0 {
                figures.push(count("unanswered", turn_counts.unanswered));
            }
            if turn_counts.early > 0 {
                figures.push(count("answered early", turn_counts.early));
            }
            figures.push(count("text deltas", turn_counts.text_deltas));
            if with_audio {
                figures.push(count("audio deltas", turn_counts.audio_deltas));
            }
            ProtocolFigures {
                title: title.to_string(),
                figures,
            }
        };
        match settings.protocol {
            Protocol::Native => {
                let serving = &hist.serving;
                ProtocolFigures {
                    title: "sglang-omni".to_string(),
                    figures: vec![
                        latency("accepted", SignedHistogram::of(&hist.accepted)),
                        latency("ttfa", serving.ttfa.clone()),
                        latency("unit_lag", serving.unit_lag.clone()),
                        latency("response_ttfa", serving.response_ttfa.clone()),
                        latency(
                            "output_gap_excess",
                            SignedHistogram::of(&serving.output_gap_excess),
                        ),
                        count("late sends", serving.late_sends),
                        count("responses", serving.responses),
                    ],
                }
            }
            Protocol::Funasr => ProtocolFigures {
                title: "Fun-ASR".to_string(),
                figures: vec![
                    latency(
                        "first update",
                        SignedHistogram::of(&transcripts.first_update),
                    ),
                    latency(
                        "final after STOP",
                        SignedHistogram::of(&transcripts.final_after_stop),
                    ),
                    latency("response lag", transcripts.response_lag.clone()),
                    count("partials", transcripts.partials),
                    count("finals", transcripts.finals),
                    count("errors", transcripts.errors),
                ],
            },
            Protocol::Openai => {
                // A transcription session's answers are its input's transcripts: no audio.
                let transcription =
                    settings.client.session_type == Some(SessionType::Transcription);
                turn_figures(
                    if transcription {
                        "OpenAI transcription turns"
                    } else {
                        "OpenAI turns"
                    },
                    !transcription && settings.modalities.iter().any(|m| m == "audio"),
                    settings.client.turn_detection.unwrap_or_default() == TurnDetection::ServerVad,
                    false,
                )
            }
            Protocol::Vllm => turn_figures("vLLM turns", false, false, true),
        }
    }

    /// The run's figures before any sample: what the panel shows until the workers report.
    pub fn template(settings: &Settings) -> ProtocolFigures {
        Self::of(
            settings,
            &WorkerHistograms::default(),
            &TranscriptTally::default(),
            &TurnCounts::default(),
        )
    }

    /// Adds another worker's figures of the same name and kind (pooling); others are ignored.
    pub fn add(&mut self, other: &ProtocolFigures) {
        for theirs in &other.figures {
            let Some(ours) = self.figures.iter_mut().find(|f| f.name == theirs.name) else {
                continue;
            };
            match (&mut ours.value, &theirs.value) {
                (Value::Latency(a), Value::Latency(b)) => a.add(b),
                (Value::Count(a), Value::Count(b)) => *a += b,
                (
                    Value::Rate { events, seconds },
                    Value::Rate {
                        events: e,
                        seconds: s,
                    },
                ) => {
                    *events += e;
                    *seconds += s;
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(protocol: Protocol) -> Settings {
        crate::options::settings_of(protocol.as_str(), &[])
    }

    #[test]
    fn every_protocol_names_its_own_figures() {
        let names = |p| {
            ProtocolFigures::template(&settings(p))
                .figures
                .into_iter()
                .map(|f| f.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Protocol::Native),
            [
                "accepted",
                "ttfa",
                "unit_lag",
                "response_ttfa",
                "output_gap_excess",
                "late sends",
                "responses"
            ]
        );
        assert_eq!(
            ProtocolFigures::template(&settings(Protocol::Native)).title,
            "sglang-omni"
        );
        assert_eq!(
            names(Protocol::Funasr),
            [
                "first update",
                "final after STOP",
                "response lag",
                "partials",
                "finals",
                "errors"
            ]
        );
        assert!(names(Protocol::Vllm).contains(&"text from start".to_string()));
        assert!(!names(Protocol::Vllm).contains(&"first audio".to_string()));
        assert!(names(Protocol::Openai).contains(&"speech stopped".to_string()));
    }

    #[test]
    fn figures_pool_by_name_and_survive_telemetry_issue_11() {
        let s = settings(Protocol::Funasr);
        let mut tally = TranscriptTally::default();
        tally.first_update.record_us(400_000);
        tally.response_lag.record_us(-20_000);
        tally.partials = 3;
        let one = ProtocolFigures::of(
            &s,
            &WorkerHistograms::default(),
            &tally,
            &TurnCounts::default(),
        );
        let line = serde_json::to_string(&one).unwrap();
        let back: ProtocolFigures = serde_json::from_str(&line).unwrap();
        let mut pooled = ProtocolFigures::template(&s);
        pooled.add(&back);
        pooled.add(&one);
        let by_name = |name: &str| {
            pooled
                .figures
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.value.clone())
        };
        let Some(Value::Latency(lag)) = by_name("response lag") else {
            panic!("{pooled:?}")
        };
        assert_eq!(lag.count(), 2);
        assert!((lag.quantile_ms(0.5) + 20.0).abs() < 0.1);
        assert!(matches!(by_name("partials"), Some(Value::Count(6))));
    }

    #[test]
    fn the_native_figures_are_the_workers_serving_histograms_and_tallies() {
        let mut hist = WorkerHistograms::default();
        hist.accepted.record_us(1_200);
        hist.serving.ttfa.record_us(310_000);
        hist.serving.unit_lag.record_us(-79_000);
        hist.serving.unit_lag.record_us(-78_000);
        hist.serving.late_sends = 2;
        hist.serving.responses = 5;
        let f = ProtocolFigures::of(
            &settings(Protocol::Native),
            &hist,
            &TranscriptTally::default(),
            &TurnCounts::default(),
        );
        let value = |name: &str| {
            f.figures
                .iter()
                .find(|f| f.name == name)
                .unwrap()
                .value
                .clone()
        };
        let Value::Latency(ttfa) = value("ttfa") else {
            panic!()
        };
        assert!((ttfa.quantile_ms(0.5) - 310.0).abs() < 0.5);
        let Value::Latency(lag) = value("unit_lag") else {
            panic!()
        };
        assert_eq!(lag.count(), 2);
        assert!(lag.quantile_ms(1.0) < -77.0, "negative: ahead of real time");
        let Value::Latency(accepted) = value("accepted") else {
            panic!()
        };
        assert_eq!(accepted.count(), 1);
        assert!(matches!(value("late sends"), Value::Count(2)));
        assert!(matches!(value("responses"), Value::Count(5)));
    }
}
