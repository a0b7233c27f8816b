//! A part: one (domain, device) as one source reads it, the unit the chain gives owners to.

use crate::reading::{Domain, Reading};
use serde::{Deserialize, Serialize};

/// One (domain, device) as one source reads it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Part {
    pub domain: Domain,
    pub device: Option<String>,
    pub source: String,
}

impl Part {
    pub fn of(r: &Reading) -> Part {
        Part {
            domain: r.domain,
            device: r.device.clone(),
            source: r.source.clone(),
        }
    }

    pub fn is(&self, r: &Reading) -> bool {
        self.domain == r.domain && self.device == r.device && self.source == r.source
    }
}
