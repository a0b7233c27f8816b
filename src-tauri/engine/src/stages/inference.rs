//! Inference as a stage of each sample: the requests the proxy reported, owned here alone, and
//! the book that turns them into records. Each measured interval goes to the book with the
//! requests open during it; a request that ended by a sample is settled at that sample.
//!
//! Rules:
//! - A record is made only from intervals the engine sampled: a request is settled at the first
//!   sample at or after its end, never before.
//! - Record ids are reserved in the ledger ahead of those handed out ([`Inference::ids_ahead`]).
//! - A record for work a client measured itself covers a window that has ended, and is refused
//!   with the reason otherwise.

use crate::inference::events::External;
use crate::inference::{Book, InferenceView, RecordIds, Requests};
use crate::server_metrics::ProxySeen;
use std::sync::Arc;
use wattbar_core::eval::best::{best, KeptProfile, Targets};
use wattbar_core::inference::{Baseline, Interval, Record};
use wattbar_core::policy::Measured;
use wattbar_core::{PolicyConfig, Stamp};

/// The stage: requests, the ids handed to the proxy, the book of records, and the graded
/// profiles that choose the low-power model where it is `auto`.
pub(crate) struct Inference {
    pub requests: Requests,
    pub ids: RecordIds,
    pub book: Book,
    profiles: Arc<[KeptProfile]>,
    /// The cheapest model good enough for the targets it was chosen for, until the profiles or
    /// the targets change: not chosen again at every record.
    chosen: Option<(Targets, Option<(String, String)>)>,
}

/// What one sample settled, for the ledger.
pub(crate) struct Settled {
    pub records: Vec<Record>,
    /// A client waits for one of them (a receipt): written at once.
    pub at_once: bool,
}

/// Why a record for work measured elsewhere was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Its window does not run forwards.
    Backwards,
    /// It ends this many seconds in the future.
    Future(f64),
    /// No interval could be matched to it.
    Unmade,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Backwards => f.write_str("start must come before end"),
            Refused::Future(s) => write!(f, "end is {s:.1} s in the future"),
            Refused::Unmade => f.write_str("the record could not be made"),
        }
    }
}

impl Inference {
    /// Starts from `book` and the `profiles` the ledger kept.
    pub fn new(book: Book, ids: RecordIds, profiles: Vec<KeptProfile>) -> Self {
        Inference {
            requests: Requests::default(),
            ids,
            book,
            profiles: profiles.into(),
            chosen: None,
        }
    }

    /// Keeps a new profile; whether it is one: a model and an evaluation named, its counts
    /// within its queries, its figures finite.
    pub fn keep_profile(&mut self, p: KeptProfile) -> Result<(), String> {
        let r = &p.run;
        let figures = [
            r.accuracy,
            r.avg_per_query_energy_joules,
            r.joules_per_correct_answer,
            r.intelligence_per_joule,
            r.itl_seconds_median,
        ];
        if r.model.trim().is_empty() || p.eval.trim().is_empty() {
            return Err("a profile names its model and its evaluation".into());
        }
        let graded = r.correct.saturating_add(r.incorrect);
        if graded > p.queries {
            return Err(format!("{graded} graded answers of {} queries", p.queries));
        }
        // The accuracy is the counts': a profile that says otherwise is not one.
        let counted = (graded > 0).then(|| r.correct as f64 / graded as f64);
        let agrees = match (r.accuracy, counted) {
            (None, None) => true,
            (Some(a), Some(c)) => (a - c).abs() <= 1e-9,
            _ => false,
        };
        if !agrees {
            return Err(format!(
                "accuracy {:?} is not {} correct of {graded} graded",
                r.accuracy, r.correct
            ));
        }
        if !p.at.is_finite() || figures.iter().flatten().any(|x| !x.is_finite() || *x < 0.0) {
            return Err("a profile's figures are finite numbers, none below 0".into());
        }
        if r.accuracy.is_some_and(|a| a > 1.0) {
            return Err("accuracy is a fraction".into());
        }
        let mut kept = self.profiles.to_vec();
        kept.push(p);
        self.profiles = kept.into();
        self.chosen = None;
        Ok(())
    }

    /// Every profile kept, oldest first.
    pub fn profiles(&self) -> Arc<[KeptProfile]> {
        Arc::clone(&self.profiles)
    }

    /// The first id not yet handed out: the ledger reserves ids up to it before any is used.
    pub fn ids_ahead(&self) -> u64 {
        self.ids.next()
    }

    /// Observes a sampled interval: the book keeps it with the requests open during it.
    /// Whether a local request (not a cloud one) was open then.
    pub fn observe(&mut self, interval: &Interval) -> bool {
        let open = self.requests.open();
        self.book.push_interval(interval.clone(), &open);
        open.iter().any(|o| !o.remote)
    }

    /// A proxy request is in flight, or waits for the sample that settles it.
    pub fn busy(&self) -> bool {
        self.requests.inflight() > 0 || self.requests.unsettled()
    }

    /// What the proxy measured itself, for the windows of its upstream's own counters.
    pub fn proxy_seen(&self) -> ProxySeen {
        let open = self
            .requests
            .open()
            .into_iter()
            .filter(|o| !o.remote)
            .map(|o| {
                let end = o.end.map_or(f64::INFINITY, |e| e.unix_seconds);
                (o.start.unix_seconds, end)
            });
        let recent = self.book.view();
        ProxySeen {
            upstream_port: self.requests.upstream_port(),
            spans: open
                .chain(recent.recent.iter().map(|r| (r.start, r.end)))
                .collect(),
        }
    }

    /// Turns the requests that ended by `at` (the latest sample) into records.
    pub fn settle(&mut self, at: Stamp) -> Option<Settled> {
        let finished = self.requests.take_finished(at.monotonic);
        if finished.is_empty() {
            return None;
        }
        let at_once = finished.iter().any(|f| f.urgent);
        let records = self.book.settle(finished, &self.requests.open());
        Some(Settled { records, at_once })
    }

    /// The idle baseline, when it changed since the last call.
    pub fn take_baseline_change(&mut self) -> Option<Baseline> {
        self.book.take_baseline_change()
    }

    /// Whether work a client measured itself can be recorded at wall-clock `now`: its window
    /// runs forwards and has ended.
    pub fn check_external(e: &External, now: f64) -> Result<(), Refused> {
        if !(e.start.is_finite() && e.end.is_finite() && e.start < e.end) {
            return Err(Refused::Backwards);
        }
        if e.end > now + 1.0 {
            return Err(Refused::Future(e.end - now));
        }
        Ok(())
    }

    /// Makes the record of `e` (checked) as of the latest sample `last`.
    pub fn external(&mut self, e: External, last: Stamp) -> Result<Record, Refused> {
        self.book
            .external(e, self.ids.take(), last, &self.requests.open())
            .ok_or(Refused::Unmade)
    }

    /// What low-power mode's advice weighs: the score, the efficiency, the most efficient model
    /// and, where the low-power model is `auto`, the cheapest one good enough for `config`.
    pub fn measured(&mut self, config: &PolicyConfig) -> Measured {
        let good_enough = if config.auto_model() {
            let targets = config.targets();
            match &self.chosen {
                Some((t, chosen)) if *t == targets => chosen.clone(),
                _ => {
                    let choice = best(&self.profiles, &targets);
                    let chosen = choice.chosen.zip(choice.eval);
                    self.chosen = Some((targets, chosen.clone()));
                    chosen
                }
            }
        } else {
            None
        };
        let v = self.book.view();
        Measured {
            score: v.score,
            tokens_per_second_per_watt: v.tokens_per_second_per_watt,
            most_efficient_model: v.most_efficient_model.clone(),
            good_enough,
        }
    }

    pub fn view(&self) -> Arc<InferenceView> {
        self.book.view()
    }
}
