//! What readers see ([`Engine::published`]): each stage's part whole, gathered once a sample
//! or a command.

use super::engine::Engine;
use crate::published::{InferenceNow, Pace, PublishedState, Sources};
use std::sync::Arc;

impl Engine {
    /// What readers see now, each stage's part whole.
    pub fn published(&mut self) -> Arc<PublishedState> {
        self.publication.seq += 1;
        let energy = self
            .meter
            .now(&self.prefs.currency, self.prefs.price_per_kwh.per_kwh());
        let start_notice = self.publication.start_notice.as_ref();
        let scope = self.meter.accounting.scope();
        let kept = self.recorder.kept(self.clock.unix(), scope, start_notice);
        let inference = InferenceNow {
            view: self.inference.view(),
            inflight: self.inference.requests.inflight(),
            models_in_flight: self.inference.requests.models_in_flight(),
            resident: self.resident.costs(),
            servers: self.servers.view(),
            intervals: self.inference.book.intervals(),
            records: self.inference.book.records(),
            profiles: self.inference.profiles(),
            keys: self.keys.list(self.clock.unix()).into(),
        };
        Arc::new(PublishedState {
            seq: self.publication.seq,
            snapshot: self.meter.snapshot.clone(),
            prefs: Arc::clone(&self.prefs),
            pace: Pace {
                interval_ms: self.prefs.interval_ms,
                period_ms: u64::try_from(self.period().as_millis()).unwrap_or(u64::MAX),
                awake_because: self.rest.awake_because(),
            },
            energy,
            kept,
            sources: Sources {
                ids: self.publication.sources.clone(),
                reads: self.chain.counters(),
            },
            low_power: self.low_power.now(),
            wear: self.wear.view().clone(),
            inference,
            programs: Arc::clone(&self.programs.view),
            prices: self.prices.view(),
        })
    }
}
