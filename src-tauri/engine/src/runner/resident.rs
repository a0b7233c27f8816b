//! What the models a server holds cost: the residency ledger of loaded sets and the costs readers
//! see, rebuilt at each sample ([`super::residency`] feeds it).

use std::sync::Arc;
use wattbar_core::inference::resident::{Residency, ResidentCost};

pub(super) struct Resident {
    pub residency: Residency,
    /// The proxy had read the loaded models at the last sample.
    pub followed: bool,
    /// What each resident model costs, as of the last sample.
    pub costs: Arc<[ResidentCost]>,
}

impl Resident {
    pub fn new(residency: Residency, price_per_kwh: f64) -> Self {
        // What the store kept is shown from the start, before the proxy reads the loaded models.
        let costs = Arc::from(residency.costs(price_per_kwh));
        Resident {
            residency,
            followed: false,
            costs,
        }
    }
}
