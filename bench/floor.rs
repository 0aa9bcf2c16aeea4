//! The floor: the least CPU a client can spend to keep S sessions of the native protocol streaming.
//!
//! It connects S sessions to a server (normally a fresh `duplexbench-tui mock`), sets each up
//! (`session.created` → `session.update` → `session.updated`), then on one thread, for each packet
//! that is due: one `read` that drains (and discards) whatever the server sent, and one `write` of
//! the append frame, built in place with a zero mask key. No JSON parsing, no UTF-8 checks, no
//! traces: only the system calls every client has to make, and one clock read per packet.
//! Sessions are spread evenly over one packet interval and due packets are sent in 1 ms groups
//! (the granularity of tokio's timer). At the end the sockets are dropped; the mock counts those
//! sessions as incomplete, which does not matter here.
//!
//! With `--one-gate` every session's first packet is due at the same instant (duplexbench-tui's
//! default start) and packets are sent in groups of 250 µs (its pacer's granularity), so that the
//! deviation of a burst of S sends at once is what the system calls alone cost.
//!
//! With `--on-arrival` it reads each socket when the server's frames arrive (one `epoll` for all
//! sockets and a `timerfd` for the sends, as duplexbench-tui's worker), not just before that
//! session's next send, and reads the clock once a wake-up: what a client that times each reply
//! must do at least. A read that empties the socket soon after data arrived makes the kernel
//! send the ACK from that `recv` (in the client's time), where a read 80 ms later finds the ACK
//! already sent by the delayed-ACK timer (a soft interrupt, in nobody's time).
//!
//! A packet is due when duplexbench-tui would call it due: packet 0 when its session starts,
//! packet k at packet 0's actual send plus k intervals; its deviation is |send start − due|.
//!
//! It prints one JSON line: `sessions`, `appends`, `one_gate`, `on_arrival`, `reads`, `group_us`, `max_lateness_ms`,
//! `deviation_ms` (`p50`, `p99`, `max`); `cpu_s`, `user_s`, `sys_s` and `wall_s` of the whole
//! process (set-up included, as for the clients' workers), `cores` = `cpu_s / wall_s`; and
//! `streaming_cpu_s` over the `streaming_s` of paced sending alone.
//!
//! ```sh
//! cargo build --release --example floor
//! ./target/release/examples/floor ws://127.0.0.1:PORT/v1/realtime 128 30 [--one-gate] [--on-arrival]
//! ```
//! `bench/run.py --floor` does this against a fresh mock, beside both clients.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use base64::Engine as _;
use duplexbench_tui::protocol::native::Native;
use duplexbench_tui::protocol::{self, ClientProtocol as _, EventIds, Milestone};
use tokio_tungstenite::tungstenite::{self, Message};

const PACKET: Duration = Duration::from_millis(80);
/// How long the set-up of one session may wait for the server's next frame.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Due packets sent together with staggered sessions: tokio's timer granularity.
const GROUP: Duration = Duration::from_millis(1);
/// ... and with one gate: duplexbench-tui's pacer granularity (`pacer::GRANULARITY_NS`).
const ONE_GATE_GROUP: Duration = Duration::from_micros(250);

struct Conn {
    // Kept so that the handshake state lives as long as the socket; not used after set-up.
    ws: tungstenite::WebSocket<TcpStream>,
    seq: u32,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let born = Instant::now();
    let args: Vec<String> = std::env::args().collect();
    let (flags, args): (Vec<_>, Vec<_>) = args.iter().partition(|a| a.starts_with("--"));
    let one_gate = flags.iter().any(|f| *f == "--one-gate");
    let on_arrival = flags.iter().any(|f| *f == "--on-arrival");
    let usage = "usage: floor WS_URL SESSIONS DURATION_S [--one-gate] [--on-arrival]";
    if let Some(unknown) = flags
        .iter()
        .find(|f| !matches!(f.as_str(), "--one-gate" | "--on-arrival"))
    {
        return Err(format!("unknown flag {unknown}; {usage}").into());
    }
    let [_, url, sessions, duration_s] = args.as_slice() else {
        return Err(usage.into());
    };
    let sessions: usize = sessions.parse()?;
    let duration = Duration::from_secs_f64(duration_s.parse()?);
    let addr = url
        .strip_prefix("ws://")
        .and_then(|rest| rest.split('/').next())
        .ok_or("the URL must be ws://HOST:PORT/...")?
        .to_owned();

    let mut conns = Vec::with_capacity(sessions);
    for k in 0..sessions {
        let stream = TcpStream::connect(&addr)?;
        stream.set_nodelay(true)?;
        // A set-up that never completes fails the floor rather than hanging the benchmark.
        stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
        let (mut ws, _) = tungstenite::client(url.as_str(), stream)?;
        wait_for(&mut ws, Milestone::Created)?;
        let ids = EventIds {
            shard: 0,
            worker: 0,
            session: k as u32,
        };
        let update = protocol::session_update(ids.control(0));
        ws.send(Message::text(update))?;
        wait_for(&mut ws, Milestone::Ready)?;
        ws.get_ref().set_nonblocking(true)?;
        conns.push(Conn { ws, seq: 0 });
    }

    let audio_b64 = base64::engine::general_purpose::STANDARD.encode(vec![
            0u8;
            protocol::input_packet_bytes(
                protocol::INPUT_SAMPLE_RATE,
                80
            )
        ]);
    let mut frame = Vec::with_capacity(16 << 10);
    let mut sink = vec![0u8; 256 << 10];
    let (slot, group) = if one_gate {
        (Duration::ZERO, ONE_GATE_GROUP)
    } else {
        (PACKET / sessions as u32, GROUP)
    };
    // Packet 0's actual send per session: what later packets are due from.
    let mut origin: Vec<Option<Instant>> = vec![None; sessions];
    let mut deviation_us = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
    // FLOOR_READ_EVERY=N reads a session's socket only before every N-th packet: with a large N,
    // what is left is the cost of the sends alone (replies wait in the socket buffer).
    let read_every: u32 = std::env::var("FLOOR_READ_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);

    let mut arrivals = if on_arrival {
        Some(Arrivals::new(&conns)?)
    } else {
        None
    };
    let mut reads = 0u64;
    let cpu_start = cpu_now();
    let t0 = Instant::now() + Duration::from_millis(20);
    let end = t0 + duration;
    let mut appends = 0u64;
    let mut max_lateness = Duration::ZERO;
    let mut next = 0usize; // the next packet in due order: session next % S, packet next / S
                           // The schedule (gate plus stagger plus k intervals) decides how many packets a session has
                           // and when the loop wakes; the due time decides the deviation, as duplexbench-tui's does.
    let scheduled =
        |next: usize| t0 + slot * (next % sessions) as u32 + PACKET * (next / sessions) as u32;
    let due = |origin: &[Option<Instant>], next: usize| match origin[next % sessions] {
        Some(first) => first + PACKET * (next / sessions) as u32,
        None => scheduled(next),
    };
    loop {
        if scheduled(next) >= end {
            break;
        }
        let wake = due(&origin, next);
        match &mut arrivals {
            Some(arrivals) => reads += arrivals.wait_until(wake, &conns, &mut sink)?,
            None => {
                let now = Instant::now();
                if wake > now {
                    std::thread::sleep(wake - now);
                }
            }
        }
        let group_end = Instant::now() + group;
        loop {
            let due_at = due(&origin, next);
            if due_at > group_end || scheduled(next) >= end {
                break;
            }
            let session = next % sessions;
            let start = Instant::now();
            max_lateness = max_lateness.max(start.saturating_duration_since(due_at));
            let first = *origin[session].get_or_insert(start);
            let due_at = first + PACKET * (next / sessions) as u32;
            let off = if start > due_at {
                start - due_at
            } else {
                due_at - start
            };
            deviation_us.saturating_record(off.as_micros() as u64);
            let conn = &mut conns[session];
            let mut stream = conn.ws.get_ref();
            if arrivals.is_none() && conn.seq % read_every == 0 {
                drain(&mut stream, &mut sink)?;
                reads += 1;
            }
            let id = EventIds {
                shard: 0,
                worker: 0,
                session: session as u32,
            }
            .id(conn.seq);
            let payload =
                protocol::append_frame(id, conn.seq, u64::from(conn.seq) * 80, &audio_b64);
            frame.clear();
            frame.push(0x81); // FIN + text
            frame.push(0x80 | 126); // masked, 16-bit length
            frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            frame.extend_from_slice(&[0, 0, 0, 0]); // zero mask key: the payload goes as it is
            frame.extend_from_slice(payload.as_bytes());
            write_all(&mut stream, &frame)?;
            conn.seq += 1;
            appends += 1;
            next += 1;
        }
    }
    let streaming_s = Instant::now().duration_since(t0).as_secs_f64();
    let (user, sys) = cpu_now();
    let (user0, sys0) = cpu_start;
    let (s_user, s_sys) = (user - user0, sys - sys0);
    let wall_s = born.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "sessions": sessions,
            "appends": appends,
            "one_gate": one_gate,
            "on_arrival": on_arrival,
            "reads": reads,
            "group_us": group.as_micros() as u64,
            "max_lateness_ms": max_lateness.as_secs_f64() * 1e3,
            "deviation_ms": {
                "p50": deviation_us.value_at_quantile(0.50) as f64 / 1e3,
                "p99": deviation_us.value_at_quantile(0.99) as f64 / 1e3,
                "max": deviation_us.max() as f64 / 1e3,
            },
            "cpu_s": user + sys,
            "user_s": user,
            "sys_s": sys,
            "wall_s": wall_s,
            "cores": (user + sys) / wall_s,
            "streaming_s": streaming_s,
            "streaming_cpu_s": s_user + s_sys,
        })
    );
    Ok(())
}

/// `--on-arrival`: every socket and a send timer in one `epoll`, as a tokio worker has them.
struct Arrivals {
    epoll: rustix::fd::OwnedFd,
    timer: rustix::fd::OwnedFd,
    events: Vec<rustix::event::epoll::Event>,
    /// An `Instant` and the same moment on `CLOCK_MONOTONIC`, to arm the timer by `Instant`s.
    base: (Instant, Duration),
}

/// The timer's key in the `epoll`; the sockets' keys are their session numbers.
const TIMER_KEY: u64 = u64::MAX;

impl Arrivals {
    fn new(conns: &[Conn]) -> std::io::Result<Arrivals> {
        use rustix::event::epoll::{self, CreateFlags, EventData, EventFlags};
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let epoll = epoll::create(CreateFlags::CLOEXEC)?;
        for (k, conn) in conns.iter().enumerate() {
            // Edge-triggered, as tokio registers sockets.
            let flags = EventFlags::IN | EventFlags::RDHUP | EventFlags::ET;
            epoll::add(
                &epoll,
                conn.ws.get_ref(),
                EventData::new_u64(k as u64),
                flags,
            )?;
        }
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        epoll::add(
            &epoll,
            &timer,
            EventData::new_u64(TIMER_KEY),
            EventFlags::IN | EventFlags::ET,
        )?;
        let mono = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let base = (
            Instant::now(),
            Duration::new(mono.tv_sec as u64, mono.tv_nsec as u32),
        );
        Ok(Arrivals {
            epoll,
            timer,
            events: Vec::with_capacity(conns.len() + 1),
            base,
        })
    }

    /// Reads every socket as its data arrives (one clock read a wake-up, for the arrival time a
    /// measuring client keeps) until `wake`; returns the number of socket reads.
    fn wait_until(
        &mut self,
        wake: Instant,
        conns: &[Conn],
        sink: &mut [u8],
    ) -> std::io::Result<u64> {
        use rustix::buffer::spare_capacity;
        use rustix::event::epoll;
        use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
        if wake <= Instant::now() {
            return Ok(0);
        }
        let at = self.base.1 + wake.saturating_duration_since(self.base.0);
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: Timespec {
                tv_sec: at.as_secs() as _,
                tv_nsec: at.subsec_nanos() as _,
            },
        };
        timerfd_settime(&self.timer, TimerfdTimerFlags::ABSTIME, &spec)?;
        let mut reads = 0;
        loop {
            self.events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut self.events), None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            std::hint::black_box(Instant::now());
            let mut fired = false;
            for event in &self.events {
                match event.data.u64() {
                    TIMER_KEY => {
                        let mut expirations = [0u8; 8];
                        let _ = rustix::io::read(&self.timer, &mut expirations);
                        fired = true;
                    }
                    k => {
                        drain(&mut conns[k as usize].ws.get_ref(), sink)?;
                        reads += 1;
                    }
                }
            }
            if fired || Instant::now() >= wake {
                return Ok(reads);
            }
        }
    }
}

fn wait_for(
    ws: &mut tungstenite::WebSocket<TcpStream>,
    milestone: Milestone,
) -> Result<(), Box<dyn std::error::Error>> {
    loop {
        if let Message::Text(text) = ws.read()? {
            let received = Native::default().classify(&text)?;
            if received.meaning.milestone() == Some(milestone) {
                return Ok(());
            }
        }
    }
}

/// One read, plus more only while the buffer came back full.
fn drain(stream: &mut &TcpStream, sink: &mut [u8]) -> std::io::Result<()> {
    loop {
        match stream.read(sink) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) if n == sink.len() => continue,
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

fn write_all(stream: &mut &TcpStream, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        match stream.write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// This process's (user, system) CPU seconds so far, from `getrusage` through nix's safe wrapper.
fn cpu_now() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    let secs = |t: nix::sys::time::TimeVal| t.num_microseconds() as f64 * 1e-6;
    getrusage(UsageWho::RUSAGE_SELF)
        .map_or((0.0, 0.0), |u| (secs(u.user_time()), secs(u.system_time())))
}
