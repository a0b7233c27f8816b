//! The kernel's own count of each process's energy on macOS: `proc_pid_rusage` with
//! `RUSAGE_INFO_V6`, whose `ri_energy_nj` Apple Silicon fills (macOS 12 and later; an Intel Mac
//! leaves it 0, which is read as "not counted").
//!
//! libc declares the function but not the V6 structure, so the call fills a buffer of the
//! structure's size and [`parse_rusage_v6`] reads the fields it needs at their offsets in
//! Apple's `<sys/resource.h>` layout: a 16-byte UUID, then 56 64-bit fields (42 named, 14
//! reserved); `ri_phys_footprint` is the 8th, `ri_energy_nj` the 41st. [`read_rusage_v6`] is
//! one of the workspace's two pieces of `unsafe` code (`scripts/unsafe-code` lists them).

use crate::error::Error;

/// `sizeof(struct rusage_info_v6)`.
pub const RUSAGE_INFO_V6_SIZE: usize = 16 + 56 * 8;
/// `RUSAGE_INFO_V6` (`<sys/resource.h>`).
pub const RUSAGE_INFO_V6: i32 = 6;
/// Field numbers after the UUID.
const USER_TIME: usize = 0;
const SYSTEM_TIME: usize = 1;
const PHYS_FOOTPRINT: usize = 7;
const ENERGY_NJ: usize = 40;

/// What energy per program needs of one `rusage_info_v6`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rusage {
    /// CPU time in Mach absolute-time units (nanoseconds × the timebase).
    pub user_time: u64,
    pub system_time: u64,
    /// `ri_phys_footprint`: the memory the process is charged for, bytes, as Activity Monitor
    /// shows it (its dirty and compressed pages, not the shared ones RSS counts whole).
    pub phys_footprint_bytes: u64,
    /// The energy the kernel counted for the process, nJ; `None` where it counts none.
    pub energy_nj: Option<u64>,
}

/// Reads a `rusage_info_v6` as the kernel wrote it (native byte order).
pub fn parse_rusage_v6(bytes: &[u8]) -> Result<Rusage, Error> {
    if bytes.len() != RUSAGE_INFO_V6_SIZE {
        return Err(Error::Parse {
            what: "rusage_info_v6",
            line: None,
            message: format!("{} bytes, expected {RUSAGE_INFO_V6_SIZE}", bytes.len()),
        });
    }
    let field = |n: usize| {
        let at = 16 + 8 * n;
        let mut word = [0_u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        u64::from_ne_bytes(word)
    };
    Ok(Rusage {
        user_time: field(USER_TIME),
        system_time: field(SYSTEM_TIME),
        phys_footprint_bytes: field(PHYS_FOOTPRINT),
        energy_nj: Some(field(ENERGY_NJ)).filter(|e| *e > 0),
    })
}

/// One process's `rusage_info_v6`. Another user's process answers `EPERM` unless this runs as
/// root; a process that ended, `ESRCH`; a macOS before 12, `EINVAL`.
#[cfg(target_os = "macos")]
#[allow(unsafe_code)]
pub fn read_rusage_v6(pid: u32) -> Result<Rusage, Error> {
    let c_pid =
        libc::c_int::try_from(pid).map_err(|e| Error::Transient(format!("pid {pid}: {e}")))?;
    // Eight-byte words: the structure's alignment.
    let mut buf = [0_u64; RUSAGE_INFO_V6_SIZE / 8];
    // SAFETY: `buf` is writable, 8-byte aligned and exactly `sizeof(struct rusage_info_v6)`
    // bytes, all the kernel writes for RUSAGE_INFO_V6; it outlives the call and nothing else
    // refers to it. The C prototype types the buffer `rusage_info_t *` but takes a pointer to
    // the structure itself.
    let rc = unsafe {
        libc::proc_pid_rusage(
            c_pid,
            RUSAGE_INFO_V6,
            buf.as_mut_ptr().cast::<libc::rusage_info_t>(),
        )
    };
    if rc != 0 {
        return Err(Error::Transient(format!(
            "proc_pid_rusage({pid}): {}",
            std::io::Error::last_os_error()
        )));
    }
    let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
    parse_rusage_v6(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer laid out as `struct rusage_info_v6`, with `fields` set (field number, value).
    fn laid_out(fields: &[(usize, u64)]) -> Vec<u8> {
        let mut words = [0_u64; 56];
        for (n, v) in fields {
            words[*n] = *v;
        }
        let mut bytes = vec![0xAB; 16];
        bytes.extend(words.iter().flat_map(|w| w.to_ne_bytes()));
        bytes
    }

    #[test]
    fn the_energy_is_read_from_the_41st_field_after_the_uuid() {
        // ri_user_time, ri_system_time, ri_penergy_nj (41) beside ri_energy_nj (40): only the
        // latter is the process's energy.
        // ri_resident_size (6) beside ri_phys_footprint (7): the footprint is what Activity
        // Monitor shows.
        let bytes = laid_out(&[
            (0, 7),
            (1, 3),
            (6, 40 << 20),
            (7, 9 << 20),
            (40, 1_500_000_000),
            (41, 9),
        ]);
        let r = parse_rusage_v6(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.user_time, r.system_time), (7, 3));
        assert_eq!(r.phys_footprint_bytes, 9 << 20);
        assert_eq!(r.energy_nj, Some(1_500_000_000));
    }

    #[test]
    fn no_energy_counted_is_none_not_zero_joules() {
        let r = parse_rusage_v6(&laid_out(&[(0, 7)])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.energy_nj, None);
    }

    #[test]
    fn a_v4_sized_buffer_is_refused() {
        let e = parse_rusage_v6(&[0; 16 + 36 * 8]).map(|_| ());
        assert!(matches!(e, Err(Error::Parse { .. })), "{e:?}");
    }
}
