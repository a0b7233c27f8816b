//! What part of the machine a number covers: the wall, the whole machine on its DC side, or a
//! sum of named parts.
//!
//! Rules:
//! - Every reading and the headline have a [`Coverage`]. A headline summed from parts covers
//!   those parts and nothing more: an estimate of the CPU package is `components` covering
//!   `cpu-package`, never `system`, whatever domain the sum is filed under.
//! - Figures of different coverage are different quantities: they are compared (the gap between
//!   the wall and the sensors), never added.

use crate::chain::part::Part;
use crate::reading::Domain;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How much of the machine a figure covers, from most to least.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// AC input at the socket, from a plug: the power supply's loss included.
    Wall,
    /// The whole machine on its DC side: battery discharge, SMC `PSTR`, RAPL `psys`.
    System,
    /// A sum of named parts ([`Coverage::covers`]); the rest of the machine is not in it.
    Components,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Wall, Scope::System, Scope::Components];

    /// The scope named `name` (as [`Scope::as_str`] writes it).
    pub fn named(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Wall => "wall",
            Scope::System => "system",
            Scope::Components => "components",
        }
    }

    /// A scope as people read it: `unrecorded` where none is known (energy kept before scopes
    /// were, or nothing measured here).
    pub fn shown(scope: Option<Scope>) -> &'static str {
        scope.map_or("unrecorded", Scope::as_str)
    }

    /// A scope as a metric's label: empty where none is known.
    pub fn label(scope: Option<Scope>) -> &'static str {
        scope.map_or("", Scope::as_str)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A figure's scope and, for `components`, the parts it covers (`cpu-package`, `dram`,
/// `gpu:0`), in the order they were summed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Coverage {
    pub scope: Scope,
    #[serde(default)]
    pub covers: Vec<String>,
}

impl Coverage {
    /// What one reading of `domain` (on `device`, where there are several) covers.
    pub fn of_domain(domain: Domain, device: Option<&str>) -> Coverage {
        let part = |name: &str| Coverage {
            scope: Scope::Components,
            covers: vec![name.to_string()],
        };
        match domain {
            Domain::Wall => Coverage {
                scope: Scope::Wall,
                covers: Vec::new(),
            },
            Domain::System | Domain::Platform | Domain::Adapter => Coverage {
                scope: Scope::System,
                covers: Vec::new(),
            },
            Domain::Cpu => part("cpu-package"),
            Domain::Dram => part("dram"),
            Domain::Gpu => part(&format!("gpu:{}", device.unwrap_or("0"))),
            Domain::Soc => part("soc"),
            Domain::Ane => part("ane"),
            Domain::Battery => part("battery-charging"),
        }
    }

    /// What a headline made of `parts` covers: one whole-machine reading, or the parts summed.
    /// `None` without parts (no headline).
    pub fn of_parts(parts: &[Part]) -> Option<Coverage> {
        if let [one] = parts {
            let whole = Coverage::of_domain(one.domain, one.device.as_deref());
            if whole.scope != Scope::Components {
                return Some(whole);
            }
        }
        let mut covers: Vec<String> = Vec::new();
        for p in parts {
            for name in Coverage::of_domain(p.domain, p.device.as_deref()).covers {
                if !covers.contains(&name) {
                    covers.push(name);
                }
            }
        }
        (!covers.is_empty()).then_some(Coverage {
            scope: Scope::Components,
            covers,
        })
    }

    /// A short phrase for people: "the whole machine", "the CPU package only",
    /// "the CPU package, DRAM and GPU 0 only".
    pub fn describe(&self) -> String {
        match self.scope {
            Scope::Wall => "the whole machine at the wall".to_string(),
            Scope::System => "the whole machine".to_string(),
            Scope::Components => {
                let names: Vec<String> = self.covers.iter().map(|c| part_name(c)).collect();
                let list = match names.as_slice() {
                    [] => "no part".to_string(),
                    [one] => one.clone(),
                    [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
                };
                format!("{list} only")
            }
        }
    }
}

fn part_name(cover: &str) -> String {
    match cover {
        "cpu-package" => "the CPU package".to_string(),
        "dram" => "DRAM".to_string(),
        "soc" => "the SoC".to_string(),
        "ane" => "the Neural Engine".to_string(),
        "battery-charging" => "battery charging".to_string(),
        other => match other.strip_prefix("gpu:") {
            Some(n) => format!("GPU {n}"),
            None => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(domain: Domain, device: Option<&str>) -> Part {
        Part {
            domain,
            device: device.map(String::from),
            source: "test".into(),
        }
    }

    #[test]
    fn a_cpu_estimate_covers_the_cpu_package_not_the_machine() {
        let c = Coverage::of_parts(&[part(Domain::Cpu, None)]);
        assert_eq!(
            c,
            Some(Coverage {
                scope: Scope::Components,
                covers: vec!["cpu-package".into()]
            })
        );
        assert_eq!(
            c.map(|c| c.describe()).as_deref(),
            Some("the CPU package only")
        );
    }

    #[test]
    fn a_sum_of_parts_lists_each_part_once_in_order() {
        let c = Coverage::of_parts(&[
            part(Domain::Cpu, Some("package-0")),
            part(Domain::Cpu, Some("package-1")),
            part(Domain::Dram, None),
            part(Domain::Gpu, Some("1")),
        ])
        .unwrap_or_else(|| panic!("no coverage"));
        assert_eq!(c.covers, ["cpu-package", "dram", "gpu:1"]);
        assert_eq!(c.describe(), "the CPU package, DRAM and GPU 1 only");
    }

    #[test]
    fn whole_machine_readings_are_system_and_no_parts_is_no_headline() {
        for domain in [Domain::System, Domain::Platform, Domain::Adapter] {
            let c = Coverage::of_parts(&[part(domain, None)]);
            assert_eq!(c.map(|c| c.scope), Some(Scope::System), "{domain}");
        }
        assert_eq!(Coverage::of_parts(&[]), None);
    }
}
