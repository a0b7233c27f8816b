//! Energy per program as a stage of each sample: every measured interval's CPU and GPU energy goes
//! to the program meter, and at its pace the processes are read and the view readers see is
//! rebuilt, with the model server named.
//!
//! Rule: programs share the CPU domain's energy, so theirs is its quality; a GPU's energy goes to
//! the programs that used it, at the GPU reading's quality.

use super::meter::Sampled;
use crate::programs::{ProgramMeter, ProgramsView};
use std::collections::BTreeMap;
use std::sync::Arc;
use wattbar_core::inference::resident::Loaded;
use wattbar_core::inference::Record;
use wattbar_core::{Chain, Domain};

/// How long a model answered through the proxy still names its server.
const ANSWERED_SECONDS: f64 = 600.0;

pub(crate) struct Programs {
    pub meter: ProgramMeter,
    /// What readers see, as of the last process read.
    pub view: Arc<ProgramsView>,
    /// Whether this engine may look for model servers' ports at all ([`crate::EngineConfig`]).
    may_find: bool,
}

impl Programs {
    /// `may_find`, and the preference `find`: whether model servers' listening ports are looked
    /// for at the reads.
    pub fn new(mut meter: ProgramMeter, may_find: bool, find: bool) -> Self {
        meter.find_model_servers(may_find && find);
        Programs {
            meter,
            view: Arc::default(),
            may_find,
        }
    }

    /// The preference `find_model_servers` changed to `find`.
    pub fn find_model_servers(&mut self, find: bool) {
        self.meter.find_model_servers(self.may_find && find);
    }

    /// Adds a measured interval's energy.
    pub fn observe(&mut self, s: &Sampled) {
        let (Some(interval), Some(headline)) = (&s.interval, s.snapshot.headline.as_ref()) else {
            return;
        };
        if interval.joules.is_none() {
            return;
        }
        let cpu = s
            .step
            .by_domain
            .iter()
            .find(|(d, _)| **d == Domain::Cpu)
            .map(|(_, j)| j.0);
        let quality = s
            .snapshot
            .breakdown
            .iter()
            .find(|r| r.domain == Domain::Cpu)
            .map_or(headline.quality, |r| r.quality);
        self.meter.add(
            s.step.headline.joules.0,
            cpu,
            interval.end - interval.start,
            Some(quality),
        );
        let gpu_quality = s
            .snapshot
            .breakdown
            .iter()
            .filter(|r| r.domain == Domain::Gpu)
            .map(|r| r.quality)
            .max();
        for (part, joules) in &s.step.by_part {
            if let (Domain::Gpu, Some(device)) = (part.domain, &part.device) {
                self.meter
                    .add_gpu(&part.source, device, joules.0, gpu_quality);
            }
        }
    }

    /// Reads the processes when due and rebuilds the view; gives what each program used since
    /// the last read, for the ledger. `loaded`: the models the server holds, where known;
    /// `recent`: the latest records, which name the models answered lately.
    pub fn read_if_due(
        &mut self,
        s: &Sampled,
        chain: &mut Chain,
        upstream_port: Option<u16>,
        loaded: Option<&[Loaded]>,
        recent: &[Record],
    ) -> Option<BTreeMap<String, f64>> {
        self.meter.set_upstream_port(upstream_port);
        let due = self
            .meter
            .read_if_due_with(s.at.monotonic, s.at.unix_seconds, || chain.process_use());
        if !due {
            return None;
        }
        let mut view = self.meter.view().clone();
        let loaded: Option<Vec<String>> =
            loaded.map(|l| l.iter().map(|m| m.name.clone()).collect());
        let mut answered: Vec<String> = Vec::new();
        for r in recent {
            if r.end >= s.at.unix_seconds - ANSWERED_SECONDS && !answered.contains(&r.model) {
                answered.push(r.model.clone());
            }
        }
        crate::programs::name_servers(&mut view, loaded.as_deref(), &answered);
        self.view = Arc::new(view);
        Some(self.meter.take_pending())
    }
}
