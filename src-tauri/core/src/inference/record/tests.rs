use super::*;

fn observed(share: Option<Share>) -> Observed {
    Observed {
        route: Route::OllamaGenerate,
        model: "llama3".into(),
        requested_model: None,
        status: Status::Ok,
        error: None,
        start: 100.0,
        end: 104.0,
        ttft_seconds: Some(1.0),
        figures: ServerFigures {
            completion_tokens: Some(60),
            prompt_tokens: Some(17),
            ..ServerFigures::default()
        },
        share,
        phases_known: true,
        baseline_watts: Some(20.0),
        baseline_spread_watts: Some(3.0),
        ceiling: 5.0,
    }
}

fn share() -> Share {
    Share {
        joules: 480.0,
        prefill_joules: 180.0,
        decode_joules: 300.0,
        shared_seconds: 4.0,
        covered_seconds: 4.0,
        window_seconds: 4.0,
        quality: Some(Quality::Measured),
        sources: vec!["rapl".into()],
        bound_joules: 12.0,
        shared_by: 1,
        held_before_joules: 0.0,
        coverage: None,
    }
}

#[test]
fn a_request_record_is_worked_from_its_share() {
    let r = Record::build(1, observed(Some(share())));
    assert_eq!(r.energy_joules, Some(480.0));
    // 480 J − 20 W × 4 s = 400 J.
    assert_eq!(r.net_energy_joules, Some(400.0));
    // The share's 12 J, and for net 3 W of baseline spread × 4 s more.
    assert_eq!(
        (r.energy_bound_joules, r.net_energy_bound_joules),
        (Some(12.0), Some(24.0))
    );
    assert_eq!(r.joules_per_token, Some(8.0));
    // No server rate: 60 tokens over the 3 s after the first token = 20 tokens/s.
    assert_eq!(r.tokens_per_second, Some(20.0));
    // 60 tokens ÷ 300 J of decode = 0.2 tokens/s per W → 0.4 on a ceiling of 5.
    assert_eq!(r.tokens_per_second_per_watt, Some(0.2));
    assert!((r.score.unwrap_or(0.0) - 0.4).abs() < 1e-12);
    assert_eq!(
        (r.prefill_seconds, r.decode_seconds),
        (Some(1.0), Some(3.0))
    );
}

#[test]
fn remote_work_charges_no_local_energy() {
    let mut o = observed(Some(share()));
    o.status = Status::Remote;
    let r = Record::build(2, o);
    assert_eq!(
        (
            r.energy_joules,
            r.net_energy_joules,
            r.joules_per_token,
            r.score
        ),
        (None, None, None, None)
    );
    assert_eq!(r.completion_tokens, Some(60));
}

#[test]
fn unknown_tokens_give_unknown_ratios_not_zero() {
    let mut o = observed(Some(share()));
    o.figures.completion_tokens = None;
    let r = Record::build(3, o);
    assert_eq!(r.energy_joules, Some(480.0));
    assert_eq!(
        (r.joules_per_token, r.tokens_per_second_per_watt),
        (None, None)
    );
    assert_eq!(r.tokens_per_second, None);
}

#[test]
fn model_figures_weigh_records_by_their_tokens() {
    let mut m = ModelStats::new("llama3", None);
    m.add(&Record::build(1, observed(Some(share()))), 5.0);
    let mut second = share();
    second.joules = 120.0;
    second.decode_joules = 100.0;
    let mut o = observed(Some(second));
    o.figures.completion_tokens = Some(40);
    m.add(&Record::build(2, o), 5.0);
    assert_eq!(m.requests, 2);
    assert_eq!(m.completion_tokens, 100);
    // (480 + 120) J / 100 tokens.
    assert_eq!(m.joules_per_token, Some(6.0));
    // 100 tokens / (300 + 100) J of decode.
    assert_eq!(m.tokens_per_second_per_watt, Some(0.25));
    assert_eq!(m.requests_by_status.get("ok"), Some(&2));
}

#[test]
fn token_totals_saturate_instead_of_wrapping() {
    let mut m = ModelStats::new("llama3", None);
    let mut o = observed(Some(share()));
    o.figures.completion_tokens = Some(u64::MAX - 10);
    o.figures.prompt_tokens = Some(u64::MAX);
    m.add(&Record::build(1, o.clone()), 5.0);
    m.add(&Record::build(2, o), 5.0);
    assert_eq!(m.completion_tokens, MAX_COUNT);
    assert_eq!(m.prompt_tokens, MAX_COUNT);
    assert_eq!(m.requests, 2);
}

#[test]
fn a_window_measured_less_than_nine_tenths_is_partial_and_scores_nothing() {
    // Half of the 4 s window was measured: 2 s at 120 W = 240 J, kept as measured.
    let half = Share {
        joules: 240.0,
        prefill_joules: 0.0,
        decode_joules: 240.0,
        shared_seconds: 2.0,
        covered_seconds: 2.0,
        ..share()
    };
    let r = Record::build(4, observed(Some(half)));
    assert_eq!(r.covered, Some(0.5));
    assert!(r.partial);
    assert_eq!(r.energy_joules, Some(240.0));
    assert_eq!(
        (r.joules_per_token, r.tokens_per_second_per_watt, r.score),
        (None, None, None)
    );
    let mut m = ModelStats::new("llama3", None);
    m.add(&r, 5.0);
    m.add(&Record::build(5, observed(Some(share()))), 5.0);
    assert_eq!((m.requests, m.partial_requests), (2, 1));
    // Only the full record: 480 J / 60 tokens.
    assert_eq!(m.joules_per_token, Some(8.0));
    assert_eq!(m.energy_joules, 720.0);

    let full = Record::build(6, observed(Some(share())));
    assert_eq!((full.covered, full.partial), (Some(1.0), false));
}

#[test]
fn cancelled_and_error_records_never_feed_a_score() {
    let mut m = ModelStats::new("llama3", None);
    for status in [Status::Cancelled, Status::Error] {
        let mut o = observed(Some(share()));
        o.status = status;
        let r = Record::build(7, o);
        assert_eq!(r.score, None, "{status:?}");
        assert_eq!(r.energy_joules, Some(480.0));
        m.add(&r, 5.0);
    }
    assert_eq!(m.requests, 2);
    assert_eq!(
        (m.joules_per_token, m.tokens_per_second_per_watt, m.score),
        (None, None, None)
    );
}
