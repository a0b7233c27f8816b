//! At rest the tray keeps mapped only the code it runs.
//!
//! A program's code and read-only data are pages of its files: the kernel maps them as they are
//! touched, 64 KiB around each touch (fault-around), and leaves them mapped for the life of the
//! process. So everything the tray ran once (starting the engine, opening the ledger, a
//! dashboard's requests) and its neighbours stays in its memory: 9.2 MiB of the tray's own 13 MB
//! binary at rest, more than half of what it held in all.
//!
//! [`trim_code`] unmaps those pages from the process (`madvise(MADV_DONTNEED)`), once a minute
//! after the start and then every [`TRIM_EVERY`]; the code the tray goes on running comes back
//! at its next touch as a minor fault from the page cache, where the pages stay until the kernel
//! needs the memory. Only segments the dynamic linker never writes are trimmed: loaded,
//! readable and not writable, outside the relocated read-only region (`PT_GNU_RELRO`), in an
//! object without text relocations, and not the kernel's vDSO. Writable and relocated pages are
//! the process's own data: dropping them would lose it, so they are never touched. Pages a
//! debugger wrote (a breakpoint) are the same, so a process being traced is not trimmed.
//!
//! The walk runs inside `dl_iterate_phdr`, which holds the dynamic linker's lock: no object is
//! unmapped or mapped in its place while its segments are trimmed. Linux only.

use std::ops::Range;
use std::time::Duration;

/// How long after the start the first trim waits: the start's code has run by then.
pub const FIRST_TRIM_AFTER: Duration = Duration::from_secs(60);
/// How often the tray trims after that, which also lets go of what a dashboard's visit ran.
pub const TRIM_EVERY: Duration = Duration::from_secs(600);

/// `DT_TEXTREL` and `DF_TEXTREL` in `DT_FLAGS` (`<elf.h>`): the object's code is relocated in
/// place, so its code pages are the process's own.
const DT_NULL: isize = 0;
const DT_TEXTREL: isize = 22;
const DT_FLAGS: isize = 30;
const DF_TEXTREL: usize = 0x4;
/// The most entries of one object's dynamic section read, so a malformed one ends the walk.
const MAX_DYNAMIC_ENTRIES: usize = 4096;

/// One program header of a loaded object, as far as trimming needs it; addresses are the
/// process's (the object's load bias added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub kind: SegmentKind,
    pub start: usize,
    /// `p_memsz`: the segment's size in memory.
    pub len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// `PT_LOAD`, writable or not (`PF_W`).
    Load {
        writable: bool,
    },
    /// `PT_GNU_RELRO`: written by the dynamic linker, then made read-only.
    Relro,
    Other,
}

/// The whole pages of `segments` that no one writes: each loaded read-only segment rounded
/// inwards to pages (a page it shares with a neighbouring segment is that neighbour's too),
/// less any page of a `PT_GNU_RELRO` region. `page` is the page size, a power of two.
pub fn trimmable(segments: &[Segment], page: usize) -> Vec<Range<usize>> {
    let down = |a: usize| a & !(page - 1);
    let up = |a: usize| a.checked_add(page - 1).map(down);
    let relro: Vec<Range<usize>> = segments
        .iter()
        .filter(|s| s.kind == SegmentKind::Relro)
        .filter_map(|s| Some(down(s.start)..up(s.start.checked_add(s.len)?)?))
        .collect();
    let mut out = Vec::new();
    for s in segments {
        if s.kind != (SegmentKind::Load { writable: false }) {
            continue;
        }
        let (Some(start), Some(end)) = (up(s.start), s.start.checked_add(s.len).map(down)) else {
            continue;
        };
        let mut pieces: Vec<Range<usize>> = std::iter::once(start..end).collect();
        for r in &relro {
            pieces = pieces
                .into_iter()
                .flat_map(|p| [p.start..p.end.min(r.start), p.start.max(r.end)..p.end])
                .collect();
        }
        out.extend(pieces.into_iter().filter(|p| p.start < p.end));
    }
    out
}

/// What one trim did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Objects (the program and its libraries) whose segments were trimmed.
    pub objects: usize,
    /// Bytes of address space handed back to the page cache (mapped or not before).
    pub bytes: usize,
    /// Objects left alone: text relocations, or the vDSO.
    pub skipped: usize,
}

/// Why nothing was trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTrimmed {
    /// A debugger (or `strace`, `perf` with uprobes) follows the process: its breakpoints live
    /// in private copies of code pages, which a trim would drop.
    Traced { tracer: u32 },
    /// `/proc/self/status` could not be read, so whether the process is traced is unknown.
    Unknown(String),
}

impl std::fmt::Display for NotTrimmed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Traced { tracer } => write!(f, "the process is traced (by pid {tracer})"),
            Self::Unknown(why) => write!(f, "whether the process is traced is unknown: {why}"),
        }
    }
}

/// `TracerPid` of a `/proc/PID/status`: `Some(0)` when none traces it, `None` when the line is
/// missing or not a number.
pub fn parse_tracer_pid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Unmaps the pages of this process's code and read-only data that no one writes (see the
/// module's rule); they come back from the page cache when next run.
pub fn trim_code() -> Result<Trimmed, NotTrimmed> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| NotTrimmed::Unknown(format!("/proc/self/status: {e}")))?;
    match parse_tracer_pid(&status) {
        Some(0) => Ok(walk::trim_loaded_objects()),
        Some(tracer) => Err(NotTrimmed::Traced { tracer }),
        None => Err(NotTrimmed::Unknown(
            "/proc/self/status has no TracerPid".into(),
        )),
    }
}

/// Trims a minute after the start and every [`TRIM_EVERY`] after, on the tray's runtime.
pub async fn at_rest() {
    tokio::time::sleep(FIRST_TRIM_AFTER).await;
    loop {
        match trim_code() {
            Ok(t) => tracing::debug!(
                "code unmapped until next run: {} objects, {} KiB ({} left alone)",
                t.objects,
                t.bytes / 1024,
                t.skipped
            ),
            Err(why) => tracing::debug!("code left mapped: {why}"),
        }
        tokio::time::sleep(TRIM_EVERY).await;
    }
}

/// The walk over the loaded objects: the one place here that reads the dynamic linker's
/// structures and calls `madvise` (`scripts/unsafe-code` lists it).
#[allow(unsafe_code)]
mod walk {
    use super::{
        trimmable, Segment, SegmentKind, Trimmed, DF_TEXTREL, DT_FLAGS, DT_NULL, DT_TEXTREL,
        MAX_DYNAMIC_ENTRIES,
    };

    /// `ElfW(Dyn)`: a tag and a value, each a word wide (`<elf.h>`; `libc` does not define it).
    #[repr(C)]
    struct Dyn {
        tag: isize,
        val: usize,
    }

    pub(super) fn trim_loaded_objects() -> Trimmed {
        let mut trimmed = Trimmed::default();
        // SAFETY: the callback only reads what `dl_iterate_phdr` hands it for the duration of
        // the call, and `trimmed` outlives the call and is touched by the callback alone.
        unsafe {
            libc::dl_iterate_phdr(
                Some(each_object),
                std::ptr::from_mut(&mut trimmed).cast::<libc::c_void>(),
            );
        }
        trimmed
    }

    /// SAFETY (callers: `dl_iterate_phdr` only): `info` points to a valid `dl_phdr_info` whose
    /// `dlpi_phdr` holds `dlpi_phnum` program headers of an object mapped for this call's
    /// length, and `data` to the `Trimmed` that `trim_loaded_objects` passed.
    unsafe extern "C" fn each_object(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        let (Some(info), Some(trimmed)) = (info.as_ref(), data.cast::<Trimmed>().as_mut()) else {
            return 0;
        };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        let base = info.dlpi_addr as usize;
        let headers = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
        let vdso = libc::getauxval(libc::AT_SYSINFO_EHDR) as usize;
        let mut segments = Vec::with_capacity(headers.len());
        let mut text_relocations = false;
        let mut is_vdso = false;
        for h in headers {
            let start = base.wrapping_add(h.p_vaddr as usize);
            let len = h.p_memsz as usize;
            let kind = match h.p_type {
                libc::PT_LOAD => SegmentKind::Load {
                    writable: h.p_flags & libc::PF_W != 0,
                },
                libc::PT_GNU_RELRO => SegmentKind::Relro,
                libc::PT_DYNAMIC => {
                    text_relocations = has_text_relocations(start as *const Dyn);
                    SegmentKind::Other
                }
                _ => SegmentKind::Other,
            };
            if vdso != 0
                && h.p_type == libc::PT_LOAD
                && (start..start.saturating_add(len)).contains(&vdso)
            {
                is_vdso = true;
            }
            segments.push(Segment { kind, start, len });
        }
        if text_relocations || is_vdso {
            trimmed.skipped += 1;
            return 0;
        }
        let page = match usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)) {
            Ok(p) if p.is_power_of_two() => p,
            _ => return 1,
        };
        let mut any = false;
        for range in trimmable(&segments, page) {
            // The range is whole pages of a read-only, never-written segment of an object the
            // dynamic linker keeps mapped while it holds the lock this callback runs under.
            if libc::madvise(
                range.start as *mut libc::c_void,
                range.end - range.start,
                libc::MADV_DONTNEED,
            ) == 0
            {
                trimmed.bytes += range.end - range.start;
                any = true;
            }
        }
        trimmed.objects += usize::from(any);
        0
    }

    /// SAFETY: `dynamic` is null or the object's mapped `PT_DYNAMIC`, ended by `DT_NULL`.
    unsafe fn has_text_relocations(dynamic: *const Dyn) -> bool {
        if dynamic.is_null() {
            return false;
        }
        for i in 0..MAX_DYNAMIC_ENTRIES {
            let entry = &*dynamic.add(i);
            match entry.tag {
                DT_NULL => return false,
                DT_TEXTREL => return true,
                DT_FLAGS if entry.val & DF_TEXTREL != 0 => return true,
                _ => {}
            }
        }
        // No end within bounds: not a dynamic section to trust, so treat it as relocated.
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    /// The tray binary's program headers at this build (`readelf -lW target/release/wattbar`),
    /// loaded at 0x5642_7f23_f000.
    fn tray_binary() -> Vec<Segment> {
        let base = 0x5642_7f23_f000;
        let load = |writable, vaddr: usize, len| Segment {
            kind: SegmentKind::Load { writable },
            start: base + vaddr,
            len,
        };
        vec![
            load(false, 0x0, 0x3d_59e8),
            load(false, 0x3d_6a00, 0x84_1b50),
            load(true, 0xc1_9550, 0x06_4ab0),
            load(true, 0xc7_e440, 0x00_a3f4),
            Segment {
                kind: SegmentKind::Relro,
                start: base + 0xc1_9550,
                len: 0x06_4ab0,
            },
        ]
    }

    #[test]
    fn the_tray_trims_its_code_and_constants_and_never_its_data() {
        let base = 0x5642_7f23_f000;
        let ranges = trimmable(&tray_binary(), PAGE);
        // Read-only data: 0x0 .. 0x3d59e8 rounded in: 0x3d5000, 981 whole pages.
        // Code: 0x3d6a00 .. 0xc18550 rounded in: 0x3d7000 .. 0xc18000 (2,113 pages, 8.25 MiB).
        assert_eq!(
            ranges,
            vec![base..base + 0x3d_5000, base + 0x3d_7000..base + 0xc1_8000]
        );
        assert!(ranges.iter().all(|r| r.end <= base + 0xc1_9000));
    }

    #[test]
    fn a_relro_region_inside_a_read_only_segment_is_cut_out() {
        // A linker that puts the relocated constants in the read-only segment's middle.
        let segments = [
            Segment {
                kind: SegmentKind::Load { writable: false },
                start: 0x10_0000,
                len: 0x10_000,
            },
            Segment {
                kind: SegmentKind::Relro,
                start: 0x10_4800,
                len: 0x1000,
            },
        ];
        // The relro region covers the pages 0x104000 and 0x105000: both are kept.
        assert_eq!(
            trimmable(&segments, PAGE),
            vec![0x10_0000..0x10_4000, 0x10_6000..0x11_0000]
        );
    }

    #[test]
    fn a_segment_smaller_than_a_page_or_writable_is_not_trimmed() {
        let segments = [
            Segment {
                kind: SegmentKind::Load { writable: false },
                start: 0x1_0100,
                len: 0xe00,
            },
            Segment {
                kind: SegmentKind::Load { writable: true },
                start: 0x2_0000,
                len: 0x10_000,
            },
            Segment {
                kind: SegmentKind::Load { writable: false },
                start: usize::MAX - 0x800,
                len: 0x1000,
            },
        ];
        assert_eq!(trimmable(&segments, PAGE), Vec::<Range<usize>>::new());
    }

    #[test]
    fn the_tracer_is_read_from_the_status_file() {
        let traced = "Name:\twattbar\nState:\tS (sleeping)\nTracerPid:\t4242\nUid:\t1000\n";
        assert_eq!(parse_tracer_pid(traced), Some(4242));
        assert_eq!(parse_tracer_pid("TracerPid:\t0\n"), Some(0));
        assert_eq!(parse_tracer_pid("Name:\twattbar\n"), None);
        assert_eq!(parse_tracer_pid("TracerPid:\tlots\n"), None);
    }
}
