//! Low-power mode as routers and the UI read it: `GET /v1/low-power` and the advice file the
//! engine keeps current ([`crate::home::paths::advice_path`]) are this one view.
//!
//! Rule: the file is written only when the view changed, as a whole new file renamed over the
//! old one, so that a reader never sees half of it; a folder that cannot be written is said once
//! and given up.

use crate::published::PublishedState;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use wattbar_core::inference::Routed;
use wattbar_core::policy::Advice;
use wattbar_core::{LowPowerAction, Reason};

/// Low-power mode as routers and the UI read it (`GET /v1/low-power`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LowPowerView {
    pub enabled: bool,
    /// Seconds since the Unix epoch of the last change; `None` if it never changed.
    pub since: Option<f64>,
    pub reason: Option<Reason>,
    /// `None` while `low_power_model` is `auto` and no profiled model is good enough.
    pub recommended_model: Option<String>,
    pub recommendation: String,
    /// Mean efficiency score 0–10 of the last inference records; `None` until there are some.
    pub score: Option<f64>,
    /// The raw figure behind the score.
    pub tokens_per_second_per_watt: Option<f64>,
    /// The model with the most tokens/s per W measured on this machine.
    pub most_efficient_model: Option<String>,
    /// What the inference proxy does while the mode is on: `advise` or `route`.
    pub action: LowPowerAction,
    /// The requests routed to another model, over the inference records kept.
    pub routed: Routed,
    /// The last thing the mode did, as a sentence: switching, or unloading models.
    #[serde(default)]
    pub last_event: Option<String>,
    /// The draw above which it engages by itself, watts: `low_power_threshold_w`, else the
    /// machine's rest + 50 %; `None` while that rest is being learned.
    #[serde(default)]
    pub threshold_w: Option<f64>,
    /// The machine's draw at rest as learned, watts.
    #[serde(default)]
    pub rest_w: Option<f64>,
}

impl LowPowerView {
    pub fn from_parts(
        state: &wattbar_core::LowPowerState,
        advice: &Advice,
        action: LowPowerAction,
        routed: &Routed,
        last_event: Option<&String>,
        (threshold_w, rest_w): (Option<f64>, Option<f64>),
    ) -> Self {
        LowPowerView {
            threshold_w,
            rest_w,
            action,
            last_event: last_event.cloned(),
            routed: routed.clone(),
            enabled: state.enabled,
            since: state.since,
            reason: state.reason,
            recommended_model: advice.recommended_model.clone(),
            recommendation: advice.recommendation.clone(),
            score: advice.score,
            tokens_per_second_per_watt: advice.tokens_per_second_per_watt,
            most_efficient_model: advice.most_efficient_model.clone(),
        }
    }
}

impl From<&PublishedState> for LowPowerView {
    fn from(p: &PublishedState) -> Self {
        LowPowerView::from_parts(
            &p.low_power.state,
            &p.low_power.advice,
            p.prefs.low_power.action,
            &p.inference.view.routed,
            p.low_power.event.as_ref(),
            (p.low_power.threshold_w, p.low_power.rest_w),
        )
    }
}

/// The advice file, kept current by the engine.
pub(crate) struct AdviceFile {
    /// `None`: nowhere (none asked for, or it could not be written).
    path: Option<PathBuf>,
    /// The view as last written there.
    written: Option<LowPowerView>,
}

impl AdviceFile {
    pub fn new(path: Option<PathBuf>) -> Self {
        AdviceFile {
            path,
            written: None,
        }
    }

    /// Writes the view of `low_power` and `routed` (the requests it routed) under `config`
    /// when it differs from what the file holds.
    pub fn keep(
        &mut self,
        low_power: &crate::stages::low_power::LowPower,
        config: &wattbar_core::PolicyConfig,
        routed: &Routed,
    ) {
        let Some(path) = self.path.as_ref() else {
            return;
        };
        let view = LowPowerView::from_parts(
            low_power.state(),
            low_power.advice(),
            config.action,
            routed,
            low_power.event(),
            low_power.threshold(),
        );
        if self.written.as_ref() == Some(&view) {
            return;
        }
        let Ok(json) = serde_json::to_string(&view) else {
            return;
        };
        let tmp = path.with_extension("json.tmp");
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, format!("{json}\n")))
            .and_then(|()| std::fs::rename(&tmp, path));
        match written {
            Ok(()) => self.written = Some(view),
            Err(e) => {
                tracing::warn!("{}: {e}", path.display());
                self.path = None;
            }
        }
    }
}
