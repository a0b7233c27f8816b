use super::*;

/// Each program drawing power in the last window, and its watts.
fn watts_now(v: &ProgramsView) -> Vec<(&str, f64)> {
    v.programs
        .iter()
        .filter_map(|p| Some((p.program.as_str(), p.watts.filter(|w| *w > 0.0)?)))
        .collect()
}

/// The split of the 60 W CPU domain with a 12 W idle draw and processes at 3 : 2 : 1.
fn assert_the_issues_split(v: &ProgramsView, t: u64) {
    assert_eq!(
        watts_now(v),
        [("p10", 24.0), ("p11", 16.0), ("p12", 8.0)],
        "at {t} s"
    );
    assert_eq!(
        (v.idle_watts, v.unattributed_watts),
        (Some(12.0), Some(0.0)),
        "at {t} s"
    );
}

/// A program's figures as a view holds them: `joules` this session and today.
fn figure(name: &str, watts: f64, joules: f64, quality: Option<Quality>) -> ProgramFigure {
    ProgramFigure {
        program: name.into(),
        watts: Some(watts),
        gpu_watts: Some(0.0),
        joules,
        today_joules: joules,
        quality,
        serving: Vec::new(),
    }
}

/// A fake `/proc` at second `t`: three busy processes at 3 : 2 : 1 ticks a second, 60 busy
/// and 15 idle ticks a second in all.
fn write_tree(root: &Path, t: u64) {
    write_counts(root, t, [30 * t, 20 * t, 10 * t], 60 * t, 15 * t);
}

/// A fake `/proc` with the given cumulative ticks: per process, and all CPUs' busy and idle.
fn write_counts(root: &Path, t: u64, procs: [u64; 3], busy: u64, idle: u64) {
    let proc_dir = root.join("proc");
    for (pid, ticks) in [10_u64, 11, 12].into_iter().zip(procs) {
        let d = proc_dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        let stat = format!("{pid} (p{pid}) R 1 1 1 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 50 1 1\n");
        std::fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
    }
    let stat = format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n");
    std::fs::write(proc_dir.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(proc_dir.join("uptime"), format!("{}.00 0.00\n", 1000 + t))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_60_w_cpu_domain_splits_24_16_8_w_with_12_w_idle_window_after_window() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter = ProgramMeter::new(dir.path(), BTreeMap::new(), None);
    write_tree(dir.path(), 0);
    assert!(
        !meter.read_if_due(Duration::ZERO, 0.0),
        "the first read is the baseline"
    );
    for t in 1..=20_u64 {
        // 1 s at 60 W, all of it the CPU domain and the headline.
        meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
        write_tree(dir.path(), t);
        let read = meter.read_if_due(Duration::from_secs(t), t as f64);
        assert_eq!(read, t % 10 == 0, "read every 10 s, at {t} s");
        if !read {
            continue;
        }
        let v = meter.view();
        assert_the_issues_split(v, t);
        let sum: f64 =
            watts_now(v).iter().map(|(_, w)| w).sum::<f64>() + v.idle_watts.unwrap_or(f64::NAN);
        assert!((sum - 60.0).abs() <= 1e-9 * 60.0);
        assert_eq!(v.programs[0].joules, 24.0 * t as f64);
    }
}

#[test]
fn todays_energy_per_program_goes_to_the_ledger_and_comes_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let noon = 1_800_000_000.0;
    let mut meter = ProgramMeter::new(dir.path(), BTreeMap::new(), None);
    write_tree(dir.path(), 0);
    meter.read_if_due(Duration::ZERO, noon);
    for _ in 1..=10_u64 {
        meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
    }
    write_tree(dir.path(), 10);
    assert!(meter.read_if_due(Duration::from_secs(10), noon + 10.0));
    let pending = meter.take_pending();
    // 10 s at 24 W; the idle part is kept too.
    assert_eq!(pending.get("p10"), Some(&240.0));
    assert_eq!(pending.get(IDLE), Some(&120.0));
    let db = dir.path().join("wattbar.db");
    let (mut store, _) =
        wattbar_ledger::store::Store::open(&db, noon).unwrap_or_else(|e| panic!("{e}"));
    let session = store
        .start_session(noon, "EUR")
        .unwrap_or_else(|e| panic!("{e}"));
    let hour = wattbar_ledger::store::programs::hour_of(noon);
    // The same program two days before: not today's.
    let rows: BTreeMap<(i64, String), f64> = pending
        .iter()
        .map(|(p, j)| ((hour, p.clone()), *j))
        .chain([((hour - 2 * 86_400, "p10".to_string()), 1_000.0)])
        .collect();
    let also = wattbar_ledger::store::resident::BatchExtras {
        program_hours: Some(&rows),
        ..Default::default()
    };
    store
        .write_batch_with(session, &[], 0.0, 0.0, &also)
        .unwrap_or_else(|e| panic!("{e}"));
    let today = store.program_day(noon).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(today.get("p10"), Some(&240.0));
    // Since this hour, and since three days ago: the older row counts only in the second.
    let since = |from: i64| store.program_since(from).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(since(hour).get("p10"), Some(&240.0));
    assert_eq!(since(hour - 3 * 86_400).get("p10"), Some(&1_240.0));
    assert_eq!(since(hour + 3_600).get("p10"), None);
    let day = Some(wattbar_ledger::store::local_day_month(noon).0);
    let again = ProgramMeter::new(dir.path(), today, day);
    let v = again.view();
    assert_eq!(v.programs[0].program, "p10");
    assert_eq!(
        (v.programs[0].today_joules, v.programs[0].joules),
        (240.0, 0.0)
    );
    assert_eq!(v.idle_joules_today, 120.0);
}

#[test]
fn without_proc_nothing_is_attributed_and_the_view_says_why() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter = ProgramMeter::new(dir.path(), BTreeMap::new(), None);
    meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
    assert!(meter.read_if_due(Duration::ZERO, 0.0));
    let v = meter.view();
    assert!(v.programs.is_empty());
    assert!(
        v.unavailable
            .as_deref()
            .is_some_and(|r| r.contains("processes cannot be listed")),
        "{v:?}"
    );
}

#[test]
fn model_servers_are_named_with_the_models_they_hold_else_those_they_answered() {
    let figure = |name: &str| figure(name, 1.0, 1.0, None);
    let mut view = ProgramsView {
        programs: vec![figure("ollama"), figure("firefox"), figure("llama-server")],
        ..ProgramsView::default()
    };
    let answered = ["qwen3:1b".to_string()];
    name_servers(&mut view, Some(&["llama3.1:8b".to_string()]), &answered);
    let shown: Vec<String> = view
        .programs
        .iter()
        .map(ProgramFigure::shown_name)
        .collect();
    assert_eq!(
        shown,
        [
            "ollama (llama3.1:8b)",
            "firefox",
            "llama-server (llama3.1:8b)"
        ]
    );
    name_servers(&mut view, None, &answered);
    assert_eq!(view.programs[0].shown_name(), "ollama (qwen3:1b)");
}

#[test]
fn where_the_upstreams_process_is_known_only_it_is_the_model_server() {
    let figure = |name: &str| figure(name, 1.0, 1.0, None);
    // A local Ollama beside a server the proxy forwards to: the models are the server's.
    let mut view = ProgramsView {
        programs: vec![figure("ollama"), figure("my-server")],
        upstream_program: Some("my-server".into()),
        ..ProgramsView::default()
    };
    name_servers(&mut view, None, &["smollm2".to_string()]);
    let shown: Vec<String> = view
        .programs
        .iter()
        .map(ProgramFigure::shown_name)
        .collect();
    assert_eq!(shown, ["ollama", "my-server (smollm2)"]);
}

#[test]
fn the_process_listening_on_the_upstream_port_is_found_on_this_machine() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let mut meter = ProgramMeter::new(Path::new("/"), BTreeMap::new(), None);
    meter.set_upstream_port(Some(port));
    assert!(!meter.read_if_due(Duration::ZERO, 0.0));
    meter.add(10.0, Some(10.0), 10.0, Some(Quality::Measured));
    assert!(meter.read_if_due(Duration::from_secs(10), 10.0));
    // This test's own process listens there; its program is its command name.
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(meter.view().upstream_program.as_deref(), Some(comm.trim()));
    // Another port: nobody found, and no name kept from the old one.
    meter.set_upstream_port(Some(1));
    meter.add(10.0, Some(10.0), 10.0, Some(Quality::Measured));
    assert!(meter.read_if_due(Duration::from_secs(20), 20.0));
    assert_eq!(meter.view().upstream_program, None);
}

#[test]
fn metric_series_never_go_down_when_programs_change_places() {
    let figure = |name: &str, joules: f64| figure(name, 0.0, joules, None);
    let series =
        |v: &ProgramsView| -> BTreeMap<String, f64> { v.metric_series().into_iter().collect() };
    // "a" has a series since it had 10 J; "b" has none.
    let mut v = ProgramsView {
        programs: vec![figure("a", 30.0), figure("b", 5.0)],
        series: [("a".to_string(), 10.0)].into(),
        ..ProgramsView::default()
    };
    let before = series(&v);
    assert_eq!(before.get("a"), Some(&20.0));
    assert_eq!(before.get(OTHER), Some(&15.0));
    // "b" takes "a"'s place: a's whole 30 J return to (other), b counts from its 50 J.
    v.programs = vec![figure("a", 30.0), figure("b", 50.0)];
    v.series = [("b".to_string(), 50.0)].into();
    let after = series(&v);
    assert_eq!(after.get("b"), Some(&0.0));
    assert_eq!(after.get(OTHER), Some(&80.0));
    assert!(after.get(OTHER) >= before.get(OTHER));
    // Every joule is in exactly one series.
    let total: f64 = after
        .iter()
        .filter(|(k, _)| *k != IDLE && *k != UNATTRIBUTED)
        .map(|(_, j)| j)
        .sum();
    assert_eq!(total, 80.0);
}

#[test]
fn energy_since_an_hour_comes_from_the_ledger_and_watts_from_the_last_window() {
    let figure =
        |name: &str, watts: f64, joules: f64| figure(name, watts, joules, Some(Quality::Measured));
    let view = ProgramsView {
        at: Some(1_800_000_000.0),
        programs: vec![figure("firefox", 5.0, 10.0), figure("bash", 1.0, 2.0)],
        idle_joules: 3.0,
        ..ProgramsView::default()
    };
    // The ledger kept, since the hour: firefox before a restart, and a program that ended.
    let stored: BTreeMap<String, f64> = [
        ("firefox", 100.0),
        ("make", 50.0),
        (IDLE, 30.0),
        (UNATTRIBUTED, 7.0),
    ]
    .into_iter()
    .map(|(n, j)| (n.to_string(), j))
    .collect();
    let top = view.top_since(10, Sort::Energy, 1_800_000_000.0, &stored);
    let got: Vec<(&str, Option<f64>, f64)> = top
        .programs
        .iter()
        .map(|p| (p.program.as_str(), p.watts, p.joules))
        .collect();
    assert_eq!(
        got,
        [
            ("firefox", Some(5.0), 100.0),
            ("make", Some(0.0), 50.0),
            ("bash", Some(1.0), 0.0)
        ]
    );
    assert_eq!((top.idle_joules, top.unattributed_joules), (30.0, 7.0));
    assert_eq!(top.since, Some(1_800_000_000.0));
    assert_eq!(view.top(10, Sort::Energy).since, None);
}

#[test]
fn the_idle_draw_learnt_at_rest_is_what_belongs_to_no_program_under_load() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter = ProgramMeter::new(dir.path(), BTreeMap::new(), None);
    let (mut procs, mut busy, mut idle) = ([0_u64; 3], 0, 0);
    write_counts(dir.path(), 0, procs, busy, idle);
    meter.read_if_due(Duration::ZERO, 0.0);
    // 160 s at rest: 12 W, 1 % busy (one process ticking now and then). Read every 10 s until
    // the tenth window gives the idle draw at 100 s, then once a minute.
    let mut read_at = Vec::new();
    for t in 1..=160_u64 {
        meter.add(12.0, Some(12.0), 1.0, Some(Quality::Measured));
        (procs[0], busy, idle) = (procs[0] + 1, busy + 1, idle + 99);
        write_counts(dir.path(), t, procs, busy, idle);
        if meter.read_if_due(Duration::from_secs(t), t as f64) {
            read_at.push(t);
        }
    }
    assert_eq!(read_at, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 160]);
    assert_eq!(meter.view().idle_draw_watts, Some(12.0));
    assert_eq!(meter.view().window_seconds, 60.0);
    // Then 60 W with the CPUs 60 % busy at 3 : 2 : 1, read every 10 s again. The share of idle
    // time would call 24 W idle; the idle draw is 12 W, so the programs share 48 W.
    read_at.clear();
    for t in 161..=180_u64 {
        meter.add(60.0, Some(60.0), 1.0, Some(Quality::Measured));
        procs = [procs[0] + 30, procs[1] + 20, procs[2] + 10];
        (busy, idle) = (busy + 60, idle + 40);
        write_counts(dir.path(), t, procs, busy, idle);
        if !meter.read_if_due(Duration::from_secs(t), t as f64) {
            continue;
        }
        read_at.push(t);
        let v = meter.view();
        assert_the_issues_split(v, t);
        assert!(
            v.method.contains("12.0 W, the median of 11 windows"),
            "{}",
            v.method
        );
    }
    assert_eq!(read_at, [170, 180]);
}

/// Process reads where the kernel counts energy: a uses 10 ticks and 3 J a window, b 30 ticks
/// and 1 J; the CPUs are busy `busy` ticks a window.
fn counted_reads(busy: u64, windows: u64) -> wattbar_sources::processes::ProcessTable {
    use wattbar_core::programs::{ProcTimes, TableRead};
    let proc = |pid: u32, name: &str, k: u64, ticks: u64, joules: u64| ProcTimes {
        pid,
        ppid: 1,
        name: name.into(),
        ticks: ticks * k,
        child_ticks: 0,
        start_ticks: 5,
        cmd: Vec::new(),
        energy_nj: Some(joules * 1_000_000_000 * k),
    };
    let reads = (0..=windows)
        .map(|k| TableRead {
            procs: vec![proc(10, "a", k, 10, 3), proc(11, "b", k, 30, 1)],
            now_ticks: 100 + 1_000 * k,
            busy_ticks: busy * k,
            total_ticks: busy * k,
            energy_from: Some("the kernel's per-process energy (ri_energy_nj)"),
        })
        .collect();
    wattbar_sources::processes::ProcessTable::Replay(reads)
}

#[test]
fn where_the_kernel_counts_each_processs_energy_programs_share_by_it_not_by_cpu_time() {
    // By CPU time b would get three quarters of the 40 J; by the kernel's energy a does.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter =
        ProgramMeter::with_table(dir.path(), counted_reads(40, 2), BTreeMap::new(), None);
    meter.read_if_due(Duration::ZERO, 0.0);
    for t in 1..=2_u64 {
        meter.add(40.0, Some(40.0), 10.0, Some(Quality::Estimated));
        assert!(meter.read_if_due(Duration::from_secs(10 * t), 10.0 * t as f64));
        let v = meter.view();
        assert_eq!(watts_now(v), [("a", 3.0), ("b", 1.0)]);
        assert_eq!((v.idle_watts, v.unattributed_watts), (Some(0.0), Some(0.0)));
        assert!(v.method.contains("ri_energy_nj"), "{}", v.method);
    }
}

#[test]
fn by_energy_the_busy_time_no_process_read_accounts_for_stays_unattributed() {
    // The CPUs were busy 80 ticks a window and the processes read account for 40: half of the
    // 40 J active part is theirs, shared 3 : 1 by energy; half is nobody's.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meter =
        ProgramMeter::with_table(dir.path(), counted_reads(80, 1), BTreeMap::new(), None);
    meter.read_if_due(Duration::ZERO, 0.0);
    meter.add(40.0, Some(40.0), 10.0, Some(Quality::Estimated));
    assert!(meter.read_if_due(Duration::from_secs(10), 10.0));
    let v = meter.view();
    assert_eq!(watts_now(v), [("a", 1.5), ("b", 0.5)]);
    assert_eq!((v.idle_watts, v.unattributed_watts), (Some(0.0), Some(2.0)));
}

mod bounds;
