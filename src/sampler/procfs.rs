//! Reading one thread from /proc: `stat`, `schedstat` and `wchan` of `/proc/<pid>/task/<tid>/`
//! (see proc(5)). The files are opened once and re-read with `pread` at offset 0 every tick, so a
//! sample costs a few system calls and no path lookups. The /proc root is a seam: tests point it
//! at a fake tree in a temporary folder.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The fields of `/proc/<pid>/task/<tid>/stat` the sampler uses (proc(5), numbering from 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    /// (2) the thread's name, e.g. `duplexbench-tui` for the main thread, `trace-writer`.
    pub comm: String,
    /// (3) R running or runnable, S sleeping, D uninterruptible (disk) sleep, …
    pub state: char,
    /// (14) user time, clock ticks.
    pub utime: u64,
    /// (15) system time, clock ticks.
    pub stime: u64,
    /// (39) the CPU it last ran on.
    pub processor: Option<u32>,
}

/// `/proc/<pid>/task/<tid>/schedstat`: time on the CPU, time waiting in the run queue (both ns),
/// and timeslices run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    pub on_cpu_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

pub fn parse_stat(text: &str) -> Option<Stat> {
    // The name may hold spaces and parentheses: it runs from the first '(' to the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3 (state).
    let state = fields.first()?.chars().next()?;
    let utime = fields.get(11)?.parse().ok()?;
    let stime = fields.get(12)?.parse().ok()?;
    let processor = fields.get(36).and_then(|p| p.parse().ok());
    Some(Stat {
        comm,
        state,
        utime,
        stime,
        processor,
    })
}

pub fn parse_schedstat(text: &str) -> Option<SchedStat> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some(SchedStat {
        on_cpu_ns: fields.next()?.ok()?,
        wait_ns: fields.next()?.ok()?,
        timeslices: fields.next()?.ok()?,
    })
}

/// The kernel function a thread sleeps in, or `None` when it reads as `0` (running, or hidden).
pub fn parse_wchan(text: &str) -> Option<String> {
    let name = text.trim();
    (!name.is_empty() && name != "0").then(|| name.to_string())
}

/// Why a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The thread is gone.
    Gone,
    /// The file exists but may not be read.
    Denied,
    /// It was read but did not parse (e.g. truncated).
    Malformed,
}

fn classify(err: &std::io::Error) -> ReadError {
    match err.kind() {
        std::io::ErrorKind::PermissionDenied => ReadError::Denied,
        _ => ReadError::Gone,
    }
}

/// The open files of one thread.
pub struct ThreadFiles {
    dir: PathBuf,
    stat: File,
    schedstat: File,
    wchan: Option<File>,
    buf: Vec<u8>,
}

/// The directory of a thread under `root`.
pub fn task_dir(root: &Path, pid: u32, tid: u32) -> PathBuf {
    root.join(pid.to_string())
        .join("task")
        .join(tid.to_string())
}

/// The thread ids of process `pid` under `root`.
pub fn list_threads(root: &Path, pid: u32) -> std::io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = std::fs::read_dir(root.join(pid.to_string()).join("task"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

impl ThreadFiles {
    pub fn open(root: &Path, pid: u32, tid: u32) -> Result<ThreadFiles, ReadError> {
        let dir = task_dir(root, pid, tid);
        let open = |name: &str| File::open(dir.join(name)).map_err(|e| classify(&e));
        Ok(ThreadFiles {
            stat: open("stat")?,
            schedstat: open("schedstat")?,
            wchan: None,
            dir,
            buf: vec![0; 1024],
        })
    }

    fn read(file: &File, buf: &mut [u8]) -> Result<usize, ReadError> {
        let n = file.read_at(buf, 0).map_err(|e| classify(&e))?;
        if n == 0 {
            // An exited thread's files read as empty.
            return Err(ReadError::Gone);
        }
        Ok(n)
    }

    pub fn stat(&mut self) -> Result<Stat, ReadError> {
        let n = Self::read(&self.stat, &mut self.buf)?;
        std::str::from_utf8(&self.buf[..n])
            .ok()
            .and_then(parse_stat)
            .ok_or(ReadError::Malformed)
    }

    pub fn schedstat(&mut self) -> Result<SchedStat, ReadError> {
        let n = Self::read(&self.schedstat, &mut self.buf)?;
        std::str::from_utf8(&self.buf[..n])
            .ok()
            .and_then(parse_schedstat)
            .ok_or(ReadError::Malformed)
    }

    /// Reads `wchan` (opened on first use: only threads seen in `D` pay for it).
    pub fn wchan(&mut self) -> Result<Option<String>, ReadError> {
        if self.wchan.is_none() {
            self.wchan = Some(File::open(self.dir.join("wchan")).map_err(|e| classify(&e))?);
        }
        let Some(file) = &self.wchan else {
            return Ok(None);
        };
        match file.read_at(&mut self.buf, 0) {
            Ok(n) => Ok(std::str::from_utf8(&self.buf[..n])
                .ok()
                .and_then(parse_wchan)),
            Err(e) => Err(classify(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_come_from_after_the_last_parenthesis() {
        // Fields 3..=41, with utime (14) = 123, stime (15) = 45 and processor (39) = 1.
        let fields: Vec<String> = (3..=41)
            .map(|n| match n {
                3 => "D".to_string(),
                14 => "123".to_string(),
                15 => "45".to_string(),
                39 => "1".to_string(),
                _ => "0".to_string(),
            })
            .collect();
        let text = format!("4242 (trace (w) r) {}", fields.join(" "));
        let text = text.as_str();
        let stat = parse_stat(text).unwrap();
        assert_eq!(stat.comm, "trace (w) r");
        assert_eq!(stat.state, 'D');
        assert_eq!((stat.utime, stat.stime), (123, 45));
        assert_eq!(stat.processor, Some(1));
    }

    #[test]
    fn truncated_files_do_not_parse() {
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(
            parse_schedstat("100 20 3\n"),
            Some(SchedStat {
                on_cpu_ns: 100,
                wait_ns: 20,
                timeslices: 3
            })
        );
    }

    #[test]
    fn wchan_of_zero_means_unknown() {
        assert_eq!(parse_wchan("0"), None);
        assert_eq!(
            parse_wchan("folio_wait_bit_common\n").as_deref(),
            Some("folio_wait_bit_common")
        );
    }

    #[test]
    fn this_process_can_be_read() {
        let pid = std::process::id();
        let tids = list_threads(Path::new("/proc"), pid).unwrap();
        assert!(tids.contains(&pid));
        let mut files = ThreadFiles::open(Path::new("/proc"), pid, pid).unwrap();
        assert!(files.stat().is_ok());
        assert!(files.schedstat().is_ok());
    }
}
