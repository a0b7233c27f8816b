//! One key's energy spent in its window, and the holds of its requests in flight.

use super::allowance::Period;
use serde::Serialize;
use std::collections::HashMap;

/// A request's hold on its key's budget. Not `Clone`: it is settled or released once.
#[derive(Debug, PartialEq)]
pub struct Hold {
    id: u64,
    joules: f64,
}

impl Hold {
    pub fn joules(&self) -> f64 {
        self.joules
    }
}

/// Why a request was refused: what its 429 says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exceeded {
    pub budget_joules: f64,
    /// Settled in this window.
    pub spent_joules: f64,
    /// Held by requests in flight.
    pub held_joules: f64,
    /// What this request would have held.
    pub asked_joules: f64,
    /// When the window ends, Unix seconds.
    pub resets_at: f64,
}

/// Where a key stands now.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Status {
    pub budget_joules: f64,
    pub spent_joules: f64,
    pub held_joules: f64,
    /// Budget less spent and held, never below 0.
    pub remaining_joules: f64,
    pub window_start: f64,
    pub resets_at: f64,
}

impl Status {
    /// The IETF ratelimit-headers draft's `RateLimit-Policy` and `RateLimit` fields, in joules
    /// (whole ones, as its integers are): the quota and window, then what remains and the
    /// seconds until the window resets, as of `now`.
    pub fn headers(&self, now: f64) -> [(&'static str, String); 2] {
        let whole = |x: f64| {
            if x.is_finite() {
                x.max(0.0).floor() as u64
            } else {
                0
            }
        };
        [
            (
                "RateLimit-Policy",
                format!(
                    "\"energy\";q={};w={};qu=\"joules\"",
                    whole(self.budget_joules),
                    whole(self.resets_at - self.window_start)
                ),
            ),
            (
                "RateLimit",
                format!(
                    "\"energy\";r={};t={}",
                    whole(self.remaining_joules),
                    whole((self.resets_at - now).ceil())
                ),
            ),
        ]
    }
}

/// A key's account: its budget, the window now, what was settled in it and what is held.
#[derive(Debug)]
pub struct Account {
    budget_joules: f64,
    period: Period,
    window: (f64, f64),
    spent: f64,
    held: HashMap<u64, f64>,
    next: u64,
}

impl Account {
    /// An account at `now`, starting its window from `committed` joules (what the ledger holds
    /// for this key in the window, after a restart); `None` where `now` has no window.
    pub fn new(budget_joules: f64, period: Period, committed: f64, now: f64) -> Option<Account> {
        Some(Account {
            budget_joules,
            period,
            window: period.window(now)?,
            spent: if committed.is_finite() {
                committed.max(0.0)
            } else {
                0.0
            },
            held: HashMap::new(),
            next: 0,
        })
    }

    /// Moves to the window holding `now` once the current one has ended. A clock that jumps
    /// back keeps the window it has: spend never grows back.
    fn roll(&mut self, now: f64) {
        if now >= self.window.1 {
            if let Some(w) = self.period.window(now) {
                self.window = w;
                self.spent = 0.0;
            }
        }
    }

    fn held(&self) -> f64 {
        // An empty f64 sum is -0.0; a status says 0.
        self.held.values().sum::<f64>() + 0.0
    }

    /// Holds `joules` for a request at `now`, or says why it may not go.
    pub fn hold(&mut self, joules: f64, now: f64) -> Result<Hold, Exceeded> {
        self.roll(now);
        let held = self.held();
        let joules = if joules.is_finite() {
            joules.max(0.0)
        } else {
            f64::INFINITY
        };
        if self.spent + held + joules > self.budget_joules {
            return Err(Exceeded {
                budget_joules: self.budget_joules,
                spent_joules: self.spent,
                held_joules: held,
                asked_joules: joules,
                resets_at: self.window.1,
            });
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.held.insert(id, joules);
        Ok(Hold { id, joules })
    }

    /// Swaps `hold` for the `measured` joules, counted in the window holding `now`. A
    /// measurement that is not a number counts the hold itself: unknown is not free.
    pub fn settle(&mut self, hold: Hold, measured: f64, now: f64) {
        self.roll(now);
        self.held.remove(&hold.id);
        self.spent += if measured.is_finite() {
            measured.max(0.0)
        } else {
            hold.joules
        };
    }

    /// Gives `hold` back: the request never reached the model.
    pub fn release(&mut self, hold: Hold) {
        self.held.remove(&hold.id);
    }

    pub fn status(&mut self, now: f64) -> Status {
        self.roll(now);
        let held = self.held();
        Status {
            budget_joules: self.budget_joules,
            spent_joules: self.spent,
            held_joules: held,
            remaining_joules: (self.budget_joules - self.spent - held).max(0.0),
            window_start: self.window.0,
            resets_at: self.window.1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saturday 2026-12-05 17:30 UTC, and the next midnight.
    const NOW: f64 = 1_796_491_800.0;
    const MIDNIGHT: f64 = 1_796_515_200.0;

    fn account(budget: f64) -> Account {
        Account::new(budget, Period::Day, 0.0, NOW).unwrap_or_else(|| panic!("no window"))
    }

    #[test]
    fn holds_in_flight_count_so_concurrent_requests_cannot_cross_the_budget() {
        // 1 kJ a day, 300 J a request: three go, the fourth (1,200 J) is refused while they run.
        let mut a = account(1000.0);
        let holds: Vec<Hold> = (0..3)
            .map(|_| a.hold(300.0, NOW).unwrap_or_else(|e| panic!("{e:?}")))
            .collect();
        let refused = a
            .hold(300.0, NOW)
            .err()
            .unwrap_or_else(|| panic!("admitted"));
        assert_eq!(refused.held_joules, 900.0);
        assert_eq!(refused.resets_at, MIDNIGHT);
        // Each spent 120 J of its 300: 640 J remain, enough for two more.
        for h in holds {
            a.settle(h, 120.0, NOW + 10.0);
        }
        let s = a.status(NOW + 10.0);
        assert_eq!(
            (s.spent_joules, s.held_joules, s.remaining_joules),
            (360.0, 0.0, 640.0)
        );
        assert!(a.hold(300.0, NOW + 11.0).is_ok() && a.hold(300.0, NOW + 11.0).is_ok());
        assert!(a.hold(300.0, NOW + 11.0).is_err());
    }

    #[test]
    fn a_released_hold_is_given_back_and_an_unmeasured_one_costs_its_hold() {
        let mut a = account(1000.0);
        let h = a.hold(600.0, NOW).unwrap_or_else(|e| panic!("{e:?}"));
        a.release(h);
        assert_eq!(a.status(NOW).remaining_joules, 1000.0);
        let h = a.hold(600.0, NOW).unwrap_or_else(|e| panic!("{e:?}"));
        a.settle(h, f64::NAN, NOW);
        assert_eq!(a.status(NOW).spent_joules, 600.0);
        // A hold that is not a number is refused, never let through.
        assert!(a.hold(f64::NAN, NOW).is_err());
    }

    #[test]
    fn the_window_resets_at_utc_midnight_and_never_when_the_clock_goes_back() {
        let mut a = Account::new(1000.0, Period::Day, 700.0, NOW).unwrap_or_else(|| panic!());
        assert_eq!(
            a.status(NOW).spent_joules,
            700.0,
            "what the ledger committed today"
        );
        assert!(a.hold(400.0, NOW).is_err());
        // An hour back: the same window, still 700 J spent.
        assert_eq!(a.status(NOW - 3600.0).spent_joules, 700.0);
        // At midnight the new day starts empty.
        let s = a.status(MIDNIGHT);
        assert_eq!(
            (s.spent_joules, s.window_start, s.resets_at),
            (0.0, MIDNIGHT, MIDNIGHT + 86_400.0)
        );
        assert!(a.hold(400.0, MIDNIGHT).is_ok());
    }

    #[test]
    fn the_ratelimit_headers_say_the_quota_what_remains_and_when_it_resets() {
        let mut a = account(50_000.0);
        let h = a.hold(1_234.5, NOW).unwrap_or_else(|e| panic!("{e:?}"));
        a.settle(h, 1_234.5, NOW);
        // 50,000 − 1,234.5 = 48,765.5 J left; 17:30 to midnight is 23,400 s.
        let [policy, limit] = a.status(NOW).headers(NOW);
        assert_eq!(
            policy,
            (
                "RateLimit-Policy",
                "\"energy\";q=50000;w=86400;qu=\"joules\"".into()
            )
        );
        assert_eq!(limit, ("RateLimit", "\"energy\";r=48765;t=23400".into()));
    }
}
