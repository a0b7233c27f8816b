//! A counter that stops is said, not believed.
//!
//! An energy counter can stop while the part it counts still draws power: macmon found an M2's
//! CPU energy channel reading 0 under load, and a RAPL domain can stick the same way. Its
//! readings then say 0 W, measured, and the headline believes them. The chain watches every
//! measured reading of a consumption domain:
//!
//! - **Still**: its energy counter has the value of the read before (a reading without a counter:
//!   exactly 0 W, which a measured figure gives only when the counter under it did not move).
//! - **Evidence that it should have moved**, in watts: its own power where the source gives one
//!   apart from the counter (a plug's, NVML's), and, for a domain that holds the CPU (cpu, soc,
//!   platform, system, wall), the CPU's load as the CPU-time estimate gives it. While any
//!   reading is still, the estimate is read in every sample even where better sources cover
//!   the CPU; otherwise it stands by as before.
//! - **Stalled** when it has been still for [`STALL_AFTER`] or longer and the evidence over that
//!   time is at least [`STEPS`] of the counter's smallest step seen. A counter never seen to
//!   move has no known step: its own power must account for three watt-hours ([`UNSEEN_STEP`]),
//!   or the CPU be busy ([`BUSY_OVER_IDLE`]). A counter that steps by a watt-hour on an idle
//!   machine is not stalled: a few watts take many minutes to make one step. A GPU that idles
//!   at a true 0 W is not either: no CPU load speaks for a GPU, and its own figure says 0.
//!   Plugs' totals run between their steps on the plug's own power
//!   ([`stepped`](crate::counter::stepped)), so a plug is stalled only when its power reads 0.
//!
//! A stalled reading is left out of the sample with its reason ([`Stalled`]), so the domain
//! falls to the next source in the same sample, as when a source fails; the source is still
//! read each sample, and the first read in which the counter moves brings it back. The meter
//! starts a new baseline for a part that was not owned, so the stretch is counted once, by the
//! source that stood in.

use super::pace::is_consumption;
use crate::reading::{Domain, Quality, Reading};
use crate::units::{Joules, Watts};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a reading must be still before evidence can call it stalled: longer than any
/// counter's update period (NVML's ~100 ms, a plug's second) at the fastest pace.
pub const STALL_AFTER: Duration = Duration::from_secs(5);
/// Steps the evidence must account for: a counter that should have stepped three times and did
/// not once is stopped, not slow.
pub const STEPS: f64 = 3.0;
/// The step assumed of a counter never seen to move, against its own power: a watt-hour, the
/// coarsest any device counts in (a plug's total; [`DEFAULT_RESOLUTION_JOULES`]). Against the
/// CPU's load it is stalled once the load is [`BUSY_OVER_IDLE`] times the lowest estimate seen.
///
/// [`DEFAULT_RESOLUTION_JOULES`]: crate::counter::stepped::DEFAULT_RESOLUTION_JOULES
pub const UNSEEN_STEP: Joules = Joules(crate::counter::stepped::DEFAULT_RESOLUTION_JOULES);
/// The step taken of a power sensor without a counter once it has read above 0 W: a joule.
const FINE_STEP: Joules = Joules(1.0);
/// The CPU estimate says "busy" at this multiple of the lowest estimate seen (the machine at
/// idle): the estimate's idle floor is a tenth of its TDP, so a quarter of the CPU busy is
/// about three times it.
pub const BUSY_OVER_IDLE: f64 = 2.0;
const BY_OWN: &str = "its own power";
const BY_LOAD: &str = "the CPU's load";
/// How old the CPU estimate may be and still speak for the load.
const EVIDENCE_FRESH: Duration = Duration::from_secs(30);

/// A reading left out of a sample because its counter stopped while the machine was busy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stalled {
    pub source: String,
    pub domain: Domain,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Since the last read at which it moved.
    pub still_seconds: f64,
    /// What the evidence says the part drew meanwhile.
    pub evidence_watts: f64,
    pub reason: String,
}

type Key = (String, Domain, Option<String>);

#[derive(Debug, Default)]
struct Watched {
    /// The counter's last value (`None`: a reading without one).
    value: Option<f64>,
    /// The last read at which it moved (or was first seen).
    moved_at: Option<Duration>,
    /// The smallest positive step seen.
    step: Option<f64>,
    /// The last monotonic time it was read, so a reading the chain stopped asking for is
    /// forgotten rather than judged on an old value.
    read_at: Duration,
    /// Why it is stalled, until it moves: what was seen and what spoke against it.
    stalled: Option<(Stalled, Cause)>,
}

#[derive(Debug, Clone, Copy)]
struct Cause {
    what: &'static str,
    by: &'static str,
}

impl Cause {
    fn reason(self, still: Duration, evidence_watts: f64) -> String {
        format!(
            "stalled: {} for {:.0} s while {} says {evidence_watts:.1} W",
            self.what,
            still.as_secs_f64(),
            self.by
        )
    }
}

/// What the chain knows of each measured reading's counter, across samples.
#[derive(Debug, Default)]
pub struct StallWatch {
    /// A few entries (one per measured reading of a sample): searched in place, so a sample
    /// allocates nothing for readings already known.
    watched: Vec<(Key, Watched)>,
    /// The CPU-time estimate's last watts and when.
    cpu_estimate: Option<(Duration, Watts)>,
    /// The lowest CPU estimate seen: the machine at idle, as far as it was seen.
    cpu_floor: Option<f64>,
}

/// What the CPU-time estimate says for a reading that holds the CPU.
#[derive(Debug, Clone, Copy)]
struct Load {
    watts: f64,
    busy: bool,
}

/// Domains whose power includes the CPU's, for which the CPU's load is evidence.
fn holds_cpu(domain: Domain) -> bool {
    matches!(
        domain,
        Domain::Cpu | Domain::Soc | Domain::Platform | Domain::System | Domain::Wall
    )
}

fn watched(r: &Reading) -> bool {
    r.quality == Quality::Measured && is_consumption(r.domain)
}

/// Whether a source's readings are the CPU-time estimate the watch takes as the load's evidence.
pub fn is_cpu_estimate(quality: Quality, declared: Option<&[Domain]>) -> bool {
    quality == Quality::Estimated && declared == Some(&[Domain::Cpu][..])
}

impl StallWatch {
    /// Whether a reading that holds the CPU is still and not stalled, so the chain reads the CPU
    /// estimate in this sample for the evidence: every sample for its first
    /// [`EVIDENCE_FRESH`] still, then once an estimate is that old (a package counter that
    /// reads 0 for good on an idle machine costs a `/proc/stat` read every 30 s, not each
    /// sample).
    pub fn wants_evidence(&self) -> bool {
        let estimated_at = self.cpu_estimate.map(|(at, _)| at);
        self.watched.iter().any(|((_, domain, _), w)| {
            let Some(moved) = w.moved_at.filter(|m| *m < w.read_at) else {
                return false;
            };
            let fresh_still = w.read_at.saturating_sub(moved) < EVIDENCE_FRESH;
            let stale =
                estimated_at.is_none_or(|at| w.read_at.saturating_sub(at) >= EVIDENCE_FRESH);
            holds_cpu(*domain) && w.stalled.is_none() && (fresh_still || stale)
        })
    }

    /// Takes one source's readings read at `now`; returns those to keep and adds those left out
    /// to `stalled`.
    pub fn screen(
        &mut self,
        now: Duration,
        mut readings: Vec<Reading>,
        stalled: &mut Vec<Stalled>,
    ) -> Vec<Reading> {
        let cpu = self
            .cpu_estimate
            .filter(|(at, _)| now.saturating_sub(*at) <= EVIDENCE_FRESH)
            .map(|(_, w)| Load {
                watts: w.0,
                busy: self.cpu_floor.is_some_and(|f| w.0 >= BUSY_OVER_IDLE * f),
            });
        readings.retain(|r| {
            if !watched(r) {
                return true;
            }
            let known = self
                .watched
                .iter()
                .position(|((s, d, dev), _)| *s == r.source && *d == r.domain && *dev == r.device);
            let at = match known {
                Some(at) => at,
                None => {
                    let key = (r.source.clone(), r.domain, r.device.clone());
                    self.watched.push((key, Watched::default()));
                    self.watched.len() - 1
                }
            };
            let Some((_, w)) = self.watched.get_mut(at) else {
                return true;
            };
            match w.observe(now, r, cpu) {
                Some(s) => {
                    stalled.push(s);
                    false
                }
                None => true,
            }
        });
        readings
    }

    /// Notes the CPU estimate among a sample's readings, and forgets readings not read for a
    /// while (a source taken out, a device gone).
    pub fn end_sample(&mut self, now: Duration, breakdown: &[Reading]) {
        if let Some(w) = breakdown
            .iter()
            .filter(|r| r.domain == Domain::Cpu && r.quality == Quality::Estimated)
            .find_map(|r| r.watts.filter(|w| w.0.is_finite()))
        {
            self.cpu_estimate = Some((now, w));
            self.cpu_floor = Some(self.cpu_floor.map_or(w.0, |f| f.min(w.0)));
        }
        self.watched
            .retain(|(_, w)| now.saturating_sub(w.read_at) <= EVIDENCE_FRESH);
    }
}

impl Watched {
    /// Takes a reading at `now`; `Some` when it is stalled and left out.
    fn observe(&mut self, now: Duration, r: &Reading, cpu: Option<Load>) -> Option<Stalled> {
        let first = self.moved_at.is_none();
        self.read_at = now;
        let moved = match (r.energy_counter, self.value) {
            (Some(v), Some(prev)) if v.0.is_finite() => {
                let step = v.0 - prev;
                if step > 0.0 {
                    self.step = Some(self.step.map_or(step, |s| s.min(step)));
                }
                self.value = Some(v.0);
                step != 0.0
            }
            (Some(v), None) if v.0.is_finite() => {
                self.value = Some(v.0);
                true
            }
            (Some(_), _) => true,
            (None, _) => {
                self.value = None;
                let moved = r.watts.is_none_or(|w| w.0 != 0.0);
                if moved {
                    // A power sensor seen reading: fine-grained, however it is counted.
                    self.step = Some(FINE_STEP.0);
                }
                moved
            }
        };
        if moved || first {
            self.moved_at = Some(now);
            self.stalled = None;
            return None;
        }
        let still = now.saturating_sub(self.moved_at.unwrap_or(now));
        if let Some((s, cause)) = &mut self.stalled {
            // Stalled until it moves, whatever the evidence does meanwhile: one fall back, one
            // return.
            s.still_seconds = still.as_secs_f64();
            s.reason = cause.reason(still, s.evidence_watts);
            return Some(s.clone());
        }
        if still < STALL_AFTER {
            return None;
        }
        let secs = still.as_secs_f64();
        // Its own figure speaks only where it is not the counter's own delta, which is 0 here.
        let own = r.watts.map(|w| w.0).filter(|w| w.is_finite() && *w > 0.0);
        let load = cpu.filter(|_| holds_cpu(r.domain));
        let judged = match self.step {
            Some(step) => [(own, BY_OWN), (load.map(|c| c.watts), BY_LOAD)]
                .into_iter()
                .filter_map(|(w, by)| Some((w?, by)))
                .filter(|(w, _)| w * secs >= STEPS * step)
                .max_by(|a, b| a.0.total_cmp(&b.0)),
            None => own
                .filter(|w| w * secs >= STEPS * UNSEEN_STEP.0)
                .map(|w| (w, BY_OWN))
                .or(load.filter(|c| c.busy).map(|c| (c.watts, BY_LOAD))),
        };
        match judged {
            Some((e, by)) => {
                let cause = Cause {
                    what: if r.energy_counter.is_some() {
                        "its energy counter has not moved"
                    } else {
                        "it has read 0 W"
                    },
                    by,
                };
                let s = Stalled {
                    source: r.source.clone(),
                    domain: r.domain,
                    device: r.device.clone(),
                    still_seconds: secs,
                    evidence_watts: e,
                    reason: cause.reason(still, e),
                };
                self.stalled = Some((s.clone(), cause));
                Some(s)
            }
            // Still, but not shown to be wrong: believed until it is.
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Stamp;

    fn at(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A measured reading of `domain` from `source` with its counter at `joules` and its power.
    fn counter(source: &str, domain: Domain, joules: f64, watts: f64, s: u64) -> Reading {
        Reading {
            energy_counter: Some(Joules(joules)),
            ..Reading::power(
                domain,
                Watts(watts),
                source,
                Quality::Measured,
                Stamp::new(at(s), s as f64),
            )
        }
    }

    fn estimate(watts: f64, s: u64) -> Reading {
        Reading::power(
            Domain::Cpu,
            Watts(watts),
            "proc-stat",
            Quality::Estimated,
            Stamp::new(at(s), s as f64),
        )
    }

    /// Feeds one reading a second with the CPU estimate beside it; the seconds it was left out.
    fn run(
        watch: &mut StallWatch,
        seconds: std::ops::Range<u64>,
        reading: impl Fn(u64) -> Reading,
        cpu_watts: impl Fn(u64) -> f64,
    ) -> Vec<(u64, Stalled)> {
        let mut out = Vec::new();
        for s in seconds {
            let mut stalled = Vec::new();
            let kept = watch.screen(at(s), vec![reading(s)], &mut stalled);
            assert_eq!(kept.len() + stalled.len(), 1);
            out.extend(stalled.into_iter().map(|x| (s, x)));
            watch.end_sample(at(s), &[estimate(cpu_watts(s), s)]);
        }
        out
    }

    #[test]
    fn a_package_counter_frozen_under_load_is_stalled_after_5_s_until_it_moves() {
        // 12 W: 12 J a second until 40 s, then the same 480 J until 70 s, then on again. The
        // CPU estimate says 15 W: over 5 s still, 75 J against 3 steps of 12 J = 36 J.
        let joules = |s: u64| 12.0 * (s.min(40) + s.saturating_sub(70)) as f64;
        let mut watch = StallWatch::default();
        let left_out = run(
            &mut watch,
            0..100,
            |s| counter("rapl", Domain::Cpu, joules(s), 0.0, s),
            |_| 15.0,
        );
        let seconds: Vec<u64> = left_out.iter().map(|(s, _)| *s).collect();
        assert_eq!(seconds, (45..71).collect::<Vec<_>>());
        let (_, first) = &left_out[0];
        assert_eq!(first.still_seconds, 5.0);
        assert!((first.evidence_watts - 15.0).abs() < 1e-12);
        assert_eq!(
            first.reason,
            "stalled: its energy counter has not moved for 5 s while the CPU's load says 15.0 W"
        );
        assert_eq!(left_out[25].1.still_seconds, 30.0);
    }

    #[test]
    fn once_stalled_it_stays_out_until_it_moves_whatever_the_evidence_does() {
        let joules = |s: u64| 12.0 * s.min(10) as f64;
        let mut watch = StallWatch::default();
        let busy = run(
            &mut watch,
            0..16,
            |s| counter("rapl", Domain::Cpu, joules(s), 0.0, s),
            |_| 15.0,
        );
        assert_eq!(busy.first().map(|(s, _)| *s), Some(15));
        // The estimate drops to idle: still stalled, no flapping back.
        let idle = run(
            &mut watch,
            16..20,
            |s| counter("rapl", Domain::Cpu, joules(s), 0.0, s),
            |_| 0.5,
        );
        assert_eq!(idle.len(), 4);
        assert!(!watch.wants_evidence(), "a stalled reading needs no more");
    }

    #[test]
    fn a_watt_hour_counter_on_an_idle_machine_is_not_stalled() {
        // A raw total in Wh steps at 5 W: 3,600 J every 720 s, its own figure 5 W, the CPU
        // estimate 2 W. Still for 719 s between steps: 5 W × 719 s = 3,595 J, not 3 steps
        // (nor, before its first step, 3 Wh).
        let joules = |s: u64| 3600.0 * (s / 720) as f64;
        let mut watch = StallWatch::default();
        let left_out = run(
            &mut watch,
            0..2 * 720 + 1,
            |s| counter("shelly", Domain::Wall, joules(s), 5.0, s),
            |_| 2.0,
        );
        assert_eq!(left_out, Vec::new());
        // Still for three steps' worth at the plug's own 5 W (3 × 3,600 J ÷ 5 W = 2,160 s
        // after the last step at 1,440 s) and it is stalled, by its own power.
        let left_out = run(
            &mut watch,
            2 * 720 + 1..3700,
            |s| counter("shelly", Domain::Wall, joules(s.min(1440)), 5.0, s),
            |_| 2.0,
        );
        let (first, s) = &left_out[0];
        assert_eq!(*first, 1440 + 2160);
        assert!(
            s.reason.ends_with("while its own power says 5.0 W"),
            "{}",
            s.reason
        );
    }

    #[test]
    fn a_gpu_idle_at_a_true_0_w_is_not_stalled_by_the_cpus_load() {
        let joules = |s: u64| 30.0 * s.min(10) as f64;
        let mut watch = StallWatch::default();
        let left_out = run(
            &mut watch,
            0..120,
            |s| counter("nvml", Domain::Gpu, joules(s), 0.0, s),
            |_| 40.0,
        );
        assert_eq!(left_out, Vec::new());
        assert!(!watch.wants_evidence(), "no CPU evidence is read for a GPU");
    }

    #[test]
    fn a_cpu_channel_reading_0_w_under_load_is_stalled() {
        // The M2 under macOS 27: macmon's CPU power 0 W (no counter in the reading) while the
        // CPU-time estimate says the CPU is busy. Never seen to move: its first read starts
        // the clock, and only a busy CPU speaks against it.
        let mut watch = StallWatch::default();
        let zero = |s: u64| {
            Reading::power(
                Domain::Cpu,
                Watts(0.0),
                "macmon",
                Quality::Measured,
                Stamp::new(at(s), s as f64),
            )
        };
        // Idle (2 W) for 10 s, then busy (12 W, 6 times the idle estimate): the estimate of the
        // 10th second speaks at the 11th.
        let cpu = |s: u64| if s < 10 { 2.0 } else { 12.0 };
        let left_out = run(&mut watch, 0..20, zero, cpu);
        let (first, s) = &left_out[0];
        assert_eq!(*first, 11);
        assert_eq!(
            s.reason,
            "stalled: it has read 0 W for 11 s while the CPU's load says 12.0 W"
        );
    }

    #[test]
    fn a_counter_still_for_good_on_an_idle_machine_asks_for_the_estimate_every_30_s() {
        // A package counter that reads the same for good while the CPU idles at 2 W (never
        // stalled: a counter never seen to move needs a busy CPU).
        let mut watch = StallWatch::default();
        let mut asked = Vec::new();
        for s in 0..120 {
            let wants = watch.wants_evidence();
            let mut stalled = Vec::new();
            let r = counter("rapl", Domain::Cpu, 0.0, 0.0, s);
            assert_eq!(watch.screen(at(s), vec![r], &mut stalled).len(), 1);
            let read: &[Reading] = if wants { &[estimate(2.0, s)][..] } else { &[] };
            watch.end_sample(at(s), read);
            if wants {
                asked.push(s);
            }
        }
        // Each second while it has been still under 30 s (from 2 s: its first still read is
        // at 1 s), then whenever the last estimate was 30 s old at the read before (decided
        // before each sample): at 61 s (60 − 30) and 92 s (91 − 61).
        let mut expected: Vec<u64> = (2..=30).collect();
        expected.extend([61, 92]);
        assert_eq!(asked, expected);
    }

    #[test]
    fn without_evidence_a_still_counter_is_believed() {
        // No CPU estimate at all (none on this machine) and no power of its own.
        let mut watch = StallWatch::default();
        for s in 0..60 {
            let mut stalled = Vec::new();
            let r = counter("rapl", Domain::Cpu, 12.0 * s.min(10) as f64, 0.0, s);
            assert_eq!(watch.screen(at(s), vec![r], &mut stalled).len(), 1);
            assert_eq!(stalled, Vec::new());
            watch.end_sample(at(s), &[]);
        }
    }
}
