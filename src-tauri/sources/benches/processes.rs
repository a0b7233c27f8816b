//! The cost of one read of energy per program over a fake `/proc` with 500 processes (a
//! generated tree: each process's `stat` and `cmdline` in the kernel's format, 50 programs of
//! 10 processes, the first of each the others' parent): the listing, every `stat` (256 kept
//! open, the rest opened each time), command lines read once, the CPU time step and the
//! grouping into programs. The engine reads once every 10 s (once a minute at rest).
//!
//! Also: looking up who listens on a port nobody listens on (what the engine does at most once a
//! minute while the proxy's upstream is down), on this machine's real kernel: the socket
//! diagnostics against `/proc/net/tcp` and `tcp6`.
//!
//! `cargo bench -p wattbar-sources --bench processes`

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::path::Path;
use wattbar_core::programs::CpuTimes;
use wattbar_sources::processes::ProcessTable;

const PROCESSES: u32 = 500;

fn write_tree(root: &Path, round: u64) {
    let proc_dir = root.join("proc");
    for n in 0..PROCESSES {
        let pid = 1_000 + n;
        let program = n / 10;
        let ppid = if n % 10 == 0 { 1 } else { 1_000 + program * 10 };
        let d = proc_dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        let utime = 100 + u64::from(n) * round;
        let stat = format!(
            "{pid} (worker {program}) S {ppid} {pid} {pid} 0 -1 4194560 1234 0 0 0 {utime} 37 0 0 \
             20 0 1 0 {} 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 \
             0 0\n",
            5_000 + u64::from(n)
        );
        std::fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            d.join("cmdline"),
            format!("/usr/bin/program-{program}\0--serve\0--port\0{pid}\0"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(
        proc_dir.join("stat"),
        format!(
            "cpu  {} 0 {} {} 0 0 0 0 0 0\n",
            1_000 * round,
            100 * round,
            9_000 * round
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        proc_dir.join("uptime"),
        format!("{}.00 1.00\n", 100 + round),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

fn processes(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write_tree(dir.path(), 1);
    let mut table = ProcessTable::new(dir.path());
    let mut times = CpuTimes::default();
    let mut at = 0;
    c.bench_function("programs_read_500_processes", |b| {
        b.iter(|| {
            let read = table.read().unwrap_or_else(|e| panic!("{e}"));
            at += 1_000;
            black_box(times.step(read.procs, at))
        })
    });
}

fn listener(c: &mut Criterion) {
    // Bound and closed at once: a port nobody listens on now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    c.bench_function("listener_lookup_sock_diag", |b| {
        b.iter(|| {
            black_box(wattbar_sources::linux::listener::find_listener(
                Path::new("/"),
                port,
            ))
        })
    });
    c.bench_function("listener_lookup_proc_net_tcp", |b| {
        b.iter(|| {
            for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
                let text = std::fs::read_to_string(file).unwrap_or_default();
                black_box(
                    wattbar_sources::linux::listener::parse_listening(&text)
                        .ok()
                        .map(|all| all.iter().any(|s| s.port == port)),
                );
            }
        })
    });
}

criterion_group!(benches, processes, listener);
criterion_main!(benches);
