//! Fault injection (`--inject-stall-ms`, `--inject-disk-stall-mb`, `--inject-cpu-starvation-ms`):
//! one worker reproduces, once and halfway through the run, each cause the sampler tells apart,
//! so users and tests can see what each looks like.

use crate::clock::monotonic_s;
use crate::contract::worker::Injection;
use crate::paths::RunPaths;
use rustix::thread::{gettid, sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
use std::io::Write as _;
use std::time::Duration;

/// Spins on the runtime thread: nothing else on it runs (a busy stall).
pub fn busy(ms: u32) -> Injection {
    let start_s = monotonic_s();
    let end_s = start_s + f64::from(ms) / 1000.0;
    while monotonic_s() < end_s {
        std::hint::spin_loop();
    }
    Injection {
        kind: "busy".to_string(),
        start_s,
        end_s: monotonic_s(),
        detail: format!("{ms} ms busy loop on the runtime thread"),
    }
}

/// Makes the runtime thread wait on the disk in `D`, as the seed's trace writes did when the
/// kernel wrote their pages back: a helper thread dirties `mb` MiB of page cache (the runtime runs
/// on meanwhile), then the runtime thread itself calls `fsync` on them and waits for their
/// writeback (`folio_wait_bit…`, `ext4_wait_block_bitmap`, `rq_qos_wait` on this kind of machine).
/// Copying the data is kept off the runtime thread so that the stall it sees is the disk's.
pub async fn disk(mb: u32, paths: &RunPaths, worker: u32) -> Injection {
    let path = paths.disk_stall(worker);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let dirty_path = path.clone();
    let spawned = std::thread::Builder::new()
        .name("disk-dirtier".to_string())
        .spawn(move || {
            let chunk = vec![0x5au8; 1 << 20];
            let written = std::fs::File::create(&dirty_path).and_then(|mut f| {
                for _ in 0..mb {
                    f.write_all(&chunk)?;
                }
                Ok(())
            });
            let _ = done_tx.send(written);
        });
    let dirtied = match spawned {
        Ok(_) => done_rx
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the dirtying thread died"))),
        Err(err) => Err(err),
    };
    let start_s = monotonic_s();
    let synced = dirtied.and_then(|()| {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.sync_all())
    });
    let end_s = monotonic_s();
    let _ = std::fs::remove_file(&path);
    Injection {
        kind: "disk_wait".to_string(),
        start_s,
        end_s,
        detail: match synced {
            Ok(()) => {
                format!("{mb} MiB dirtied by a helper thread, then fsynced from the runtime thread")
            }
            Err(err) => format!("{mb} MiB disk stall failed: {err}"),
        },
    }
}

fn cpu_set_of(cpu: usize) -> CpuSet {
    let mut set = CpuSet::new();
    set.set(cpu);
    set
}

/// Starves the runtime thread of CPU for `ms`: a thread pins itself and the runtime thread to the
/// runtime's CPU and spins there at real-time priority (or, where that is not allowed, eight
/// spinning threads at normal priority do). The runtime thread stays runnable but waits in the
/// run queue. Returns at once; the starving runs beside the runtime.
pub fn cpu_starvation(ms: u32) -> Injection {
    let (runtime_tid, cpu) = (gettid(), sched_getcpu());
    let original = sched_getaffinity(Some(runtime_tid)).unwrap_or_else(|_| cpu_set_of(cpu));
    let pinned = cpu_set_of(cpu);
    let start_s = monotonic_s();
    let end_s = start_s + f64::from(ms) / 1000.0;
    let (realtime_tx, realtime_rx) = std::sync::mpsc::channel();
    let spin = move |realtime: bool| {
        let _ = sched_setaffinity(None, &pinned);
        if realtime {
            // SCHED_FIFO at its lowest priority (1) for this thread; failure (no permission) is
            // reported, not fatal. rustix and nix do not wrap sched_setscheduler.
            use thread_priority::unix::{
                set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
                ThreadSchedulePolicy,
            };
            let ok = set_thread_priority_and_policy(
                thread_native_id(),
                thread_priority::ThreadPriority::Min,
                ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
            )
            .is_ok();
            let _ = realtime_tx.send(ok);
            if !ok {
                return;
            }
        }
        while monotonic_s() < end_s {
            std::hint::spin_loop();
        }
    };
    let _ = sched_setaffinity(Some(runtime_tid), &pinned);
    let leader = std::thread::Builder::new()
        .name("starver".to_string())
        .spawn({
            let spin = spin.clone();
            move || spin(true)
        });
    let realtime = leader.is_ok()
        && realtime_rx
            .recv_timeout(Duration::from_secs(1))
            .unwrap_or(false);
    let mut helpers = 0;
    if !realtime {
        for _ in 0..8 {
            let spin = spin.clone();
            if std::thread::Builder::new()
                .name("starver".to_string())
                .spawn(move || spin(false))
                .is_ok()
            {
                helpers += 1;
            }
        }
    }
    // A thread restores the runtime's CPUs when the starving ends (the runtime cannot do it:
    // it is the thread being starved).
    let _ = std::thread::Builder::new()
        .name("starver-end".to_string())
        .spawn(move || {
            // This thread inherited the runtime's pin: leave it first, so that the restore is
            // not itself starved by the spinners.
            let _ = sched_setaffinity(None, &original);
            std::thread::sleep(Duration::from_secs_f64((end_s - monotonic_s()).max(0.0)));
            let _ = sched_setaffinity(Some(runtime_tid), &original);
        });
    Injection {
        kind: "cpu_starvation".to_string(),
        start_s,
        end_s,
        detail: if realtime {
            format!("{ms} ms: a SCHED_FIFO thread spun on CPU {cpu}, the runtime pinned there")
        } else {
            format!("{ms} ms: {helpers} spinning threads on CPU {cpu}, the runtime pinned there (no real-time priority allowed)")
        },
    }
}
