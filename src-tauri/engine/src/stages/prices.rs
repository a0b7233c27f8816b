//! Prices and grid intensities that move by the slot: the feeds the preferences name
//! (`price_feed`, `carbon_feed`), what the meter prices each interval with, and what readers see
//! of them.
//!
//! Rules:
//! - Each feed is fetched on a thread of its own ([`Fetcher`]): the engine's loop never waits
//!   for a vendor. A good answer waits [`FeedPace::every`] (an hour) for the next; a failed one
//!   is asked again sooner, backing off to the hour.
//! - A good answer replaces the slots it covers and is handed to the ledger; a restart starts
//!   from the slots the ledger kept, so an offline day prices from the cache until it runs out.
//! - A failed fetch keeps the last good slots and says why ([`FeedView::error`]); where no slot
//!   is known the fallback prices, flagged ([`wattbar_core::pricing`]). Never a price of 0.
//! - Prices are kept as the feed gives them (spot) and made retail, `(spot + charges) ×
//!   (1 + tax)`, when the meter is given them; a change of charges re-prices from then on.
//! - A feed whose currency is not the preferences' is not used: its figures would be read in
//!   the wrong money. It says so.

use crate::time::clock::Clock;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;
use wattbar_core::prefs::FeedPref;
use wattbar_core::slots::{Quantity, Series, Slot, Window};
use wattbar_core::{Preferences, Pricing};
use wattbar_ledger::store::feeds::FeedSlots;
use wattbar_sources::prices::fetch::FeedClient;

/// Slots kept in memory and shown: from a day back.
pub const KEPT_BACK_SECONDS: f64 = 86_400.0;
/// Slots kept ahead: a week, more than any feed publishes.
const KEPT_AHEAD_SECONDS: f64 = 7.0 * 86_400.0;
/// The window the tray names: the cheapest two hours in the next day.
pub const CHEAPEST_SPAN_SECONDS: f64 = 2.0 * 3600.0;
const CHEAPEST_WITHIN_SECONDS: f64 = 86_400.0;

/// How often a feed is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedPace {
    /// After a good answer.
    pub every: Duration,
    /// After a failed one, doubled at each failure up to `every`.
    pub retry: Duration,
}

impl Default for FeedPace {
    fn default() -> Self {
        FeedPace {
            every: Duration::from_secs(3600),
            retry: Duration::from_secs(60),
        }
    }
}

/// What readers see of one feed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedView {
    /// The feed, as the ledger keys it (`energy-charts:DE-LU`).
    pub feed: String,
    pub quantity: Quantity,
    /// Prices' currency; `None` for carbon.
    pub currency: Option<String>,
    /// The value in force now (retail for prices); `None` where the feed has none now and the
    /// fallback is used.
    pub now: Option<f64>,
    /// The slots known from a day back (retail for prices), in time order.
    pub slots: Vec<Slot>,
    /// The lowest two hours within the next day, where known.
    pub cheapest_2h: Option<Window>,
    /// When the last good answer came; `None` before one (the cache may still price).
    pub fetched_unix: Option<f64>,
    /// Why the last fetch gave nothing, while that lasts.
    pub error: Option<String>,
}

/// What readers see of both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PricesView {
    pub price: Option<FeedView>,
    pub carbon: Option<FeedView>,
}

struct Fetched {
    result: Result<Series, String>,
    at_unix: f64,
}

/// A feed's thread; dropping it ends the thread at its next wait.
struct Fetcher {
    rx: Receiver<Fetched>,
    _stop: Sender<()>,
}

impl Fetcher {
    fn spawn(pref: FeedPref, carbon: bool, clock: Arc<dyn Clock>, pace: FeedPace) -> Fetcher {
        let (tx, rx) = mpsc::channel();
        let (stop, stopped) = mpsc::channel::<()>();
        let name = if carbon { "carbon-feed" } else { "price-feed" };
        let spawned = std::thread::Builder::new()
            .name(format!("wattbar-{name}"))
            .spawn(move || {
                let client = FeedClient::new(&pref);
                let mut failures = 0u32;
                loop {
                    let at_unix = clock.unix();
                    let result = match &client {
                        Ok(c) => c.fetch(at_unix, carbon).map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    };
                    // A minute after the first failure, doubling, to the hour.
                    failures = if result.is_ok() { 0 } else { failures + 1 };
                    let wait = match failures {
                        0 => pace.every,
                        n => pace
                            .retry
                            .saturating_mul(1 << (n - 1).min(16))
                            .min(pace.every),
                    };
                    if tx.send(Fetched { result, at_unix }).is_err() {
                        return;
                    }
                    match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::error!("the {name} thread could not start: {e}");
        }
        Fetcher { rx, _stop: stop }
    }
}

/// One feed followed.
struct Feed {
    pref: FeedPref,
    key: String,
    carbon: bool,
    /// As fetched or restored: spot prices, or intensities.
    kept: Option<Series>,
    fetcher: Fetcher,
    fetched_unix: Option<f64>,
    error: Option<String>,
}

impl Feed {
    fn quantity(&self) -> Quantity {
        if self.carbon {
            Quantity::GramsPerKwh
        } else {
            Quantity::PricePerKwh
        }
    }

    /// What the meter prices with: retail prices, or the intensities as they are.
    fn priced(&self) -> Option<Series> {
        Some(self.pref.retail(self.kept.as_ref()?))
    }

    fn view(&self, now_unix: f64, usable: Option<&Series>) -> FeedView {
        let shown = self.priced().map(|s| s.since(now_unix - KEPT_BACK_SECONDS));
        FeedView {
            feed: self.key.clone(),
            quantity: self.quantity(),
            currency: shown.as_ref().and_then(|s| s.currency.clone()),
            now: usable.and_then(|s| s.at(now_unix)),
            cheapest_2h: usable.and_then(|s| {
                let end = s.span()?.1.min(now_unix + CHEAPEST_WITHIN_SECONDS);
                s.lowest_window(now_unix, end, CHEAPEST_SPAN_SECONDS)
            }),
            slots: shown.map(|s| s.slots).unwrap_or_default(),
            fetched_unix: self.fetched_unix,
            error: self.error.clone(),
        }
    }
}

/// The stage: the feeds, and the view of them.
pub(crate) struct Prices {
    price: Option<Feed>,
    carbon: Option<Feed>,
    prefs: Arc<Preferences>,
    clock: Arc<dyn Clock>,
    pace: FeedPace,
    view: Arc<PricesView>,
    /// The view is built again at this Unix time (the slot in force ends), or at a change.
    view_until: f64,
}

/// What a sample's look at the feeds gave.
pub(crate) struct Observed {
    /// Answers for the ledger to keep.
    pub keep: Vec<FeedSlots>,
    /// What the meter prices with from now on, where it changed.
    pub pricing: Option<Pricing>,
}

impl Prices {
    /// The feeds `prefs` names, starting from the slots `restore` gives for a feed's key.
    pub fn new(
        prefs: Arc<Preferences>,
        clock: Arc<dyn Clock>,
        pace: FeedPace,
        restore: &mut dyn FnMut(&str, Quantity) -> Option<Series>,
    ) -> Prices {
        let mut p = Prices {
            price: None,
            carbon: None,
            prefs: Arc::clone(&prefs),
            clock,
            pace,
            view: Arc::default(),
            view_until: f64::NEG_INFINITY,
        };
        p.follow(&prefs, restore);
        p
    }

    /// Follows `prefs`' feeds: a feed that changed is fetched anew, from its own cache.
    pub fn follow(
        &mut self,
        prefs: &Arc<Preferences>,
        restore: &mut dyn FnMut(&str, Quantity) -> Option<Series>,
    ) {
        for carbon in [false, true] {
            let wanted = if carbon {
                &prefs.carbon_feed
            } else {
                &prefs.price_feed
            };
            let slot = if carbon {
                &mut self.carbon
            } else {
                &mut self.price
            };
            if slot.as_ref().map(|f| &f.pref) == wanted.as_ref() {
                continue;
            }
            *slot = wanted.as_ref().map(|pref| {
                let key = pref.key();
                let quantity = if carbon {
                    Quantity::GramsPerKwh
                } else {
                    Quantity::PricePerKwh
                };
                Feed {
                    kept: restore(&key, quantity),
                    key,
                    carbon,
                    fetcher: Fetcher::spawn(
                        pref.clone(),
                        carbon,
                        Arc::clone(&self.clock),
                        self.pace,
                    ),
                    pref: pref.clone(),
                    fetched_unix: None,
                    error: None,
                }
            });
        }
        self.prefs = Arc::clone(prefs);
        self.view_until = f64::NEG_INFINITY;
    }

    /// Takes the answers that came since the last sample, at `now_unix`.
    pub fn observe(&mut self, now_unix: f64) -> Observed {
        let mut keep = Vec::new();
        let mut changed = false;
        for feed in [self.price.as_mut(), self.carbon.as_mut()]
            .into_iter()
            .flatten()
        {
            while let Ok(f) = feed.fetcher.rx.try_recv() {
                self.view_until = f64::NEG_INFINITY;
                match f.result {
                    Ok(answer) if !answer.slots.is_empty() => {
                        // Slots from a day back to a week ahead, of prices a grid has: what a
                        // feed says beyond is not kept, whatever it sends.
                        let (series, refused) = answer
                            .within(
                                f.at_unix - KEPT_BACK_SECONDS,
                                f.at_unix + KEPT_AHEAD_SECONDS,
                            )
                            .plausible();
                        if refused > 0 {
                            tracing::warn!(feed = %feed.key, refused, "slots of no grid's price left out");
                        }
                        if series.slots.is_empty() {
                            feed.error = Some(format!(
                                "none of the {} slots it gave is within a week or a plausible \
                                 value",
                                answer.slots.len()
                            ));
                            continue;
                        }
                        let merged = match &feed.kept {
                            Some(k) => k.merged(&series),
                            None => series.clone(),
                        };
                        feed.kept = Some(merged.since(f.at_unix - KEPT_BACK_SECONDS));
                        feed.fetched_unix = Some(f.at_unix);
                        feed.error = None;
                        keep.push(FeedSlots {
                            feed: feed.key.clone(),
                            series,
                            fetched_unix: f.at_unix,
                        });
                        changed = true;
                    }
                    Ok(_) => {
                        feed.error = Some("the feed answered with no slots".into());
                    }
                    Err(e) => {
                        if feed.error.as_ref() != Some(&e) {
                            tracing::warn!(feed = %feed.key, "the feed gave nothing: {e}");
                        }
                        feed.error = Some(e);
                    }
                }
            }
        }
        if now_unix >= self.view_until {
            self.rebuild_view(now_unix);
        }
        Observed {
            keep,
            pricing: changed.then(|| self.pricing()),
        }
    }

    /// The price feed's retail slots where they are in the preferences' currency; none (an
    /// empty series: the fallback prices, flagged) before any is known or in another currency;
    /// `None` without a price feed.
    fn usable_prices(&self) -> Option<Series> {
        let feed = self.price.as_ref()?;
        let none = || Series {
            quantity: Quantity::PricePerKwh,
            currency: None,
            slots: Vec::new(),
        };
        let ours = self.prefs.currency.as_str();
        Some(match feed.priced() {
            Some(s) if s.currency.as_deref().is_none_or(|c| c == ours) => s,
            _ => none(),
        })
    }

    /// What the meter prices with: the feeds' slots over the preferences' tariffs and fixed
    /// intensity.
    pub fn pricing(&self) -> Pricing {
        let tariffs = self
            .prefs
            .tariff_schedule()
            .unwrap_or_else(|_| wattbar_core::Tariffs::flat(self.prefs.price_per_kwh));
        Pricing {
            feed: self.usable_prices(),
            carbon: self.carbon.as_ref().and_then(Feed::priced),
            ..Pricing::fixed(tariffs, self.prefs.carbon_g_per_kwh)
        }
    }

    fn rebuild_view(&mut self, now_unix: f64) {
        if self.price.is_none() && self.carbon.is_none() {
            // Nothing moves without a feed: built once, until the preferences name one.
            self.view = Arc::default();
            self.view_until = f64::INFINITY;
            return;
        }
        let usable = self.usable_prices();
        let mut price = self
            .price
            .as_ref()
            .map(|f| f.view(now_unix, usable.as_ref()));
        if let Some(v) = price.as_mut() {
            let refused = usable.as_ref().is_some_and(|u| u.slots.is_empty());
            if refused && v.error.is_none() {
                let theirs = v.currency.clone();
                if let Some(c) = theirs.filter(|c| c != self.prefs.currency.as_str()) {
                    v.error = Some(format!(
                        "the feed's prices are in {c}, the preferences' currency is {}: set the \
                         currency to {c} to price by them",
                        self.prefs.currency
                    ));
                }
            }
        }
        let carbon_series = self.carbon.as_ref().and_then(Feed::priced);
        let carbon = self
            .carbon
            .as_ref()
            .map(|f| f.view(now_unix, carbon_series.as_ref()));
        // Built again when the slot in force ends, or in a minute where none is.
        let ends = [usable.as_ref(), carbon_series.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|s| {
                s.slots.iter().find(|sl| sl.end > now_unix).map(|sl| {
                    if sl.start > now_unix {
                        sl.start
                    } else {
                        sl.end
                    }
                })
            })
            .fold(now_unix + 60.0, f64::min);
        self.view_until = ends;
        self.view = Arc::new(PricesView { price, carbon });
    }

    pub fn view(&self) -> Arc<PricesView> {
        Arc::clone(&self.view)
    }
}
