//! Trimming unmaps the program's code and keeps everything it wrote: run in a process of its
//! own (one test in this file), so no other test's code is faulted in between the readings.
#![cfg(target_os = "linux")]

use wattbar_tray::trim;

/// The code of this test program and its libraries: the address ranges of their executable
/// file mappings (`/proc/self/maps`).
fn code_ranges() -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_else(|e| panic!("maps: {e}"));
    let hex = |h| u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{h}: {e}"));
    maps.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let file = fields.get(5).is_some_and(|p| p.starts_with('/'));
            let (a, b) = fields.first()?.split_once('-')?;
            (fields.get(1)?.contains('x') && file).then(|| (hex(a), hex(b)))
        })
        .collect()
}

const PAGE: u64 = 4096;

/// Which pages of `ranges` are mapped now, from `/proc/self/pagemap` (bit 63 of each page's
/// entry), read into buffers allocated beforehand so that the reading itself maps as little
/// code as it can.
struct Pagemap {
    file: std::fs::File,
    entries: Vec<(u64, Vec<u8>)>,
}

impl Pagemap {
    fn new(ranges: &[(u64, u64)]) -> Self {
        let file =
            std::fs::File::open("/proc/self/pagemap").unwrap_or_else(|e| panic!("pagemap: {e}"));
        let entries = ranges
            .iter()
            .map(|&(a, b)| (a / PAGE * 8, vec![0; ((b - a) / PAGE * 8) as usize]))
            .collect();
        Self { file, entries }
    }

    fn mapped_kib(&mut self) -> u64 {
        for (offset, buf) in &mut self.entries {
            std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, *offset)
                .unwrap_or_else(|e| panic!("pagemap: {e}"));
        }
        let present = self
            .entries
            .iter()
            .flat_map(|(_, buf)| buf.chunks_exact(8))
            .filter(|e| e[7] & 0x80 != 0)
            .count() as u64;
        present * PAGE / 1024
    }
}

trait Shape {
    fn area(&self) -> f64;
}
struct Square(f64);
impl Shape for Square {
    fn area(&self) -> f64 {
        self.0 * self.0
    }
}

#[test]
fn trimming_unmaps_code_and_the_program_runs_on_with_its_data_intact() {
    // Written data (heap and a relocated vtable, which lives in the relro region): a trim
    // that dropped either would read back the file's bytes or crash.
    let data: Vec<u64> = (0..1 << 20).map(|i| i * 3).collect();
    let shapes: Vec<Box<dyn Shape>> = vec![Box::new(Square(3.0)), Box::new(Square(0.5))];
    // Every page of the code mapped first (read through /proc/self/mem, which faults
    // them in), so what the trim lets go of is known: all of it.
    let mem = std::fs::File::open("/proc/self/mem").unwrap_or_else(|e| panic!("mem: {e}"));
    let ranges = code_ranges();
    for &(start, end) in &ranges {
        let mut code = vec![0; usize::try_from(end - start).unwrap_or_else(|e| panic!("{e}"))];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut code, start)
            .unwrap_or_else(|e| panic!("reading own code: {e}"));
    }
    let total: u64 = ranges.iter().map(|r| (r.1 - r.0) / 1024).sum();
    let mut pagemap = Pagemap::new(&ranges);
    let before = pagemap.mapped_kib();
    let trimmed = trim::trim_code();
    let after = pagemap.mapped_kib();
    let trimmed = trimmed.unwrap_or_else(|e| panic!("{e}"));

    assert!(trimmed.objects >= 2, "{trimmed:?}: the program and libc");
    assert!(trimmed.bytes > 1 << 20, "{trimmed:?}");
    // Before: all of it; after: the pages run between each object's trim and the reading (the
    // rest of the walk, a return, a `pread`) and those the kernel maps around each (64 KiB):
    // 196 of 578 pages here.
    assert!(
        before * 10 >= total * 9,
        "{before} of {total} KiB of code resident before"
    );
    assert!(
        after * 2 < before,
        "{after} KiB after against {before} KiB before"
    );

    assert_eq!(
        data.iter().sum::<u64>(),
        3 * ((1u64 << 20) * ((1 << 20) - 1) / 2)
    );
    let areas: Vec<f64> = shapes.iter().map(|s| s.area()).collect();
    assert_eq!(areas, vec![9.0, 0.25]);
    // Formatting runs code this test has not run since the trim.
    assert_eq!(format!("{:>8.3}", areas[0]), "   9.000");
    assert_eq!(trim::trim_code().map(|t| t.objects), Ok(trimmed.objects));
}
