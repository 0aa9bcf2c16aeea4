//! The client session state machine fed arbitrary frames, driven the way the worker's I/O
//! drives it (src/worker/session.rs): it must never panic, whatever the server sends when.
//!
//! The input is lines; the first byte of each says what happens next:
//!
//! * `T` a text frame (the rest; not UTF-8 becomes an invalid-UTF-8 frame), `B` a binary frame,
//!   `C` a close frame (two bytes of code, then the reason), `L` a frame over the size limit;
//! * `P` the next packets fall due and are sent on time (as many as the rest has bytes, at
//!   least one), `O` the next packet's send blocks for 5 s, `S` streaming ends early (a stop);
//! * anything else lets 10 ms pass.
//!
//! Streaming also ends once every packet is sent, and the session ends when the machine says
//! `Done` or a frame ends it.

#![no_main]

use clap::Parser as _;
use duplexbench_tui::audio::Audio;
use duplexbench_tui::cli::{Cli, Command};
use duplexbench_tui::options::{self, Settings};
use duplexbench_tui::protocol::native::Native;
use duplexbench_tui::protocol::{EventIds, Outgoing};
use duplexbench_tui::worker::session::machine::{Action, Flow, Incoming, Machine};
use libfuzzer_sys::fuzz_target;
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

/// 1 s of 80 ms packets (13), two sessions per worker, as the machine's unit tests use.
fn settings() -> Settings {
    let argv = ["duplexbench-tui", "run", "-d", "1s", "-s", "2"];
    let Some(Command::Run(run)) = Cli::try_parse_from(argv).expect("valid flags").command else {
        unreachable!("`run` parses as the run command")
    };
    options::validate(&run, String::new(), false)
        .expect("valid settings")
        .settings
}

thread_local! {
    static FIXTURE: (Rc<Settings>, Rc<Audio>) = {
        let settings = settings();
        let audio = Audio::load(
            &settings.audio,
            settings.client.input_sample_rate,
            settings.packet_ms,
            settings.packets_per_session,
            settings.input_bytes(),
        )
        .expect("silence always loads");
        (Rc::new(settings), Rc::new(audio))
    };
    static STATS: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// The worker's counters, shared by every input. Their type (`worker::counters::WorkerStats`)
/// is public in a private module, so it cannot be named here; `T` is inferred from
/// `Machine::new`. (A `pub use` of it in src/worker.rs would make this a plain thread-local.)
///
/// Shared because their histograms cost more to make than a whole session does to run, and the
/// machine only adds to them (its windows are capped, and a u32 count of sessions would take 4
/// billion inputs to overflow), so no input sees another.
fn shared_stats<T: Default + 'static>() -> Rc<RefCell<T>> {
    STATS.with(|slot| {
        let mut slot = slot.borrow_mut();
        if let Some(stats) = slot
            .as_ref()
            .and_then(|b| b.downcast_ref::<Rc<RefCell<T>>>())
        {
            return stats.clone();
        }
        let stats = Rc::new(RefCell::new(T::default()));
        *slot = Some(Box::new(stats.clone()));
        stats
    })
}

const GATE_S: f64 = 10.0;

#[derive(PartialEq)]
enum State {
    Awaiting,
    Streaming,
    Over,
}

struct Drive {
    m: Machine,
    /// The frame every packet is built into.
    frame: Outgoing,
    packets: u32,
    seq: u32,
    now_s: f64,
    state: State,
}

impl Drive {
    /// Does what the machine says until it waits for the server or for the stream.
    fn advance(&mut self) {
        loop {
            match self.m.next_action() {
                Action::Send(_) => {}
                Action::Await(_) => {
                    self.state = State::Awaiting;
                    return;
                }
                Action::Stream => {
                    self.state = State::Streaming;
                    return;
                }
                Action::Done => {
                    self.state = State::Over;
                    return;
                }
            }
        }
    }

    fn end_streaming(&mut self) {
        self.m.streamed();
        self.advance();
    }

    fn hear(&mut self, frame: Incoming<'_>) {
        let heard = self.m.on_frame(frame, self.now_s);
        match heard.flow {
            Flow::Continue => {}
            Flow::Reached => {
                if self.state == State::Awaiting {
                    self.advance();
                }
            }
            Flow::End(_) => {
                if self.state == State::Streaming {
                    self.m.count_overdue(self.seq, GATE_S, self.now_s);
                    self.m.abandon(self.seq);
                }
                self.state = State::Over;
            }
        }
    }

    fn send_packets(&mut self, n: usize) {
        for _ in 0..n.clamp(1, 64) {
            if self.state != State::Streaming {
                return;
            }
            let due_s = self.m.due_s(self.seq, GATE_S).max(self.now_s);
            self.now_s = due_s;
            // One frame for every packet, as a session builds them.
            let (scheduled_s, _) = self.m.packet(self.seq, due_s, GATE_S, &mut self.frame);
            self.m.sent(self.seq, scheduled_s, due_s, due_s + 1e-4);
            self.seq += 1;
            if self.seq == self.packets {
                self.end_streaming();
            }
        }
    }

    fn step(&mut self, line: &[u8]) {
        let (op, rest) = line
            .split_first()
            .map_or((0, &[][..]), |(op, rest)| (*op, rest));
        self.now_s += 0.01;
        match op {
            b'T' => match std::str::from_utf8(rest) {
                Ok(text) => self.hear(Incoming::Text(text)),
                Err(_) => self.hear(Incoming::InvalidUtf8(
                    "a text frame that is not valid UTF-8",
                )),
            },
            b'B' => self.hear(Incoming::Binary(rest)),
            b'C' => {
                let close = match rest {
                    [hi, lo, reason @ ..] => Some((
                        u16::from_be_bytes([*hi, *lo]),
                        String::from_utf8_lossy(reason).into_owned(),
                    )),
                    _ => None,
                };
                self.hear(Incoming::Close(
                    close
                        .as_ref()
                        .map(|(code, reason)| (*code, reason.as_str())),
                ));
            }
            b'L' => self.hear(Incoming::TooLarge(
                String::from_utf8_lossy(rest).into_owned(),
            )),
            b'P' => self.send_packets(rest.len()),
            b'O' if self.state == State::Streaming => {
                self.now_s += 5.0;
                self.m.count_overdue(self.seq, GATE_S, self.now_s);
            }
            b'S' if self.state == State::Streaming => self.end_streaming(),
            _ => {}
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (settings, audio) = FIXTURE.with(|(s, a)| (s.clone(), a.clone()));
    let packets = settings.packets_per_session;
    let ids = EventIds {
        shard: 0,
        worker: 0,
        session: 1,
    };
    let m = Machine::new(
        Rc::new(Native::default()),
        ids,
        settings,
        audio,
        shared_stats(),
    );
    let mut drive = Drive {
        m,
        frame: Outgoing::default(),
        packets,
        seq: 0,
        now_s: 0.0,
        state: State::Awaiting,
    };
    drive.advance();
    for line in data.split(|&b| b == b'\n') {
        if drive.state == State::Over {
            break;
        }
        drive.step(line);
    }
    // Taken, as a session that ends returns it: a machine dropped with its outcome leaves it in
    // the shared counters (an abort's dropped session), which would grow input after input.
    let outcome = drive.m.take_outcome();
    let _ = format!("{:?}", outcome.status);
});
