use super::*;

const SPAN: f64 = 600.0;
const EVERY: f64 = 30.0;
const PRICE: f64 = 0.30;

fn model(name: &str, vram_gb: u64) -> Loaded {
    Loaded {
        name: name.into(),
        size_vram_bytes: vram_gb * 1_000_000_000,
        size_bytes: None,
    }
}

/// Drives a [`Residency`] with 1 s intervals on one timeline.
struct Trace {
    r: Residency,
    t: f64,
    day: String,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            r: Residency::new(SPAN, EVERY, StoredResidency::default()),
            t: 0.0,
            day: "2026-11-26".into(),
        }
    }

    /// `seconds` of 1 s intervals at `watts` (a small ripple of ±0.5 W around it, as a real
    /// idle machine has) with `loaded` held.
    fn run(&mut self, seconds: u32, watts: f64, loaded: Option<&[Loaded]>, busy: bool) {
        for k in 0..seconds {
            let ripple = [0.0, 0.5, -0.5, 0.25, -0.25][k as usize % 5];
            let interval = Interval {
                start: self.t,
                end: self.t + 1.0,
                unix_start: 1_800_000_000.0 + self.t,
                unix_end: 1_800_000_001.0 + self.t,
                joules: Some(watts + ripple),
                by_domain: Vec::new(),
                quality: None,
                source: None,
                method: None,
                answered: None,
                coverage: None,
            };
            self.r.push(ResidencyInterval {
                interval: &interval,
                loaded,
                busy,
                day: &self.day,
                price_per_kwh: PRICE,
            });
            self.t += 1.0;
        }
    }

    fn cost(&self, name: &str) -> ResidentCost {
        self.r
            .costs(PRICE)
            .into_iter()
            .find(|c| c.model == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {:?}", self.r.costs(PRICE)))
    }
}

#[test]
fn idle_watts_is_the_draw_with_the_model_loaded_minus_with_none() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    t.run(120, 10.0, Some(&[]), false);
    t.run(120, 30.0, Some(&gemma), false);
    let c = t.cost("gemma3:latest");
    let watts = c.idle_watts.unwrap_or_else(|| panic!("{c:?}"));
    assert!((watts - 20.0).abs() <= 0.4, "{c:?}");
    assert!(c.loaded);
    assert!(c.method.contains("gemma3:latest loaded"), "{}", c.method);
    // Two medians of 120 intervals each within ±0.5 W: well under a watt either way.
    let u = c.uncertainty_watts.unwrap_or_else(|| panic!("{c:?}"));
    assert!(u > 0.0 && u < 0.5, "{u}");
    // 20 W all day = 0.48 kWh = 0.144 at 0.30 a kWh.
    assert!(
        (c.kwh_per_day.unwrap_or_default() - 0.48).abs() < 0.01,
        "{c:?}"
    );
    assert!(
        (c.cost_per_day.unwrap_or_default() - 0.144).abs() < 0.003,
        "{c:?}"
    );
}

#[test]
fn the_cost_is_unknown_until_both_states_were_measured_never_zero() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    t.run(120, 30.0, Some(&gemma), false);
    let c = t.cost("gemma3:latest");
    assert_eq!(
        (c.idle_watts, c.idle_joules_today, c.cost_per_day),
        (None, None, None)
    );
    assert!(c.method.contains("with no model loaded"), "{}", c.method);
    assert!((c.idle_seconds_today - 119.0).abs() < 1e-9, "{c:?}");
    // Then the server lets it go: nothing loaded is measured, the draw becomes known.
    t.run(60, 10.0, Some(&[]), false);
    let c = t.cost("gemma3:latest");
    assert!(!c.loaded);
    assert!(
        (c.idle_watts.unwrap_or_default() - 20.0).abs() <= 0.4,
        "{c:?}"
    );
}

#[test]
fn the_days_resident_energy_is_the_draw_times_every_resident_idle_second() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    // Loaded first: its 300 idle seconds (the first interval only sets the scene) wait to be
    // priced; then 120 s with nothing loaded, then loaded again for 600 s.
    t.run(300, 30.0, Some(&gemma), false);
    t.run(120, 10.0, Some(&[]), false);
    t.run(600, 30.0, Some(&gemma), false);
    let c = t.cost("gemma3:latest");
    // Resident at both ends: 299 + 599 s (the intervals where it was loaded or unloaded are
    // not whole resident seconds).
    assert!((c.idle_seconds_today - 898.0).abs() < 1e-9, "{c:?}");
    let joules = c.idle_joules_today.unwrap_or_else(|| panic!("{c:?}"));
    let expected = 20.0 * 898.0;
    assert!((joules - expected).abs() <= 0.01 * expected, "{joules} J");
    let cost = c.idle_cost_today.unwrap_or_default();
    assert!((cost - joules / 3.6e6 * PRICE).abs() < 1e-9, "{cost}");
    assert!((c.idle_joules_total - joules).abs() < 1e-9);
}

#[test]
fn a_request_in_flight_is_not_idle_time_and_does_not_move_the_baseline() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(60, 30.0, Some(&gemma), false);
    let seconds = t.cost("gemma3:latest").idle_seconds_today;
    // A long request at 200 W: neither idle seconds nor a change of the idle draw.
    t.run(300, 200.0, Some(&gemma), true);
    let c = t.cost("gemma3:latest");
    assert!((c.idle_seconds_today - seconds).abs() < 1e-9, "{c:?}");
    assert!(
        (c.idle_watts.unwrap_or_default() - 20.0).abs() <= 0.4,
        "{c:?}"
    );
}

#[test]
fn a_set_shares_its_draw_by_size_in_gpu_memory() {
    let both = [model("big", 9), model("small", 3)];
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(120, 50.0, Some(&both), false);
    // 40 W extra, 9 : 3 GB.
    let big = t.cost("big").idle_watts.unwrap_or_default();
    let small = t.cost("small").idle_watts.unwrap_or_default();
    assert!((big - 30.0).abs() <= 0.4, "{big}");
    assert!((small - 10.0).abs() <= 0.2, "{small}");
    assert!(t.cost("small").method.contains("25 %"));
    // Measured alone later, the model's own set wins.
    t.run(120, 16.0, Some(&[model("small", 3)]), false);
    let small = t.cost("small").idle_watts.unwrap_or_default();
    assert!((small - 6.0).abs() <= 0.3, "{small}");
}

#[test]
fn an_interval_the_set_changed_in_tells_no_set_and_is_nobodys_resident_time() {
    let mut t = Trace::new();
    // Alternating every second: no interval starts and ends with the same set.
    for _ in 0..60 {
        t.run(1, 10.0, Some(&[]), false);
        t.run(1, 30.0, Some(&[model("a", 1)]), false);
    }
    let c = t.cost("a");
    assert_eq!(c.idle_watts, None);
    assert_eq!(c.idle_seconds_today, 0.0);
}

#[test]
fn a_server_that_cannot_say_counts_nothing() {
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(120, 30.0, None, false);
    assert!(t.r.costs(PRICE).is_empty());
}

#[test]
fn a_draw_below_the_empty_baseline_counts_as_nothing_not_as_a_saving() {
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(60, 9.0, Some(&[model("a", 1)]), false);
    let c = t.cost("a");
    assert_eq!(c.idle_watts, Some(0.0));
    assert_eq!(c.idle_joules_today, Some(0.0));
}

#[test]
fn a_new_day_starts_at_zero_and_the_lifetime_keeps_growing() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(100, 30.0, Some(&gemma), false);
    let first = t.cost("gemma3:latest");
    t.day = "2026-11-27".into();
    t.run(50, 30.0, Some(&gemma), false);
    let c = t.cost("gemma3:latest");
    assert!((c.idle_seconds_today - 50.0).abs() < 1e-9, "{c:?}");
    let today = c.idle_joules_today.unwrap_or_default();
    assert!((c.idle_joules_total - first.idle_joules_total - today).abs() < 1e-9);
    let (_, days) = t.r.take_changes();
    assert!(days.iter().all(|d| d.day == "2026-11-27"), "{days:?}");
}

#[test]
fn what_the_store_kept_is_where_a_restart_goes_on_from() {
    let gemma = [model("gemma3:latest", 6)];
    let mut t = Trace::new();
    t.run(60, 10.0, Some(&[]), false);
    t.run(100, 30.0, Some(&gemma), false);
    let (baselines, today) = t.r.take_changes();
    assert_eq!(baselines.len(), 2, "{baselines:?}");
    let before = t.cost("gemma3:latest");
    let kept = StoredResidency {
        baselines,
        lifetime: [(before.model.clone(), before.idle_joules_total)].into(),
        today,
    };
    let mut again = Trace {
        r: Residency::new(SPAN, EVERY, kept),
        ..Trace::new()
    };
    // Known at once, before any new interval: the draw was measured before the restart.
    assert_eq!(again.cost("gemma3:latest").idle_watts, before.idle_watts);
    again.run(11, 30.0, Some(&gemma), false);
    let c = again.cost("gemma3:latest");
    assert!((c.idle_seconds_today - before.idle_seconds_today - 10.0).abs() < 1e-9);
    assert!(c.idle_joules_total > before.idle_joules_total);
    assert!(
        t.r.take_changes().1.is_empty(),
        "changes are handed over once"
    );
}
