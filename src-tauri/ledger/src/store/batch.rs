//! What one batch adds to each rollup row: the rows summed per minute, hour, day, month and
//! domain first, so that a batch writes each rollup row once, not once per sample.

use super::{local_day_month, scopes, Row, Step};
use std::collections::BTreeMap;

/// One minute's or hour's share of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bucket {
    /// Samples with a headline.
    pub n: i64,
    pub sum_watts: f64,
    pub max_watts: Option<f64>,
    pub joules: f64,
}

/// A batch's sums, keyed as the rollup tables are (scopes as stored, [`scopes::to_text`]).
#[derive(Debug, Default, PartialEq)]
pub struct BatchSums {
    /// (minute, scope) → its share; likewise per hour.
    pub minutes: BTreeMap<(i64, &'static str), Bucket>,
    pub hours: BTreeMap<(i64, &'static str), Bucket>,
    /// (minute, breakdown domain) → (joules, seconds metered); likewise per hour.
    pub domain_minutes: BTreeMap<(i64, String), (f64, f64)>,
    pub domain_hours: BTreeMap<(i64, String), (f64, f64)>,
    /// Positive joules per breakdown domain.
    pub lifetime: BTreeMap<String, f64>,
    /// Positive joules of the headline per scope.
    pub headline: BTreeMap<&'static str, f64>,
    /// (day, scope, currency) → (joules, cost).
    pub daily: BTreeMap<(String, &'static str, String), (f64, f64)>,
    /// (month, scope, currency) → (joules, cost).
    pub monthly: BTreeMap<(String, &'static str, String), (f64, f64)>,
}

impl BatchSums {
    pub fn of(rows: &[Row]) -> BatchSums {
        let mut sums = BatchSums::default();
        for row in rows {
            let scope = scopes::to_text(row.scope);
            for (step, buckets) in [
                (Step::Minute, &mut sums.minutes),
                (Step::Hour, &mut sums.hours),
            ] {
                let key = (row.t.floor() as i64).div_euclid(step.seconds()) * step.seconds();
                let b = buckets.entry((key, scope)).or_default();
                if let Some(w) = row.watts {
                    b.n += 1;
                    b.sum_watts += w;
                    b.max_watts = Some(b.max_watts.map_or(w, |m| m.max(w)));
                }
                b.joules += row.joules;
            }
            for (step, buckets) in [
                (Step::Minute, &mut sums.domain_minutes),
                (Step::Hour, &mut sums.domain_hours),
            ] {
                let key = (row.t.floor() as i64).div_euclid(step.seconds()) * step.seconds();
                for (domain, joules) in row.by_domain.iter().filter(|(d, _)| d != "system") {
                    let e = buckets.entry((key, domain.clone())).or_default();
                    e.0 += joules;
                    e.1 += row.seconds;
                }
            }
            if row.joules > 0.0 {
                *sums.headline.entry(scope).or_default() += row.joules;
            }
            let domains = row.by_domain.iter().filter(|(d, _)| d != "system");
            for (domain, joules) in domains.filter(|(_, j)| *j > 0.0) {
                *sums.lifetime.entry(domain.to_string()).or_default() += joules;
            }
            let (day, month) = local_day_month(row.t);
            for (table, period) in [(&mut sums.daily, day), (&mut sums.monthly, month)] {
                let e = table
                    .entry((period, scope, row.currency.clone()))
                    .or_default();
                e.0 += row.joules;
                e.1 += row.cost;
            }
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, watts: Option<f64>, joules: f64) -> Row {
        Row {
            t,
            watts,
            joules,
            cost: joules / 3.6e6 * 0.30,
            by_domain: vec![("cpu".into(), joules / 2.0), ("system".into(), joules)],
            seconds: 1.0,
            start: None,
            currency: "EUR".into(),
            scope: Some(wattbar_core::Scope::Components),
            quality: None,
            method: None,
            answered: None,
            slots: Vec::new(),
        }
    }

    #[test]
    fn a_batch_across_a_minute_boundary_fills_both_minutes() {
        // 100 W at 58, 59 and 60 s, then a sample with no headline at 61 s.
        let rows = [
            row(58.0, Some(100.0), 100.0),
            row(59.0, Some(120.0), 110.0),
            row(60.0, Some(90.0), 105.0),
            row(61.0, None, 0.0),
        ];
        let sums = BatchSums::of(&rows);
        let first = Bucket {
            n: 2,
            sum_watts: 220.0,
            max_watts: Some(120.0),
            joules: 210.0,
        };
        let second = Bucket {
            n: 1,
            sum_watts: 90.0,
            max_watts: Some(90.0),
            joules: 105.0,
        };
        assert_eq!(sums.minutes.get(&(0, "components")), Some(&first));
        assert_eq!(sums.minutes.get(&(60, "components")), Some(&second));
        assert_eq!(sums.hours.len(), 1);
        assert_eq!(
            sums.hours.get(&(0, "components")).map(|b| (b.n, b.joules)),
            Some((3, 315.0))
        );
        // The headline counts once, in its scope; the breakdown's `system` is not added to it.
        assert_eq!(sums.headline.get("components"), Some(&315.0));
        assert_eq!(sums.lifetime.get("system"), None);
        assert_eq!(sums.lifetime.get("cpu"), Some(&157.5));
        let day: f64 = sums.daily.values().map(|(j, _)| j).sum();
        assert_eq!(day, 315.0);
        // cpu per minute: its own energy and the seconds it was metered (one per row here),
        // so 58–59 s: 105 J over 2 s; 60–61 s: 52.5 J over 2 s. `system` is not a domain row.
        assert_eq!(
            sums.domain_minutes.get(&(0, "cpu".into())),
            Some(&(105.0, 2.0))
        );
        assert_eq!(
            sums.domain_minutes.get(&(60, "cpu".into())),
            Some(&(52.5, 2.0))
        );
        assert!(!sums.domain_minutes.keys().any(|(_, d)| d == "system"));
    }

    #[test]
    fn a_minute_with_no_headline_keeps_no_maximum() {
        let sums = BatchSums::of(&[row(120.0, None, 0.0), row(121.0, None, 0.0)]);
        assert_eq!(
            sums.minutes.get(&(120, "components")),
            Some(&Bucket {
                n: 0,
                sum_watts: 0.0,
                max_watts: None,
                joules: 0.0
            })
        );
        assert!(sums.lifetime.is_empty() && sums.headline.is_empty());
    }
}
