//! The client's classifier of server frames for every dialect beside the native one (Fun-ASR,
//! OpenAI Realtime GA in a conversation and in a transcription session, vLLM): any text or
//! binary frame a server sends gets a meaning or a reason, never a panic (issue 13: "the
//! client's server-frame classifier of every protocol").

#![no_main]

use clap::Parser as _;
use duplexbench_tui::cli::{Cli, Command};
use duplexbench_tui::options;
use duplexbench_tui::protocol::funasr::Funasr;
use duplexbench_tui::protocol::openai::Openai;
use duplexbench_tui::protocol::vllm::Vllm;
use duplexbench_tui::protocol::{ClientProtocol, SessionType};
use libfuzzer_sys::fuzz_target;

thread_local! {
    static DIALECTS: Vec<Box<dyn ClientProtocol>> = {
        let argv = ["duplexbench-tui", "run", "-d", "1s", "-s", "1"];
        let Some(Command::Run(run)) = Cli::try_parse_from(argv).expect("valid flags").command
        else {
            unreachable!("`run` parses as the run command")
        };
        let s = options::validate(&run, String::new(), false)
            .expect("valid settings")
            .settings;
        // An OpenAI transcription session classifies its transcripts as answers.
        let mut transcription = s.client.clone();
        transcription.session_type = Some(SessionType::Transcription);
        vec![
            Box::new(Funasr::new(Some("zh"), Some("a,b"))),
            Box::new(Openai::new(&s.client, &s.modalities, None, s.packet_ms)),
            Box::new(Openai::new(&transcription, &[], Some("en"), s.packet_ms)),
            Box::new(Vllm::new(&s.client)),
        ]
    };
}

fuzz_target!(|data: &[u8]| {
    DIALECTS.with(|dialects| {
        for dialect in dialects {
            let _ = dialect.classify_binary(data);
            if let Ok(text) = std::str::from_utf8(data) {
                if let Ok(received) = dialect.classify(text) {
                    // Touch every part of the meaning, as the session does.
                    let _ = format!("{received:?}");
                }
            }
        }
    });
});
