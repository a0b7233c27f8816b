//! Keys the inference proxy issues, and what each may spend: energy (or money) per fixed UTC
//! window, held before a request is forwarded and settled with what it measured.
//!
//! Rules:
//! - A budget is an [`Allowance`]: joules or money per UTC day, ISO week (from Monday 00:00
//!   UTC) or calendar month (from the 1st, 00:00 UTC), as OpenRouter's key limits are. Windows
//!   are fixed, not sliding: a key knows when it resets.
//! - Before a request is forwarded, a [`Hold`] is taken on its key's [`Account`]: the model's J
//!   per completion token × the request's token cap, plus J per prompt token × its prompt
//!   tokens ([`Rates::hold_joules`]). A request is let through only when spent + every hold +
//!   its own fit the budget: under any concurrency the budget is overshot by no more than
//!   what measured joules exceed their holds.
//! - At settle the hold is swapped for the measured joules; a request that never reached the
//!   model gives its hold back. Spend within a window never goes down: a clock that jumps back
//!   keeps the window it had, and a restarted engine starts the window from what the ledger
//!   committed for it.

pub mod account;
pub mod allowance;

pub use account::{Account, Exceeded, Hold, Status};
pub use allowance::{Allowance, Amount, Period};

/// J per completion token held for a model Wattbar has not measured yet. Chosen high on
/// purpose: a hold too large is given back at settle, one too small lets a budget be overshot.
pub const DEFAULT_J_PER_COMPLETION_TOKEN: f64 = 2.0;
/// J per prompt token for such a model: prefill runs tokens in parallel, a tenth of the above.
pub const DEFAULT_J_PER_PROMPT_TOKEN: f64 = 0.2;
/// The token cap held for where a request sets none and the model's context is unknown.
pub const DEFAULT_TOKEN_CAP: u64 = 4096;

/// What one model's tokens cost, joules each, and whether that was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub j_per_prompt_token: f64,
    pub j_per_completion_token: f64,
    /// `false`: the defaults above, for a model with no ledger row yet.
    pub measured: bool,
}

impl Rates {
    /// The model's measured rates where both are finite and positive, else the defaults.
    pub fn of(j_per_prompt_token: Option<f64>, j_per_completion_token: Option<f64>) -> Rates {
        let ok = |x: Option<f64>| x.filter(|x| x.is_finite() && *x > 0.0);
        match (ok(j_per_prompt_token), ok(j_per_completion_token)) {
            (Some(p), Some(c)) => Rates {
                j_per_prompt_token: p,
                j_per_completion_token: c,
                measured: true,
            },
            // Completion alone measured (a server that counts no prompt): prompt at a tenth.
            (None, Some(c)) => Rates {
                j_per_prompt_token: c / 10.0,
                j_per_completion_token: c,
                measured: true,
            },
            _ => Rates {
                j_per_prompt_token: DEFAULT_J_PER_PROMPT_TOKEN,
                j_per_completion_token: DEFAULT_J_PER_COMPLETION_TOKEN,
                measured: false,
            },
        }
    }

    /// The joules held for a request of `prompt_tokens` that may generate up to `max_tokens`
    /// (else the model's `context`, else [`DEFAULT_TOKEN_CAP`]).
    pub fn hold_joules(
        &self,
        prompt_tokens: u64,
        max_tokens: Option<u64>,
        context: Option<u64>,
    ) -> f64 {
        let cap = max_tokens.or(context).unwrap_or(DEFAULT_TOKEN_CAP);
        self.j_per_completion_token * cap as f64 + self.j_per_prompt_token * prompt_tokens as f64
    }

    /// The largest token cap whose hold fits `remaining_joules` (the `clamp` mode's
    /// `max_tokens`); `None` where not even one token fits.
    pub fn clamp(&self, remaining_joules: f64, prompt_tokens: u64) -> Option<u64> {
        let left = remaining_joules - self.j_per_prompt_token * prompt_tokens as f64;
        let tokens = (left / self.j_per_completion_token).floor();
        (tokens.is_finite() && tokens >= 1.0).then(|| tokens.min(u64::MAX as f64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_the_token_cap_at_the_completion_rate_plus_the_prompt() {
        // 0.5 J a generated token, 0.05 J a prompt token: 200 prompt tokens and max_tokens 300
        // hold 300 × 0.5 + 200 × 0.05 = 160 J.
        let r = Rates::of(Some(0.05), Some(0.5));
        assert!(r.measured);
        assert!((r.hold_joules(200, Some(300), Some(8192)) - 160.0).abs() < 1e-9);
        // No max_tokens: the model's context of 8,192 tokens, 4,096 + 10 = 4,106 J.
        assert!((r.hold_joules(200, None, Some(8192)) - 4106.0).abs() < 1e-9);
        // Neither: 4,096 tokens.
        assert!((r.hold_joules(0, None, None) - 2048.0).abs() < 1e-9);
    }

    #[test]
    fn an_unmeasured_model_is_held_at_the_stated_defaults_and_bad_rates_count_as_none() {
        for (p, c) in [
            (None, None),
            (Some(0.1), Some(f64::NAN)),
            (Some(0.1), Some(0.0)),
        ] {
            let r = Rates::of(p, c);
            assert!(!r.measured, "{p:?} {c:?}");
            assert_eq!(r.j_per_completion_token, DEFAULT_J_PER_COMPLETION_TOKEN);
        }
        // 100 tokens at 2 J and 50 prompt tokens at 0.2 J: 210 J.
        assert!((Rates::of(None, None).hold_joules(50, Some(100), None) - 210.0).abs() < 1e-9);
        let only_completion = Rates::of(None, Some(1.0));
        assert!(only_completion.measured);
        assert_eq!(only_completion.j_per_prompt_token, 0.1);
    }

    #[test]
    fn clamp_gives_the_most_tokens_that_fit_and_none_when_not_one_does() {
        let r = Rates::of(Some(0.05), Some(0.5));
        // 100 J left, 200 prompt tokens (10 J): 90 J ÷ 0.5 = 180 tokens.
        assert_eq!(r.clamp(100.0, 200), Some(180));
        assert_eq!(r.clamp(10.4, 200), None, "0.4 J: less than one token");
        assert_eq!(r.clamp(f64::NAN, 0), None);
    }
}
