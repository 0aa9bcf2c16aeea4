//! A/B of the sampler's /proc parsing (issue 9): the hand parsers in `sampler::procfs` against
//! the `procfs-core` crate's types, on the real `stat` and `schedstat` text of this process's
//! threads. Both parse from a buffer already read (the sampler reads with `pread` on open files;
//! that part is the same either way), so this measures the parsing alone, per thread sample.
//!
//! `cargo run --release --example procfs_ab [ROUNDS]`; figures in docs/sampler.md.

use duplexbench_tui::sampler::procfs::{parse_schedstat, parse_stat};
use procfs_core::process::{Schedstat, Stat};
use procfs_core::FromRead as _;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    // A few threads, so the texts are those of a real multi-threaded process.
    let _threads: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(2))))
        .collect();
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("read stat");
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("read schedstat");
    // Both must agree before their speed means anything.
    let ours = parse_stat(&stat).expect("ours parses");
    let theirs = Stat::from_read(stat.as_bytes()).expect("procfs parses");
    assert_eq!(
        (ours.comm.as_str(), ours.utime, ours.stime),
        (theirs.comm.as_str(), theirs.utime, theirs.stime)
    );
    assert_eq!(ours.state, theirs.state);
    let ours_s = parse_schedstat(&schedstat).expect("ours parses");
    let theirs_s = Schedstat::from_read(schedstat.as_bytes()).expect("procfs parses");
    assert_eq!(
        (ours_s.on_cpu_ns, ours_s.wait_ns),
        (theirs_s.sum_exec_runtime, theirs_s.run_delay)
    );

    // Malformed text (a fake tree, a torn read): ours says None; does theirs?
    for bad in ["(x) S 1", "1 (x)", "", "1 x S"] {
        let theirs = std::panic::catch_unwind(|| Stat::from_read(bad.as_bytes()).is_ok());
        println!(
            "malformed stat {bad:?}: hand parser {}, procfs-core {}",
            if parse_stat(bad).is_some() {
                "parses"
            } else {
                "None"
            },
            match theirs {
                Ok(true) => "parses",
                Ok(false) => "Err",
                Err(_) => "PANICS",
            }
        );
    }

    let time = |name: &str, f: &dyn Fn()| {
        // Warm up, then the best of three rounds (a shared box is noisy).
        f();
        let best = (0..3)
            .map(|_| {
                let started = Instant::now();
                for _ in 0..rounds {
                    f();
                }
                started.elapsed().as_secs_f64() * 1e9 / f64::from(rounds)
            })
            .fold(f64::INFINITY, f64::min);
        println!("{name:<34} {best:>8.0} ns per parse");
        best
    };
    let a = time("stat, hand parser", &|| {
        black_box(parse_stat(black_box(&stat)));
    });
    let b = time("stat, procfs-core Stat::from_read", &|| {
        black_box(Stat::from_read(black_box(stat.as_bytes())).ok());
    });
    let c = time("schedstat, hand parser", &|| {
        black_box(parse_schedstat(black_box(&schedstat)));
    });
    let d = time("schedstat, procfs-core Schedstat", &|| {
        black_box(Schedstat::from_read(black_box(schedstat.as_bytes())).ok());
    });
    println!(
        "procfs-core / hand: stat {:.2}x, schedstat {:.2}x",
        b / a,
        d / c
    );
    // What that is at the sampler's rate: a 5 ms tick, every thread of every watched process.
    let per_thread_s = 200.0;
    println!(
        "at 200 samples/s per thread: hand {:.4} % of a core per thread, procfs-core {:.4} %",
        (a + c) * per_thread_s / 1e7,
        (b + d) * per_thread_s / 1e7
    );
}
