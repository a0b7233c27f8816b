use super::*;

fn at(prompt: f64, completion: f64, running: f64) -> ServerCounters {
    ServerCounters {
        prompt_tokens: Some(prompt),
        completion_tokens: Some(completion),
        running: Some(running),
        ..ServerCounters::default()
    }
}

#[test]
fn a_window_counts_the_differences_of_its_two_scrapes() {
    // 5 prompt and 7 generated tokens at the first scrape; 25 and 107 at the next.
    let w = window_tokens(
        &at(5.0, 7.0, 0.0),
        &at(25.0, 107.0, 1.0),
        Counting::AsGenerated,
    );
    assert_eq!(
        w,
        Ok(WindowTokens {
            prompt_tokens: Some(20.0),
            completion_tokens: Some(100.0),
            ..WindowTokens::default()
        })
    );
}

#[test]
fn a_counter_that_goes_back_is_a_restart_and_the_window_is_not_counted() {
    let restarted = window_tokens(
        &at(6886.0, 3469.0, 0.0),
        &at(12.0, 40.0, 0.0),
        Counting::AtRequestEnd,
    );
    assert_eq!(restarted, Err(Uncounted::Restarted));
    // The later scrape is the next baseline: the window after it counts again.
    let next = window_tokens(
        &at(12.0, 40.0, 0.0),
        &at(30.0, 90.0, 0.0),
        Counting::AtRequestEnd,
    );
    assert_eq!(next.map(|w| w.completion_tokens), Ok(Some(50.0)));
}

#[test]
fn a_counter_seen_at_one_end_only_is_unknown_never_the_whole_total() {
    let appeared = ServerCounters::default();
    let w = window_tokens(
        &appeared,
        &at(8_128_902.0, 7_557_572.0, 162.0),
        Counting::AsGenerated,
    );
    assert_eq!(w.as_ref().map(|w| w.completion_tokens), Ok(None));
    assert_eq!(w.map(|w| w.concurrent), Ok(true));
}

fn energy(joules: f64, from: f64, to: f64) -> WindowEnergy {
    WindowEnergy {
        from,
        to,
        joules: Some(joules),
        bound_joules: None,
        by_domain: Vec::new(),
        mean_watts: Some(joules / (to - from)),
        samples: 10,
        covered_fraction: 1.0,
        quality: None,
        sources: Vec::new(),
        coverage: Some(system()),
    }
}

fn system() -> Coverage {
    Coverage::of_domain(Domain::System, None)
}

fn scrape(at: f64, models: &[(Option<&str>, ServerCounters)]) -> Scrape {
    Scrape {
        at,
        models: models
            .iter()
            .map(|(m, c)| (m.map(str::to_string), c.clone()))
            .collect(),
    }
}

/// An idle draw of `watts` over 30 s, in `coverage`.
fn idle(watts: f64, coverage: Coverage) -> Baseline {
    Baseline {
        watts,
        spread_watts: None,
        samples: 30,
        from: 0.0,
        to: 30.0,
        method: "test".into(),
        coverage: Some(coverage),
    }
}

/// llama.cpp's window from 1,000 to 1,010 s: 40 prompt and 150 predicted tokens.
fn llama_window(energy: &WindowEnergy, baseline: &Baseline) -> Vec<ServerWindow> {
    server_windows(
        "http://127.0.0.1:8080/metrics",
        &scrape(1000.0, &[(None, at(6886.0, 3469.0, 0.0))]),
        &scrape(1010.0, &[(None, at(6926.0, 3619.0, 0.0))]),
        Counting::AtRequestEnd,
        energy,
        Some(baseline),
    )
    .unwrap_or_default()
}

/// 300 W for 10 s = 3,000 J over 150 generated tokens = 20 J a token; over an idle draw of
/// 100 W, 2,000 J net = 13.3 J a token.
#[test]
fn a_windows_energy_over_its_tokens_is_its_joules_per_token() {
    let baseline = idle(100.0, system());
    let w = llama_window(&energy(3000.0, 1000.0, 1010.0), &baseline);
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].prompt_tokens, w[0].completion_tokens),
        (Some(40.0), Some(150.0))
    );
    assert_eq!(w[0].joules_per_token, Some(20.0));
    assert_eq!(w[0].net_energy_joules, Some(2000.0));
    let net = w[0].net_joules_per_token.unwrap_or(f64::NAN);
    assert!((net - 2000.0 / 150.0).abs() < 1e-9, "{net}");
    assert!(!w[0].shared && !w[0].coarse);
    assert_eq!(w[0].scope, Some(Scope::System));

    // The same window measured on the CPU package alone, with the idle draw taken at the
    // wall: 100 W of the wall is no part of the package's 3,000 J, so nothing is netted.
    let package = WindowEnergy {
        coverage: Some(Coverage::of_domain(Domain::Cpu, None)),
        ..energy(3000.0, 1000.0, 1010.0)
    };
    let at_the_wall = Baseline {
        coverage: Some(Coverage::of_domain(Domain::Wall, None)),
        ..baseline
    };
    let w = llama_window(&package, &at_the_wall);
    assert_eq!(w[0].joules_per_token, Some(20.0));
    assert_eq!(w[0].net_energy_joules, None);
    assert_eq!(w[0].scope, Some(Scope::Components));
    assert_eq!(w[0].covers, vec!["cpu-package".to_string()]);
}

/// The plug dropped out 5 s into the 10 s window: 300 W × 5 s = 1,500 J measured, net of
/// the 100 W idle draw over those same 5 s = 1,000 J (over all 10 s it would be 500 J). Its
/// 150 tokens ran over seconds the energy does not cover: no joules per token.
#[test]
fn a_half_covered_window_nets_its_measured_seconds_and_gives_no_joules_per_token() {
    let half = WindowEnergy {
        covered_fraction: 0.5,
        ..energy(1500.0, 1000.0, 1010.0)
    };
    let w = llama_window(&half, &idle(100.0, system()));
    assert_eq!(w[0].covered, Some(0.5));
    assert_eq!(w[0].energy_joules, Some(1500.0));
    assert_eq!(w[0].net_energy_joules, Some(1000.0));
    assert_eq!(
        (w[0].joules_per_token, w[0].net_joules_per_token),
        (None, None)
    );
    assert!(!w[0].well_covered());
    // Covered 95 %: 2,850 J net of 100 W × 9.5 s = 1,900 J, 19 J and 12.7 J a token.
    let most = WindowEnergy {
        covered_fraction: 0.95,
        ..energy(2850.0, 1000.0, 1010.0)
    };
    let w = llama_window(&most, &idle(100.0, system()));
    assert!(w[0].well_covered());
    let net = w[0].net_energy_joules.unwrap_or(f64::NAN);
    assert!((net - 1900.0).abs() < 1e-9, "{net}");
    assert_eq!(w[0].joules_per_token, Some(19.0));
}

/// A plug measured 3,000 J at the wall over the window, 2,000 J of it on the GPU, and the
/// server's process had 0.75 of the GPU's use: its window is 1,500 J over 150 tokens, 10 J
/// a token, covering GPU 0 alone, with no net figure (the GPU's idle draw is not known
/// apart), never the wall's 20 J a token.
#[test]
fn a_server_drawing_on_a_gpu_has_its_own_share_of_the_gpus_energy() {
    let wall = WindowEnergy {
        by_domain: vec![("gpu".into(), 2000.0)],
        coverage: Some(Coverage::of_domain(Domain::Wall, None)),
        quality: Some(Quality::Measured),
        ..energy(3000.0, 1000.0, 1010.0)
    };
    let share = ProcessGpuShare {
        share: 0.75,
        covers: vec!["gpu:0".into()],
        processes: 1,
    };
    let own = on_process_gpus(&wall, &share).unwrap_or_else(|| panic!("a GPU's energy"));
    assert_eq!(own.quality, Some(Quality::Estimated));
    let baseline = idle(100.0, Coverage::of_domain(Domain::Wall, None));
    let w = llama_window(&own, &baseline);
    assert_eq!(w[0].energy_joules, Some(1500.0));
    assert_eq!(w[0].joules_per_token, Some(10.0));
    assert_eq!(w[0].net_energy_joules, None);
    assert_eq!(
        (w[0].scope, w[0].covers.clone()),
        (Some(Scope::Components), vec!["gpu:0".to_string()])
    );
    // A window with no GPU energy has no such figure: the headline's stays.
    assert_eq!(
        on_process_gpus(&energy(3000.0, 1000.0, 1010.0), &share),
        None
    );
}

/// Two models on one vLLM: 3,000 J split 1:2 by their 50 and 100 generated tokens; a model
/// that generated nothing has no record.
#[test]
fn models_that_made_tokens_share_the_window_by_their_tokens() {
    let w = server_windows(
        "vllm",
        &scrape(
            0.0,
            &[
                (Some("a"), at(0.0, 0.0, 0.0)),
                (Some("b"), at(0.0, 0.0, 0.0)),
                (Some("idle"), at(5.0, 7.0, 0.0)),
            ],
        ),
        &scrape(
            10.0,
            &[
                (Some("a"), at(10.0, 50.0, 1.0)),
                (Some("b"), at(20.0, 100.0, 1.0)),
                (Some("idle"), at(5.0, 7.0, 0.0)),
            ],
        ),
        Counting::AsGenerated,
        &energy(3000.0, 0.0, 10.0),
        None,
    )
    .unwrap_or_default();
    let got: Vec<_> = w
        .iter()
        .map(|r| {
            (
                r.model.clone(),
                r.energy_joules,
                r.joules_per_token,
                r.shared,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (Some("a".to_string()), Some(1000.0), Some(20.0), true),
            (Some("b".to_string()), Some(2000.0), Some(20.0), true)
        ]
    );
    assert_eq!(w[0].net_energy_joules, None, "no baseline: net unknown");
}

/// SGLang spent 2 s of GPU time on prefill and 6 s on decode in a window of 4,000 J:
/// 1,000 J prefill, 3,000 J decode.
#[test]
fn sglang_windows_split_their_energy_by_the_gpu_seconds_of_each_phase() {
    let gpu = |prefill: f64, decode: f64, completion: f64| ServerCounters {
        prefill_gpu_seconds: Some(prefill),
        decode_gpu_seconds: Some(decode),
        ..at(0.0, completion, 1.0)
    };
    let w = server_windows(
        "sglang",
        &scrape(0.0, &[(Some("m"), gpu(10.0, 30.0, 100.0))]),
        &scrape(10.0, &[(Some("m"), gpu(12.0, 36.0, 300.0))]),
        Counting::AsGenerated,
        &energy(4000.0, 0.0, 10.0),
        None,
    )
    .unwrap_or_default();
    assert_eq!(
        w.iter()
            .map(|r| (r.prefill_energy_joules, r.decode_energy_joules))
            .collect::<Vec<_>>(),
        [(Some(1000.0), Some(3000.0))]
    );
    // A server that does not time its phases leaves the split unknown.
    let plain = server_windows(
        "vllm",
        &scrape(0.0, &[(Some("m"), at(0.0, 100.0, 1.0))]),
        &scrape(10.0, &[(Some("m"), at(0.0, 300.0, 1.0))]),
        Counting::AsGenerated,
        &energy(4000.0, 0.0, 10.0),
        None,
    )
    .unwrap_or_default();
    assert_eq!(plain[0].prefill_energy_joules, None);
}

/// llama.cpp read a prompt of 300 tokens in this window and will count the answer in the
/// next: the window is kept with its energy and prompt tokens, and no J/token.
#[test]
fn a_window_that_only_read_prompts_keeps_its_prompt_tokens_and_energy() {
    let w = server_windows(
        "llama",
        &scrape(0.0, &[(None, at(100.0, 50.0, 1.0))]),
        &scrape(1.0, &[(None, at(400.0, 50.0, 1.0))]),
        Counting::AtRequestEnd,
        &energy(100.0, 0.0, 1.0),
        None,
    )
    .unwrap_or_default();
    assert_eq!(
        w.iter()
            .map(|r| (
                r.prompt_tokens,
                r.completion_tokens,
                r.energy_joules,
                r.joules_per_token
            ))
            .collect::<Vec<_>>(),
        [(Some(300.0), Some(0.0), Some(100.0), None)]
    );
}

#[test]
fn tokens_counted_at_request_end_with_a_request_running_are_coarse() {
    let w = window_tokens(
        &at(0.0, 0.0, 1.0),
        &at(10.0, 20.0, 0.0),
        Counting::AtRequestEnd,
    );
    assert_eq!(w.map(|w| (w.coarse, w.concurrent)), Ok((true, false)));
    let w = window_tokens(
        &at(0.0, 0.0, 1.0),
        &at(10.0, 20.0, 1.0),
        Counting::AsGenerated,
    );
    assert_eq!(w.map(|w| w.coarse), Ok(false));
}
