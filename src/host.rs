//! Facts about the host that explain results: CPU, kernel, page-cache writeback
//! settings and the filesystem the traces go to.

use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    pub hostname: String,
    pub cpu_model: String,
    pub logical_cpus: usize,
    pub kernel: String,
    pub memory_total_bytes: u64,
    /// `vm.dirty_expire_centisecs`: how old dirty pages get before writeback (the seed's 30 s).
    pub dirty_expire_centisecs: Option<u64>,
    pub dirty_ratio: Option<u64>,
    pub dirty_background_ratio: Option<u64>,
    pub output_filesystem: OutputFilesystem,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputFilesystem {
    pub mount_point: String,
    pub fs_type: String,
    pub device: String,
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn read_number(path: &str) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// Reads the facts of this host; `output_dir` must exist.
pub fn collect(output_dir: &Path) -> HostFacts {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let memory_total_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024;
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let output = std::fs::canonicalize(output_dir).unwrap_or_else(|_| output_dir.to_path_buf());
    HostFacts {
        hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default(),
        cpu_model,
        logical_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        memory_total_bytes,
        dirty_expire_centisecs: read_number("/proc/sys/vm/dirty_expire_centisecs"),
        dirty_ratio: read_number("/proc/sys/vm/dirty_ratio"),
        dirty_background_ratio: read_number("/proc/sys/vm/dirty_background_ratio"),
        output_filesystem: filesystem_of(&output, &mounts),
    }
}

/// The mount with the longest mount point that contains `path` (see proc(5), /proc/pid/mounts).
fn filesystem_of(path: &Path, mounts: &str) -> OutputFilesystem {
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let device = f.next()?;
            let mount_point = f.next()?.replace("\\040", " ");
            let fs_type = f.next()?;
            path.starts_with(&mount_point).then(|| OutputFilesystem {
                mount_point,
                fs_type: fs_type.to_string(),
                device: device.to_string(),
            })
        })
        .max_by_key(|m| m.mount_point.len())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_mount_wins() {
        let mounts = "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n";
        let fs = filesystem_of(Path::new("/tmp/run/x"), mounts);
        assert_eq!(fs.fs_type, "tmpfs");
        let fs = filesystem_of(Path::new("/work/runs"), mounts);
        assert_eq!(
            (fs.fs_type.as_str(), fs.mount_point.as_str()),
            ("ext4", "/")
        );
    }

    #[test]
    fn this_host_has_a_cpu_and_a_kernel() {
        let facts = collect(Path::new("."));
        assert!(facts.logical_cpus >= 1);
        assert!(!facts.kernel.is_empty());
    }
}
