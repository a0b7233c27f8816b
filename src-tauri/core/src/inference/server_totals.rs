//! Each model's sums over the windows of the servers followed by their own counters, and how
//! the lists show them beside the proxy's figures.
//!
//! Rules:
//! - A model's sums count only windows whose energy is known over enough of them
//!   ([`ServerWindow::well_covered`]), tokens and joules alike, so that the two divide into
//!   joules per token; and never a window whose requests the proxy measured itself (`proxied`):
//!   those are counted once, as its records.
//! - Joules per token are per completion token, as the proxy's records give them.
//! - Sums are kept per scope and parts covered: windows measured at the wall, on the CPU
//!   package, or on the server's own share of a GPU are different quantities, never added.

use super::server_window::ServerWindow;
use crate::scope::Scope;
use serde::Serialize;
use std::collections::BTreeMap;

/// One model's sums, in one scope, over the counted windows whose energy is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ServerTotal {
    pub server: String,
    pub model: Option<String>,
    /// What the energy covers; `None` where not known.
    pub scope: Option<Scope>,
    pub covers: Vec<String>,
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub energy_joules: f64,
}

impl ServerTotal {
    /// Empty sums for `w`'s server, model and scope.
    pub fn of(w: &ServerWindow) -> ServerTotal {
        ServerTotal {
            server: w.server.clone(),
            model: w.model.clone(),
            scope: w.scope,
            covers: w.covers.clone(),
            ..ServerTotal::default()
        }
    }

    /// Adds `w` when its energy is known, in these sums' scope, and the proxy did not measure
    /// it; whether it was added.
    pub fn add(&mut self, w: &ServerWindow) -> bool {
        if w.proxied || !w.well_covered() || w.scope != self.scope || w.covers != self.covers {
            return false;
        }
        let Some(joules) = w.energy_joules.filter(|j| j.is_finite() && *j >= 0.0) else {
            return false;
        };
        let tokens = |n: Option<f64>| n.filter(|n| n.is_finite() && *n >= 0.0).unwrap_or(0.0);
        self.prompt_tokens += tokens(w.prompt_tokens);
        self.completion_tokens += tokens(w.completion_tokens);
        self.energy_joules += joules;
        true
    }
}

/// Each model's sums over `windows`, by server then model.
pub fn sum_windows<'a>(windows: impl Iterator<Item = &'a ServerWindow>) -> Vec<ServerTotal> {
    type Key = (String, Option<String>, Option<Scope>, Vec<String>);
    let mut totals: BTreeMap<Key, ServerTotal> = BTreeMap::new();
    for w in windows {
        let key = (w.server.clone(), w.model.clone(), w.scope, w.covers.clone());
        totals
            .entry(key)
            .or_insert_with(|| ServerTotal::of(w))
            .add(w);
    }
    totals
        .into_values()
        .filter(|t| t.completion_tokens > 0.0 || t.prompt_tokens > 0.0)
        .collect()
}

/// Where a model's figures come from: the proxy's per-request records, or a server's own
/// counters read per window.
pub const SOURCE_PROXY: &str = "proxy";
pub const SOURCE_SERVER_METRICS: &str = "server-metrics";

/// The figures of `figures` with their source, as `/v1/models` and `wattbar-cli models` list
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Sourced<T> {
    pub source: std::borrow::Cow<'static, str>,
    #[serde(flatten)]
    pub figures: T,
}

/// A model's figures from a server's own counters, beside the proxy's.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ServerModel {
    /// Its name, or `(unnamed)` for the one model of a server that names none.
    pub model: String,
    pub server: String,
    pub prompt_tokens: f64,
    pub completion_tokens: f64,
    pub energy_joules: f64,
    /// Per completion token, as the proxy's; `None` before any token.
    pub joules_per_token: Option<f64>,
    /// What the energy covers; `None` where not known.
    #[serde(default)]
    pub scope: Option<Scope>,
    #[serde(default)]
    pub covers: Vec<String>,
}

/// The name of the model of a server that names none.
pub const UNNAMED_MODEL: &str = "(unnamed)";

impl ServerTotal {
    /// The model's figures as listed beside the proxy's.
    pub fn listed(&self) -> Sourced<ServerModel> {
        Sourced {
            source: SOURCE_SERVER_METRICS.into(),
            figures: ServerModel {
                model: self
                    .model
                    .clone()
                    .unwrap_or_else(|| UNNAMED_MODEL.to_string()),
                server: self.server.clone(),
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.completion_tokens,
                energy_joules: self.energy_joules,
                joules_per_token: (self.completion_tokens > 0.0)
                    .then(|| self.energy_joules / self.completion_tokens),
                scope: self.scope,
                covers: self.covers.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two windows of 100 and 50 tokens at 2,000 and 1,000 J, and one of 30 tokens whose energy
    /// was not measured: the sums are 150 tokens and 3,000 J, 20 J a token, never 180 tokens.
    #[test]
    fn a_window_without_energy_adds_to_no_sum() {
        let window = |completion: f64, joules: Option<f64>| ServerWindow {
            server: "s".into(),
            model: None,
            from: 0.0,
            to: 10.0,
            prompt_tokens: Some(10.0),
            completion_tokens: Some(completion),
            energy_joules: joules,
            net_energy_joules: None,
            joules_per_token: None,
            net_joules_per_token: None,
            prefill_energy_joules: None,
            decode_energy_joules: None,
            concurrent: false,
            coarse: false,
            shared: false,
            proxied: false,
            scope: Some(Scope::Wall),
            covers: Vec::new(),
            covered: Some(1.0),
            gpu_processes: None,
        };
        let mut total = ServerTotal::of(&window(0.0, None));
        assert!(total.add(&window(100.0, Some(2000.0))));
        assert!(total.add(&window(50.0, Some(1000.0))));
        assert!(!total.add(&window(30.0, None)));
        assert!(!total.add(&window(30.0, Some(f64::NAN))));
        let proxied = ServerWindow {
            proxied: true,
            ..window(40.0, Some(800.0))
        };
        assert!(!total.add(&proxied), "the proxy's records count it");
        // Measured over half the window (a plug that dropped out): 40 tokens against 400 J of
        // 5 s would read 10 J a token where 20 were drawn.
        let half = ServerWindow {
            covered: Some(0.5),
            ..window(40.0, Some(400.0))
        };
        assert!(!total.add(&half), "half covered");
        // 300 J on the CPU package alone, or on the server's share of GPU 0, is another
        // quantity than the wall's joules.
        let package = ServerWindow {
            scope: Some(Scope::Components),
            covers: vec!["cpu-package".into()],
            ..window(40.0, Some(300.0))
        };
        assert!(!total.add(&package), "another scope");
        let on_gpu = ServerWindow {
            covers: vec!["gpu:0".into()],
            ..package.clone()
        };
        assert!(!ServerTotal::of(&package).add(&on_gpu), "other parts");
        let sums = sum_windows([window(100.0, Some(2000.0)), package].iter());
        let by_scope: Vec<(Option<Scope>, f64)> =
            sums.iter().map(|t| (t.scope, t.energy_joules)).collect();
        assert_eq!(
            by_scope,
            vec![
                (Some(Scope::Wall), 2000.0),
                (Some(Scope::Components), 300.0)
            ]
        );
        assert_eq!(
            (
                total.prompt_tokens,
                total.completion_tokens,
                total.energy_joules
            ),
            (20.0, 150.0, 3000.0)
        );
    }
}
