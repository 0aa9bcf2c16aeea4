//! A worker's heap on transparent huge pages (issue 17).
//!
//! Each session touches a few cache lines of its own state a packet (its future, its machine,
//! its batch buffers, its socket's), spread over 4 KiB pages no other session shares: at
//! 1 × 256 about 20 MiB of heap, far more than the TLB covers, so most of those touches walked
//! the page tables first. On huge pages the same heap is ten TLB entries. The worker asks for
//! them once its sessions are set up, before the start gate: `MADV_HUGEPAGE` on the heap (for
//! what it grows into) and `MADV_COLLAPSE` (Linux 6.1) to move what is there now onto huge
//! pages at once, rather than whenever `khugepaged` next scans the process (every 10 s by
//! default: a run's first seconds would cost more than its last). What the heap grows into
//! after the gate (batch buffers, read buffers) is advised by glibc's `malloc` itself, told by
//! the conductor ([`advise_growth`]), and collapsed by `khugepaged` when it next scans the
//! process (10 s or more after the gate on the box of docs/benchmarks.md). `MADV_COLLAPSE`
//! fills the few unused small pages of a heap's huge page too: peak RSS rose 2 MiB at 1 × 256,
//! 8 MiB at 1 × 1024. A kernel whose `transparent_hugepage` is `never` is left alone.

use std::ffi::OsString;
use std::ops::Range;
use std::process::Command;

/// The size of a huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// The `GLIBC_TUNABLES` entry that has glibc's `malloc` advise `MADV_HUGEPAGE` on every
/// extension of its heap (glibc 2.35 and later; older ones and other C libraries ignore it).
const HUGE_PAGE_HEAP: &str = "glibc.malloc.hugetlb=1";
const HUGE_PAGE_HEAP_NAME: &str = "glibc.malloc.hugetlb";

/// Starts `command` (a worker) with glibc's `malloc` advising huge pages for its heap, unless
/// the user's own `GLIBC_TUNABLES` already says how (`glibc.malloc.hugetlb=0` turns it off).
/// A variable must be set before the process starts: glibc reads it once.
pub fn advise_growth(command: &mut Command) -> &mut Command {
    command.env(
        "GLIBC_TUNABLES",
        with_huge_page_heap(std::env::var_os("GLIBC_TUNABLES")),
    )
}

/// `GLIBC_TUNABLES` with [`HUGE_PAGE_HEAP`] added, unless it names that tunable already.
fn with_huge_page_heap(tunables: Option<OsString>) -> OsString {
    let Some(tunables) = tunables.filter(|t| !t.is_empty()) else {
        return HUGE_PAGE_HEAP.into();
    };
    let named = tunables
        .to_string_lossy()
        .split(':')
        .any(|entry| entry.split('=').next() == Some(HUGE_PAGE_HEAP_NAME));
    if named {
        return tunables;
    }
    let mut merged = tunables;
    merged.push(":");
    merged.push(HUGE_PAGE_HEAP);
    merged
}

/// What [`heap_on_huge_pages`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The heap's whole huge pages were collapsed (`bytes` of them).
    Collapsed { bytes: usize },
    /// Nothing asked: the kernel's setting is `never`, or the heap is smaller than a huge page.
    Skipped(&'static str),
    /// The kernel refused (an older kernel without `MADV_COLLAPSE`, no free huge page).
    Failed(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Collapsed { bytes } => write!(f, "{} MiB on huge pages", bytes >> 20),
            Outcome::Skipped(why) => f.write_str(why),
            Outcome::Failed(why) => write!(f, "the kernel refused them ({why})"),
        }
    }
}

/// Puts the process's heap (`[heap]` of `/proc/self/maps`) on transparent huge pages.
/// Takes a few milliseconds (the kernel copies the heap's pages): call it before the gate.
pub fn heap_on_huge_pages() -> Outcome {
    let setting = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    match setting {
        Ok(setting) if setting.contains("[never]") => {
            return Outcome::Skipped("the kernel's transparent_hugepage is never")
        }
        Err(_) => return Outcome::Skipped("this kernel has no transparent huge pages"),
        Ok(_) => {}
    }
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Outcome::Failed("cannot read /proc/self/maps".into());
    };
    let ranges: Vec<Range<usize>> = heap_ranges(&maps).filter_map(whole_huge_pages).collect();
    if ranges.is_empty() {
        return Outcome::Skipped("the heap holds no whole huge page");
    }
    let mut bytes = 0;
    for range in ranges {
        if let Err(err) = advise(range.clone()) {
            return Outcome::Failed(format!("madvise: {err}"));
        }
        bytes += range.len();
    }
    Outcome::Collapsed { bytes }
}

/// The address ranges of the `[heap]` lines of a `/proc/<pid>/maps`.
fn heap_ranges(maps: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    maps.lines()
        .filter(|line| line.trim_end().ends_with("[heap]"))
        .filter_map(|line| {
            let (start, end) = line.split_whitespace().next()?.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some(start..end)
        })
}

/// The part of `range` made of whole, aligned huge pages; `None` when there is none.
fn whole_huge_pages(range: Range<usize>) -> Option<Range<usize>> {
    let start = range.start.checked_next_multiple_of(HUGE_PAGE)?;
    let end = range.end / HUGE_PAGE * HUGE_PAGE;
    (start < end).then_some(start..end)
}

/// `MADV_HUGEPAGE`, then `MADV_COLLAPSE`, over `range`.
fn advise(range: Range<usize>) -> std::io::Result<()> {
    let (addr, len) = (range.start as *mut std::ffi::c_void, range.len());
    // SAFETY: neither advice changes what the memory holds or whether it is mapped (the
    // kernel only changes the pages behind it); a range that is no longer mapped gets ENOMEM.
    unsafe { rustix::mm::madvise(addr, len, rustix::mm::Advice::LinuxHugepage) }?;
    // rustix 1.1 and nix 0.31 have no MADV_COLLAPSE; libc's madvise with the same argument.
    // SAFETY: as above.
    if unsafe { libc::madvise(addr, len, libc::MADV_COLLAPSE) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(tunables: Option<&str>) -> String {
        with_huge_page_heap(tunables.map(OsString::from))
            .into_string()
            .unwrap()
    }

    #[test]
    fn the_huge_page_heap_is_added_to_the_users_tunables_and_never_overrides_them() {
        assert_eq!(merged(None), "glibc.malloc.hugetlb=1");
        assert_eq!(merged(Some("")), "glibc.malloc.hugetlb=1");
        assert_eq!(
            merged(Some("glibc.malloc.arena_max=2")),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
        );
        // The user's own setting stands, off or on, wherever it is.
        assert_eq!(
            merged(Some("glibc.malloc.hugetlb=0")),
            "glibc.malloc.hugetlb=0"
        );
        assert_eq!(
            merged(Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2")),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"
        );
        // A tunable whose name only starts the same is another one.
        assert_eq!(
            merged(Some("glibc.malloc.hugetlbx=1")),
            "glibc.malloc.hugetlbx=1:glibc.malloc.hugetlb=1"
        );
    }

    #[test]
    fn a_child_started_with_the_advice_has_it_in_its_environment() {
        let mut command = Command::new("sh");
        command.args(["-c", "printf %s \"$GLIBC_TUNABLES\""]);
        advise_growth(&mut command);
        let out = command.output().unwrap();
        let seen = String::from_utf8(out.stdout).unwrap();
        assert!(
            seen.split(':')
                .any(|e| e.starts_with("glibc.malloc.hugetlb=")),
            "{seen:?}"
        );
    }

    #[test]
    fn the_heap_is_found_in_the_maps_and_cut_to_whole_huge_pages() {
        let maps = "\
55f100d7e000-55f100ef1000 r--p 00000000 fe:00 5359053   /usr/bin/duplexbench-tui
55f140fb7000-55f142fb8000 rw-p 00000000 00:00 0                          [heap]
55f142fb8000-55f143000000 rw-p 00000000 00:00 0                          [heap]
7fe49c000000-7fe49e001000 rw-p 00000000 00:00 0
7fe4a9d1c000-7fe4a9d1e000 r-xp 00000000 00:00 0                          [vdso]
";
        let heap: Vec<_> = heap_ranges(maps).collect();
        assert_eq!(
            heap,
            [
                0x55f1_40fb_7000..0x55f1_42fb_8000,
                0x55f1_42fb_8000..0x55f1_4300_0000
            ]
        );
        // 32 MiB and a page from an unaligned start: 15 whole huge pages.
        assert_eq!(
            whole_huge_pages(heap[0].clone()),
            Some(0x55f1_4100_0000..0x55f1_42e0_0000)
        );
        // Under a huge page: none.
        assert_eq!(whole_huge_pages(heap[1].clone()), None);
        assert_eq!(
            whole_huge_pages(0x20_0000..0x40_0000),
            Some(0x20_0000..0x40_0000)
        );
    }
}
