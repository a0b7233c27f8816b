use super::*;

/// An idle draw of `joules` over a 1 s interval.
fn draw(joules: f64) -> IdleModel {
    IdleModel::Draw {
        watts: joules,
        seconds: 1.0,
    }
}

fn proc(pid: u32, ppid: u32, name: &str, ticks: u64, child_ticks: u64, start: u64) -> ProcTimes {
    ProcTimes {
        pid,
        ppid,
        name: name.into(),
        ticks,
        child_ticks,
        start_ticks: start,
        cmd: Vec::new(),
        energy_nj: None,
    }
}

fn with_cmd(mut p: ProcTimes, cmd: &[&str]) -> ProcTimes {
    p.cmd = cmd.iter().map(|a| a.to_string()).collect();
    p
}

fn by_program(used: &[Used]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for u in used {
        *out.entry(u.program.clone()).or_default() += u.ticks;
    }
    out
}

fn ticks_of(used: &[Used], pid: u32) -> Option<f64> {
    used.iter().find(|u| u.pid == pid).map(|u| u.ticks)
}

#[test]
fn three_busy_processes_at_3_2_1_share_48_w_above_a_12_w_idle_draw_as_24_16_8() {
    let mut cpu = CpuTimes::default();
    let read = |k: u64| {
        vec![
            proc(100, 1, "a", 30 * k, 0, 10),
            proc(200, 1, "b", 20 * k, 0, 10),
            proc(300, 1, "c", 10 * k, 0, 10),
        ]
    };
    assert_eq!(
        cpu.step(read(0), 1_000),
        None,
        "the first read is the baseline"
    );
    for k in 1..=10 {
        let used = cpu
            .step(read(k), 1_000 + 100 * k)
            .unwrap_or_else(|| panic!("interval {k}"));
        // 1 s at 60 W on the CPU domain, 12 W of it the idle draw; 60 busy ticks, all theirs.
        // The headline (70 W) holds 10 W the CPU domain does not cover.
        let m = Measured {
            headline: 70.0,
            cpu: Some(60.0),
            busy_ticks: 60.0,
        };
        let s = split(m, &by_program(&used), draw(12.0));
        assert_eq!(s.programs.get("a"), Some(&24.0));
        assert_eq!(s.programs.get("b"), Some(&16.0));
        assert_eq!(s.programs.get("c"), Some(&8.0));
        assert_eq!((s.idle, s.unattributed), (12.0, 10.0));
        assert!((s.total() - 70.0).abs() <= 1e-9 * 70.0);
    }
}

#[test]
fn a_child_that_starts_and_ends_between_two_reads_lands_on_its_parent() {
    let mut cpu = CpuTimes::default();
    cpu.step(vec![proc(10, 1, "make", 100, 0, 5)], 1_000);
    // cc ran 40 ticks and was waited for before the next read: only make's cutime shows it.
    let used = cpu
        .step(vec![proc(10, 1, "make", 105, 40, 5)], 1_100)
        .unwrap_or_default();
    assert_eq!(ticks_of(&used, 10), Some(45.0));
}

#[test]
fn a_child_seen_alive_and_then_reaped_is_not_counted_twice() {
    let mut cpu = CpuTimes::default();
    cpu.step(vec![proc(10, 1, "make", 100, 0, 5)], 1_000);
    let used = cpu
        .step(
            vec![
                proc(10, 1, "make", 100, 0, 5),
                proc(11, 10, "cc", 30, 0, 1_050),
            ],
            1_100,
        )
        .unwrap_or_default();
    assert_eq!(
        ticks_of(&used, 11),
        Some(30.0),
        "started after the read: all its time"
    );
    // cc ran 12 more ticks unseen, then ended: make's cutime grows by all 42.
    let used = cpu
        .step(vec![proc(10, 1, "make", 100, 42, 5)], 1_200)
        .unwrap_or_default();
    assert_eq!(ticks_of(&used, 10), Some(12.0));
}

#[test]
fn a_child_and_its_parent_that_both_end_between_two_reads_are_not_counted_twice() {
    let mut cpu = CpuTimes::default();
    cpu.step(vec![proc(10, 1, "make", 100, 0, 5)], 1_000);
    // make → sh → cc1: cc1 seen with 50 ticks, sh with 1.
    let used = cpu
        .step(
            vec![
                proc(10, 1, "make", 100, 0, 5),
                proc(11, 10, "sh", 1, 0, 1_010),
                proc(12, 11, "cc1", 50, 0, 1_020),
            ],
            1_100,
        )
        .unwrap_or_default();
    assert_eq!(
        (ticks_of(&used, 11), ticks_of(&used, 12)),
        (Some(1.0), Some(50.0))
    );
    // cc1 runs 30 more, sh 2 more; sh reaps cc1 (80), make reaps sh (3 + 80).
    let used = cpu
        .step(vec![proc(10, 1, "make", 100, 83, 5)], 1_200)
        .unwrap_or_default();
    assert_eq!(
        ticks_of(&used, 10),
        Some(32.0),
        "only the 30 + 2 no read saw"
    );
}

#[test]
fn a_reused_pid_is_a_new_process_not_the_old_one() {
    let mut cpu = CpuTimes::default();
    cpu.step(vec![proc(50, 1, "old", 5_000, 0, 100)], 1_000);
    // pid 50 again, started after the read: a new process with 7 ticks, not 7 − 5000.
    let used = cpu
        .step(vec![proc(50, 1, "new", 7, 0, 1_020)], 1_100)
        .unwrap_or_default();
    assert_eq!(used.len(), 1);
    assert_eq!((used[0].name.as_str(), used[0].ticks), ("new", 7.0));
}

#[test]
fn a_process_already_running_at_the_first_read_counts_only_from_there() {
    let mut cpu = CpuTimes::default();
    cpu.step(vec![proc(1, 0, "init", 10, 0, 1)], 1_000);
    // Seen for the first time now but started long before: its past is unknown, not this
    // interval's.
    let used = cpu
        .step(
            vec![proc(1, 0, "init", 12, 0, 1), proc(7, 1, "late", 900, 0, 3)],
            1_100,
        )
        .unwrap_or_default();
    assert_eq!(ticks_of(&used, 1), Some(2.0));
    assert_eq!(ticks_of(&used, 7), None);
}

#[test]
fn busy_time_no_process_accounts_for_stays_unattributed() {
    let programs: BTreeMap<String, f64> = [("a".to_string(), 30.0)].into();
    // 60 busy ticks, 30 of them a's: half the 40 W active part is a's, half nobody's.
    let s = split(
        Measured {
            headline: 50.0,
            cpu: Some(50.0),
            busy_ticks: 60.0,
        },
        &programs,
        draw(10.0),
    );
    assert_eq!(s.programs.get("a"), Some(&20.0));
    assert_eq!((s.idle, s.unattributed), (10.0, 20.0));
}

#[test]
fn processes_read_a_little_after_proc_stat_are_scaled_to_the_busy_time() {
    let programs: BTreeMap<String, f64> = [("a".to_string(), 66.0), ("b".to_string(), 22.0)].into();
    let s = split(
        Measured {
            headline: 40.0,
            cpu: Some(40.0),
            busy_ticks: 80.0,
        },
        &programs,
        IdleModel::Nothing,
    );
    assert_eq!(s.programs.get("a"), Some(&30.0));
    assert_eq!(s.programs.get("b"), Some(&10.0));
    assert_eq!(s.unattributed, 0.0);
}

#[test]
fn without_a_cpu_domain_everything_is_unattributed() {
    let programs: BTreeMap<String, f64> = [("a".to_string(), 30.0)].into();
    let s = split(
        Measured {
            headline: 25.0,
            cpu: None,
            busy_ticks: 30.0,
        },
        &programs,
        IdleModel::Nothing,
    );
    assert!(s.programs.is_empty());
    assert_eq!(s.unattributed, 25.0);
}

#[test]
fn odd_figures_still_add_up_to_the_headline() {
    let programs: BTreeMap<String, f64> = (0..50)
        .map(|i| (format!("p{i}"), f64::from(i) * 1.37 + 0.1))
        .collect();
    for headline in [0.013, 1.0 / 3.0, 97.31, 12_345.678] {
        let s = split(
            Measured {
                headline,
                cpu: Some(headline * 0.71),
                busy_ticks: 2_000.0,
            },
            &programs,
            draw(headline * 0.07),
        );
        assert!(
            (s.total() - headline).abs() <= 1e-9 * headline,
            "{} vs {headline}",
            s.total()
        );
        // Each program has exactly its share of the active part; what no process accounts for
        // and what the CPU domain does not cover are left.
        let active = headline * 0.71 - headline * 0.07;
        let used: f64 = programs.values().sum();
        for (name, ticks) in &programs {
            let expected = active * ticks / used.max(2_000.0);
            let got = s.programs.get(name).copied().unwrap_or(-1.0);
            assert!(
                (got - expected).abs() <= 1e-12 * headline,
                "{name}: {got} vs {expected}"
            );
        }
        assert!(s.unattributed >= headline * 0.29 * (1.0 - 1e-12));
    }
}

#[test]
fn the_kernels_threads_are_one_program_whatever_their_names() {
    let mut cpu = CpuTimes::default();
    let read = |k: u64| {
        vec![
            proc(2, 0, "kthreadd", 0, 0, 1),
            proc(40, 2, "kworker/0:0-mm_percpu_wq", 3 * k, 0, 2),
            proc(41, 2, "kworker/1:2-events", 2 * k, 0, 2),
            proc(900, 1, "python3", 50 * k, 0, 500),
        ]
    };
    cpu.step(read(0), 1_000);
    let used = cpu.step(read(1), 1_100).unwrap_or_default();
    let programs = by_program(&used);
    assert_eq!(programs.get("kernel"), Some(&5.0));
    assert_eq!(programs.get("python3"), Some(&50.0));
    assert_eq!(programs.len(), 2);
}

#[test]
fn a_browsers_content_processes_are_the_browser() {
    // Firefox's content processes run its own executable under other command names.
    let ff = "/usr/lib/firefox/firefox";
    let read = |k: u64| {
        vec![
            with_cmd(proc(1, 0, "systemd", 0, 0, 1), &["/sbin/init"]),
            with_cmd(proc(800, 1, "bash", 0, 0, 300), &["bash"]),
            with_cmd(proc(900, 800, "firefox", 10 * k, 0, 500), &[ff]),
            with_cmd(
                proc(901, 900, "Isolated Web Co", 30 * k, 0, 510),
                &[ff, "-contentproc", "-childID"],
            ),
            with_cmd(
                proc(902, 900, "Web Content", 5 * k, 0, 520),
                &[ff, "-contentproc"],
            ),
            // Started from Firefox, but another executable: a program of its own.
            with_cmd(
                proc(903, 900, "crashhelper", 2 * k, 0, 530),
                &["/usr/lib/firefox/crashhelper"],
            ),
        ]
    };
    let mut cpu = CpuTimes::default();
    cpu.step(read(0), 1_000);
    let programs = by_program(&cpu.step(read(1), 1_100).unwrap_or_default());
    assert_eq!(programs.get("firefox"), Some(&45.0));
    assert_eq!(programs.get("crashhelper"), Some(&2.0));
    assert_eq!(programs.get("Isolated Web Co"), None);
}

#[test]
fn a_python_module_is_named_for_the_module_and_a_script_for_python() {
    let server = with_cmd(
        proc(700, 1, "python", 0, 0, 5),
        &[
            "/home/u/venv/bin/python",
            "-m",
            "llama_cpp.server",
            "--config_file",
        ],
    );
    assert_eq!(program_of(&server), "llama_cpp.server");
    let unbuffered = with_cmd(
        proc(701, 1, "python3", 0, 0, 5),
        &["python3", "-u", "-m", "vllm.entrypoints.openai.api_server"],
    );
    assert_eq!(
        program_of(&unbuffered),
        "vllm.entrypoints.openai.api_server"
    );
    // Options with a value, and `-m` written together with its module.
    let with_x = with_cmd(
        proc(705, 1, "python3", 0, 0, 5),
        &["python3", "-X", "utf8", "-m", "vllm"],
    );
    assert_eq!(program_of(&with_x), "vllm");
    let attached = with_cmd(
        proc(706, 1, "python3", 0, 0, 5),
        &["python3", "-mhttp.server"],
    );
    assert_eq!(program_of(&attached), "http.server");
    // `-c CODE` and a script: no module; `-m` after the script is the script's own argument.
    let code = with_cmd(proc(702, 1, "python3", 0, 0, 5), &["python3", "-c", "-m"]);
    assert_eq!(program_of(&code), "python3");
    let script = with_cmd(
        proc(703, 1, "python3", 0, 0, 5),
        &["python3", "train.py", "-m", "x"],
    );
    assert_eq!(program_of(&script), "python3");
    // Not an interpreter: `-m` means whatever that program says.
    let other = with_cmd(proc(704, 1, "zip", 0, 0, 5), &["zip", "-m", "a.zip"]);
    assert_eq!(program_of(&other), "zip");
}

#[test]
fn a_pid_reused_under_the_same_executable_is_not_grouped_with_a_younger_parent() {
    // Parent 50 started after 60: 60 cannot be its child (its real parent ended and the pid was
    // reused), so it keeps its own name.
    let procs = [
        with_cmd(proc(50, 1, "worker", 0, 0, 900), &["/usr/bin/app"]),
        with_cmd(proc(60, 50, "helper", 0, 0, 100), &["/usr/bin/app"]),
    ];
    let programs = programs_of(procs.iter());
    assert_eq!(programs.get(&(60, 100)).map(String::as_str), Some("helper"));
    assert_eq!(programs.get(&(50, 900)).map(String::as_str), Some("worker"));
}

/// A window of `headline` J with a 40 J CPU domain (10 J of it idle, the rest all a's: 60 of 60
/// busy ticks) and one 50 J GPU used as `gpu_use` says, split.
fn split_beside_a_gpu(headline: f64, gpu_use: &[(&str, f64)]) -> Split {
    let cpu: BTreeMap<String, f64> = [("a".to_string(), 60.0)].into();
    let gpu = GpuShare {
        joules: 50.0,
        by_program: gpu_use.iter().map(|(p, u)| (p.to_string(), *u)).collect(),
    };
    let m = Measured {
        headline,
        cpu: Some(40.0),
        busy_ticks: 60.0,
    };
    split_with_gpus(m, &cpu, draw(10.0), &[gpu])
}

#[test]
fn a_gpu_is_shared_by_its_processes_use_and_the_sum_still_closes() {
    // 100 J headline: CPU 40 J, the GPU's 50 J used 3 : 1 by b and a, the rest of the machine
    // 10 J.
    let s = split_beside_a_gpu(100.0, &[("b", 270.0), ("a", 90.0)]);
    assert_eq!(s.programs.get("a"), Some(&(30.0 + 12.5)));
    assert_eq!(s.programs.get("b"), Some(&37.5));
    assert_eq!(s.gpu.get("a"), Some(&12.5));
    assert_eq!((s.idle, s.unattributed), (10.0, 10.0));
    assert!((s.total() - 100.0).abs() <= 1e-12);
    // A GPU nobody used is nobody's.
    let s = split_beside_a_gpu(100.0, &[]);
    assert_eq!(s.programs.get("b"), None);
    assert_eq!(s.unattributed, 60.0);
}

#[test]
fn gpus_never_get_more_than_the_cpu_domain_leaves_of_the_headline() {
    // A headline (a battery's 70 J) smaller than CPU + GPU (40 + 50 J): the GPU's programs
    // share the 30 J left, in proportion, and nothing is unattributed or negative.
    let s = split_beside_a_gpu(70.0, &[("b", 1.0), ("c", 1.0)]);
    assert_eq!(s.programs.get("b"), Some(&15.0));
    assert_eq!(s.programs.get("c"), Some(&15.0));
    assert_eq!(s.unattributed, 0.0);
    assert!((s.total() - 70.0).abs() <= 1e-12);
}

#[test]
fn one_busy_thread_on_sixteen_cores_gets_what_it_adds_over_the_idle_draw() {
    // 8 s on 16 CPUs: 12,800 ticks, 850 busy, 800 of them one program's (a whole core). The CPU
    // domain drew 30 W (240 J) and draws 12 W at rest (96 J): 144 J is active, and the program
    // gets 800/850 of it, 135.5 J.
    let programs: BTreeMap<String, f64> = [("loop".to_string(), 800.0)].into();
    let m = Measured {
        headline: 240.0,
        cpu: Some(240.0),
        busy_ticks: 850.0,
    };
    let known = IdleModel::Draw {
        watts: 12.0,
        seconds: 8.0,
    };
    let s = split(m, &programs, known);
    let mine = s.programs.get("loop").copied().unwrap_or(0.0);
    assert!((mine - 144.0 * 800.0 / 850.0).abs() < 1e-9, "{mine}");
    assert_eq!(s.idle, 96.0);
    // Until the idle draw is known, the idle part is the idle share of the CPUs' time:
    // 11,950/12,800 of 240 J is idle, and the program gets 800/850 of the 15.9 J left, 15 J:
    // a sixteenth of what it added.
    let unknown = IdleModel::IdleTime {
        busy_ticks: 850.0,
        total_ticks: 12_800.0,
    };
    let s = split(m, &programs, unknown);
    let mine = s.programs.get("loop").copied().unwrap_or(0.0);
    assert!((mine - 240.0 * 800.0 / 12_800.0).abs() < 1e-9, "{mine}");
}

#[test]
fn an_idle_draw_above_the_domains_energy_or_not_finite_leaves_the_sum_closed() {
    let programs: BTreeMap<String, f64> = [("a".to_string(), 10.0)].into();
    let m = Measured {
        headline: 50.0,
        cpu: Some(20.0),
        busy_ticks: 10.0,
    };
    for idle in [draw(35.0), draw(f64::NAN), draw(-4.0), draw(f64::INFINITY)] {
        let s = split(m, &programs, idle);
        assert!(s.idle <= 20.0 && s.idle >= 0.0, "{idle:?}: {s:?}");
        assert!((s.total() - 50.0).abs() < 1e-9, "{idle:?}: {s:?}");
    }
}
