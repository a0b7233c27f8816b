//! What the engine keeps for publishing beyond its stages' own state, and what wakes it.

use crate::command::Command;
use crate::inference::RequestEvent;
use tokio::sync::watch;
use wattbar_core::Preferences;

/// What publishing needs beyond the stages' own state.
pub(super) struct Publication {
    pub seq: u64,
    /// The chain's source ids, in order.
    pub sources: Vec<String>,
    /// Start-up's notice ([`super::EngineConfig::notice`]).
    pub start_notice: Option<String>,
    /// Answers to send once the state they caused is published, so that whoever is answered
    /// reads that state, not the one before.
    pub answers: Vec<Box<dyn FnOnce() + Send>>,
    /// The preferences, sent when they change and only then: what follows them (MQTT, OTLP)
    /// wakes for a change, not for every sample.
    pub prefs: watch::Sender<Preferences>,
}

/// What woke the engine.
pub(super) enum Work {
    Sample,
    /// What the proxy saw. A request that started or ended makes a sample now, unless the last
    /// sample is more recent than the fast period.
    Events(Vec<RequestEvent>),
    Apply(Command),
}
