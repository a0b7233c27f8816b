//! The energy records already hold, so that records settled at different times never hold more
//! than was drawn.
//!
//! Rule: a record keeps what it was given when it was settled (a receipt or an answer once
//! returned never changes). Each piece of the timeline (a sampling interval cut at every window's
//! start, first token and end) has its energy; records settled earlier hold part of it, and what
//! is left is shared equally by the requests settled now and those still in flight, which will
//! settle later. Requests that overlap and are settled together or while the others are in
//! flight get equal shares; a record posted late for a span that earlier records already took
//! gets only what they left, and says how much of its window was held before and by how many
//! records it was shared.
//!
//! Claims are held watts over spans of the elapsed timeline, each inside one sampling interval,
//! where the power is taken as constant.

/// Watts held over `start..end`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Claim {
    start: f64,
    end: f64,
    watts: f64,
}

/// What records hold, by span.
#[derive(Debug, Clone, Default)]
pub struct Claims {
    /// By start.
    spans: Vec<Claim>,
    /// The longest span held: a span that ends after `a` starts at most this long before it.
    longest: f64,
}

impl Claims {
    /// The mean watts held over `a..b`.
    pub fn held_watts(&self, a: f64, b: f64) -> f64 {
        // Also NaN: nothing is held over no span.
        if b.partial_cmp(&a) != Some(std::cmp::Ordering::Greater) {
            return 0.0;
        }
        let from = self.spans.partition_point(|c| c.start < a - self.longest);
        self.spans[from..]
            .iter()
            .take_while(|c| c.start < b)
            .filter(|c| c.end > a)
            .map(|c| c.watts * (c.end.min(b) - c.start.max(a)) / (b - a))
            .sum()
    }

    /// Records hold `watts` more over `a..b`.
    pub fn hold(&mut self, a: f64, b: f64, watts: f64) {
        let span = b.partial_cmp(&a) == Some(std::cmp::Ordering::Greater);
        if !span || watts <= 0.0 || !watts.is_finite() {
            return;
        }
        let at = self.spans.partition_point(|c| c.start <= a);
        self.spans.insert(
            at,
            Claim {
                start: a,
                end: b,
                watts,
            },
        );
        self.longest = self.longest.max(b - a);
    }

    /// Forgets the spans that ended before `t`: no window settled from now on reaches back there.
    pub fn forget_before(&mut self, t: f64) {
        self.spans.retain(|c| c.end >= t);
        self.longest = self
            .spans
            .iter()
            .map(|c| c.end - c.start)
            .fold(0.0, f64::max);
    }

    /// Spans held.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_watts_are_the_mean_over_the_span_asked() {
        let mut c = Claims::default();
        c.hold(0.0, 1.0, 30.0);
        c.hold(1.0, 2.0, 10.0);
        c.hold(0.5, 1.0, 20.0);
        assert_eq!(c.held_watts(0.0, 0.5), 30.0);
        assert_eq!(c.held_watts(0.5, 1.0), 50.0);
        // Half at 30 + 20 (0.5–1), half at 10: 30 W.
        assert_eq!(c.held_watts(0.5, 1.5), 30.0);
        assert_eq!(c.held_watts(2.0, 3.0), 0.0);
        c.forget_before(1.5);
        assert_eq!((c.len(), c.held_watts(0.5, 1.0)), (1, 0.0));
        assert_eq!(c.held_watts(1.0, 2.0), 10.0);
    }
}
