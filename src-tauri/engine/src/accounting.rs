//! Accounting: what each sample adds to the session, to the ledger and to each domain. Pure: no
//! I/O, no clock, no tokio; the engine hands it snapshots and the local time.
//!
//! Rules:
//! - Energy per domain is metered from the snapshot's owners only, so a domain that two sources
//!   read (RAPL and the CPU estimate) is counted once ([`Meter`]).
//! - The headline's energy comes from hardware counters when every part of the headline has one
//!   (RAPL `psys`, RAPL packages plus NVML GPUs), otherwise from the trapezoid rule over the
//!   headline watts. Each step says which ([`Method`]).
//! - The gap threshold follows the sampling interval: max(10 s, 3 × interval). A longer interval
//!   (a suspend, a stalled source) adds nothing anywhere, counters included.
//! - Cost is priced at the tariff in force when the energy was drawn; carbon at the configured
//!   intensity. An interval that ends while the machine runs on its battery costs the grid
//!   nothing and emits nothing: its energy is the battery's, priced as wear
//!   ([`crate::stages::wear`]) and from the grid when the battery charges.

use std::collections::BTreeMap;
use std::time::Duration;
use wattbar_core::meter::{Meter, Metered, Method};
use wattbar_core::{
    Added, Currency, Domain, Joules, Part, Pricing, Scope, Session, SessionTotals, Snapshot,
    DEFAULT_GAP_THRESHOLD,
};

/// The longest interval still integrated when sampling every `interval`.
pub fn gap_threshold(interval: Duration) -> Duration {
    DEFAULT_GAP_THRESHOLD.max(interval.saturating_mul(3))
}

/// Local time as seconds since Monday 00:00 of its week, for tariffs.
pub fn local_week_seconds(unix: f64) -> f64 {
    use chrono::{Datelike, Local, TimeZone, Timelike};
    match Local.timestamp_opt(unix.floor() as i64, 0).single() {
        Some(dt) => {
            f64::from(dt.weekday().num_days_from_monday()) * 86_400.0
                + f64::from(dt.num_seconds_from_midnight())
                + unix.fract()
        }
        None => 0.0,
    }
}

/// [`local_week_seconds`] looked up once per wall-clock minute (UTC offsets change only on whole
/// minutes): the time-zone lookup behind it checks `/etc/localtime` every time.
#[derive(Debug, Default)]
pub struct LocalWeek {
    /// The minute (Unix seconds / 60) and its start in local week seconds.
    cached: Option<(i64, f64)>,
}

impl LocalWeek {
    pub fn at(&mut self, unix: f64) -> f64 {
        let minute = (unix / 60.0).floor() as i64;
        let start = minute as f64 * 60.0;
        let base = match self.cached {
            Some((m, base)) if m == minute => base,
            _ => {
                let base = local_week_seconds(start);
                self.cached = Some((minute, base));
                base
            }
        };
        base + (unix - start)
    }
}

/// What one sample added.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleAdded {
    /// To the headline (session, ledger, cost, carbon); nothing across a change of scope.
    pub headline: Added,
    /// What the headline covers; `None` without one.
    pub scope: Option<Scope>,
    /// To each domain, from its owner.
    pub by_domain: BTreeMap<Domain, Joules>,
    /// To each owned part (domain, device, source) that measured this interval.
    pub by_part: BTreeMap<Part, Joules>,
    /// How the headline's energy was found.
    pub method: Method,
    /// True when the headline was clamped to the 100 kW ceiling in this step.
    pub clamped: bool,
}

pub struct Accounting {
    session: Session,
    meter: Meter,
    pricing: Pricing,
    /// What prices an interval drawn from the battery: nothing.
    on_battery: Pricing,
    gap: Duration,
    method: Option<Method>,
}

impl Accounting {
    pub fn new(started_unix: f64, interval: Duration, pricing: Pricing) -> Self {
        let gap = gap_threshold(interval);
        Accounting {
            session: Session::new(started_unix, gap),
            meter: Meter::new(gap),
            pricing,
            on_battery: Pricing::fixed(
                wattbar_core::Tariffs::flat(wattbar_core::Price::FREE),
                None,
            ),
            gap,
            method: None,
        }
    }

    /// This accounting, following a run whose headline last covered `scope` (see
    /// [`Session::after`]).
    pub fn after(mut self, scope: Option<Scope>) -> Self {
        self.session = self.session.after(scope);
        self
    }

    /// What the headline covers: the session's scope, the one owner of it.
    pub fn scope(&self) -> Option<Scope> {
        self.session.scope()
    }

    /// Adds one snapshot taken when the local time was `week_seconds` since Monday 00:00.
    pub fn push(&mut self, snapshot: &Snapshot, week_seconds: f64) -> SampleAdded {
        let t = snapshot.at.monotonic;
        let metered = self.meter.push(t, snapshot);
        let counted = headline_counted(snapshot, &metered);
        let clamped_before = self.session.clamped();
        let scope = snapshot.coverage().map(|c| c.scope);
        let pricing = match snapshot.battery {
            Some(b) if b.on_battery => &self.on_battery,
            _ => &self.pricing,
        };
        let headline = self.session.push(
            snapshot.at,
            snapshot.headline_watts(),
            scope,
            counted,
            pricing,
            week_seconds,
        );
        let method = match counted {
            Some(_) => Method::Counter,
            None => Method::Trapezoid,
        };
        if snapshot.headline.is_some() {
            self.method = Some(method);
        }
        SampleAdded {
            headline,
            scope,
            by_domain: metered.by_domain,
            by_part: metered
                .by_part
                .into_iter()
                .map(|(part, (joules, _))| (part, joules))
                .collect(),
            method,
            clamped: self.session.clamped() > clamped_before,
        }
    }

    /// Follows a new sampling interval: the gap threshold changes with it.
    pub fn set_interval(&mut self, interval: Duration) {
        let gap = gap_threshold(interval);
        if gap != self.gap {
            self.gap = gap;
            self.session.set_gap_threshold(gap);
            self.meter.set_gap_threshold(gap);
        }
    }

    /// The price of a kWh at Unix time `unix` (local week second `week_seconds`), and whether
    /// the price feed gave it.
    pub fn price_per_kwh(&self, unix: f64, week_seconds: f64) -> (f64, bool) {
        self.pricing.price_at(unix, week_seconds)
    }

    /// What prices the intervals now.
    pub fn pricing(&self) -> &Pricing {
        &self.pricing
    }

    pub fn gap_threshold(&self) -> Duration {
        self.gap
    }

    pub fn set_pricing(&mut self, pricing: Pricing) {
        self.pricing = pricing;
    }

    /// Ends the session and starts a new one at `now_unix`; nothing is metered across it.
    /// A new session from now; the meter goes on, so the next interval is the new session's.
    /// A new session from `now_unix`, continuing from the last sample (the reset sampled just
    /// before, so nothing between the two is lost).
    pub fn reset(&mut self, now_unix: f64) {
        self.session = self.session.next(now_unix);
    }

    pub fn totals(&self, currency: &Currency) -> SessionTotals {
        self.session.totals(currency)
    }

    /// How the last headline's energy was found; `None` before the first.
    pub fn method(&self) -> Option<Method> {
        self.method
    }
}

/// The headline's energy by counters: the sum over its parts, when every part has a counter
/// that measured this interval.
fn headline_counted(snapshot: &Snapshot, metered: &Metered) -> Option<Joules> {
    if snapshot.headline_parts.is_empty() {
        return None;
    }
    let mut sum = Joules(0.0);
    for part in &snapshot.headline_parts {
        match metered.by_part.get(part) {
            Some((joules, Method::Counter)) => sum += *joules,
            _ => return None,
        }
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattbar_core::{Price, Quality, Reading, Stamp, Watts};

    fn at(s: f64) -> Stamp {
        Stamp::new(Duration::from_secs_f64(s), 1_000_000.0 + s)
    }

    fn accounting(interval: Duration) -> Accounting {
        Accounting::new(
            0.0,
            interval,
            Pricing::fixed(wattbar_core::Tariffs::flat(Price::default()), None),
        )
    }

    fn power(domain: Domain, source: &str, quality: Quality, w: f64, s: f64) -> Reading {
        Reading::power(domain, Watts(w), source, quality, at(s))
    }

    #[test]
    fn the_gap_threshold_is_ten_seconds_or_three_intervals() {
        assert_eq!(
            gap_threshold(Duration::from_secs(1)),
            Duration::from_secs(10)
        );
        assert_eq!(
            gap_threshold(Duration::from_secs(12)),
            Duration::from_secs(36)
        );
        assert_eq!(
            gap_threshold(Duration::from_secs(60)),
            Duration::from_secs(180)
        );
    }

    #[test]
    fn a_twelve_second_interval_is_accounted_and_follows_a_change() {
        // 100 W every 12 s: three intervals = 3,600 J. Then 1 s: a 12 s interval is a gap again.
        let mut a = accounting(Duration::from_secs(12));
        let mut total = 0.0;
        for s in [0.0, 12.0, 24.0, 36.0] {
            let snap = Snapshot::of(
                at(s),
                vec![power(Domain::System, "x", Quality::Measured, 100.0, s)],
            );
            total += a.push(&snap, s).headline.joules.0;
        }
        assert_eq!(total, 3_600.0);
        a.set_interval(Duration::from_secs(1));
        let snap = Snapshot::of(
            at(48.0),
            vec![power(Domain::System, "x", Quality::Measured, 100.0, 48.0)],
        );
        assert_eq!(a.push(&snap, 48.0).headline.joules, Joules(0.0));
        assert_eq!(a.totals(&Currency::default()).gaps, 1);
    }

    fn counted(domain: Domain, device: &str, joules: f64, watts: f64, s: f64) -> Reading {
        Reading {
            energy_counter: Some(Joules(joules)),
            ..power(domain, "rapl", Quality::Measured, watts, s).with_device(device)
        }
    }

    #[test]
    fn a_headline_made_of_counters_is_accounted_by_its_counters() {
        // Two packages with counters: 0 → 130 J and 0 → 70 J over 2 s = 200 J, where the spot
        // watts (20 W in all, then 80 W) would integrate to (20 + 80) / 2 × 2 = 100 J.
        let mut a = accounting(Duration::from_secs(1));
        let sample = |s: f64, j0: f64, j1: f64, w: f64| {
            Snapshot::of(
                at(s),
                vec![
                    counted(Domain::Cpu, "package-0", j0, w, s),
                    counted(Domain::Cpu, "package-1", j1, w, s),
                ],
            )
        };
        a.push(&sample(0.0, 0.0, 0.0, 10.0), 0.0);
        let step = a.push(&sample(2.0, 130.0, 70.0, 40.0), 2.0);
        assert_eq!(step.method, Method::Counter);
        assert_eq!(step.headline.joules, Joules(200.0));
        assert_eq!(step.by_domain.get(&Domain::Cpu), Some(&Joules(200.0)));
        assert_eq!(a.method(), Some(Method::Counter));
    }

    #[test]
    fn a_headline_with_one_part_without_a_counter_is_integrated() {
        // CPU by counter, GPU by watts only: the headline is the trapezoid of 100 W then 300 W
        // over 2 s = 400 J; per domain, the CPU still gets its counter's 150 J.
        let mut a = accounting(Duration::from_secs(1));
        let sample = |s: f64, j: f64, cpu_w: f64, gpu_w: f64| {
            Snapshot::of(
                at(s),
                vec![
                    counted(Domain::Cpu, "package-0", j, cpu_w, s),
                    power(Domain::Gpu, "nvml", Quality::Measured, gpu_w, s),
                ],
            )
        };
        a.push(&sample(0.0, 0.0, 50.0, 50.0), 0.0);
        let step = a.push(&sample(2.0, 150.0, 150.0, 150.0), 2.0);
        assert_eq!(step.method, Method::Trapezoid);
        assert_eq!(step.headline.joules, Joules(400.0));
        assert_eq!(step.by_domain.get(&Domain::Cpu), Some(&Joules(150.0)));
        assert_eq!(step.by_domain.get(&Domain::Gpu), Some(&Joules(200.0)));
    }

    #[test]
    fn a_reset_starts_from_zero_and_the_next_interval_is_the_new_sessions() {
        let mut a = accounting(Duration::from_secs(1));
        let sample = |s: f64, j: f64| {
            Snapshot::of(at(s), vec![counted(Domain::Cpu, "package-0", j, 50.0, s)])
        };
        a.push(&sample(0.0, 0.0), 0.0);
        // The engine samples at the reset: the session before ends with that sample.
        a.push(&sample(1.0, 50.0), 1.0);
        a.reset(1_000_001.0);
        assert_eq!(a.totals(&Currency::default()).joules, Joules(0.0));
        // 50 W from the reset to the next sample: the new session's, and nothing is dropped.
        let step = a.push(&sample(2.0, 100.0), 2.0);
        assert_eq!(step.headline.joules, Joules(50.0));
        assert_eq!(a.totals(&Currency::default()).joules, Joules(50.0));
    }

    #[test]
    fn local_week_seconds_start_on_monday_midnight() {
        use chrono::{Local, TimeZone};
        // Monday 23 November 2026, local midnight, and 17:30 on the Wednesday after.
        let monday = Local
            .with_ymd_and_hms(2026, 11, 23, 0, 0, 0)
            .single()
            .map(|d| d.timestamp() as f64)
            .unwrap_or_else(|| panic!("no such local time"));
        let wednesday = Local
            .with_ymd_and_hms(2026, 11, 25, 17, 30, 0)
            .single()
            .map(|d| d.timestamp() as f64)
            .unwrap_or_else(|| panic!("no such local time"));
        assert_eq!(local_week_seconds(monday), 0.0);
        assert_eq!(local_week_seconds(monday + 0.25), 0.25);
        assert_eq!(
            local_week_seconds(wednesday),
            2.0 * 86_400.0 + 17.5 * 3600.0
        );
    }

    #[test]
    fn the_minute_cache_gives_what_the_lookup_gives_across_minutes_and_weeks() {
        let mut week = LocalWeek::default();
        // Every 7.3 s for two days from a Sunday evening, across midnight into Monday.
        let sunday_evening = 1_700_420_000.0;
        for i in 0..23_000 {
            let t = sunday_evening + f64::from(i) * 7.3;
            assert!(
                (week.at(t) - local_week_seconds(t)).abs() < 1e-6,
                "at {t}: {} vs {}",
                week.at(t),
                local_week_seconds(t)
            );
        }
    }
}
