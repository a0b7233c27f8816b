//! A graded run in the Intelligence-per-Watt profiler's terms, and more.
//!
//! Rules:
//! - accuracy = correct ÷ (correct + incorrect); unevaluated queries are left out of it and of
//!   every per-query mean of energy and power below (IPW's rule). The latencies' median and p90
//!   are over every query that reported them: a latency does not depend on the grade.
//! - `intelligence_per_joule` = accuracy ÷ the mean energy per evaluated query;
//!   `intelligence_per_watt` = accuracy ÷ their mean power.
//! - Joules per correct answer = the evaluated queries' energy ÷ the correct ones.
//! - Each figure that cannot be computed is `None` with its reason in `why` (no correct answer:
//!   no joules per correct answer, never infinite or 0). Net figures stand beside gross ones; a
//!   net energy within [`NET_FLOOR`] of zero (the queries drew about what the idle machine did)
//!   divides nothing.

use super::Verdict;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the summary needs of one query.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub verdict: Option<Verdict>,
    pub energy_joules: Option<f64>,
    pub net_energy_joules: Option<f64>,
    /// Its energy over its own wall time.
    pub mean_watts: Option<f64>,
    pub ttft_seconds: Option<f64>,
    /// Inter-token latency: the time after the first token over the tokens after it.
    pub itl_seconds: Option<f64>,
}

/// The run's figures; `why` names each `None` figure's reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub accuracy: Option<f64>,
    pub correct: usize,
    pub incorrect: usize,
    pub unevaluated: usize,
    pub intelligence_per_joule: Option<f64>,
    pub intelligence_per_watt: Option<f64>,
    pub avg_per_query_energy_joules: Option<f64>,
    pub avg_per_query_power_watts: Option<f64>,
    pub joules_per_correct_answer: Option<f64>,
    pub net_intelligence_per_joule: Option<f64>,
    pub avg_per_query_net_energy_joules: Option<f64>,
    pub net_joules_per_correct_answer: Option<f64>,
    pub wh_per_1000_queries: Option<f64>,
    pub ttft_seconds_median: Option<f64>,
    pub ttft_seconds_p90: Option<f64>,
    pub itl_seconds_median: Option<f64>,
    pub itl_seconds_p90: Option<f64>,
    /// Queries whose energy was measured, of the evaluated ones.
    pub measured_queries: usize,
    pub why: BTreeMap<&'static str, String>,
}

/// The share of the gross energy a net energy must reach to be divided by.
pub const NET_FLOOR: f64 = 0.01;

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The `p`-th percentile (0–1) by nearest rank: a value some query had.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p * v.len() as f64).ceil().max(1.0) as usize;
    v.get(rank.min(v.len()) - 1).copied()
}

/// The summary of `queries`.
pub fn summarise(queries: &[Query]) -> Summary {
    let count = |v: Verdict| queries.iter().filter(|q| q.verdict == Some(v)).count();
    let (correct, incorrect) = (count(Verdict::Correct), count(Verdict::Incorrect));
    let unevaluated = queries.len() - correct - incorrect;
    let evaluated: Vec<&Query> = queries
        .iter()
        .filter(|q| matches!(q.verdict, Some(Verdict::Correct | Verdict::Incorrect)))
        .collect();
    let mut why = BTreeMap::new();
    let accuracy = (correct + incorrect > 0).then(|| correct as f64 / (correct + incorrect) as f64);
    if accuracy.is_none() {
        why.insert("accuracy", "no query was evaluated".to_string());
    }
    // Energy over the evaluated queries that were measured, all of them or none: a mean over
    // part of them would stand for a different set than the accuracy.
    let energies: Vec<f64> = evaluated.iter().filter_map(|q| q.energy_joules).collect();
    let measured = energies.len();
    let whole = measured > 0 && measured == evaluated.len();
    if !whole && !evaluated.is_empty() {
        why.insert(
            "avg_per_query_energy_joules",
            format!(
                "{} of {} evaluated queries were measured",
                measured,
                evaluated.len()
            ),
        );
    }
    let avg_energy = mean(&energies).filter(|_| whole);
    let nets: Vec<f64> = evaluated
        .iter()
        .filter_map(|q| q.net_energy_joules)
        .collect();
    let avg_net = mean(&nets).filter(|_| whole && nets.len() == measured);
    if avg_net.is_none() && whole {
        why.insert(
            "avg_per_query_net_energy_joules",
            "no idle baseline was measured".into(),
        );
    }
    // Divided by only where clearly above zero.
    let net_divisor = avg_net.filter(|n| avg_energy.is_some_and(|g| *n > NET_FLOOR * g));
    if avg_net.is_some() && net_divisor.is_none() {
        why.insert(
            "net_intelligence_per_joule",
            "the queries drew about what the idle machine did: their net energy is within 1 % \
             of zero"
                .into(),
        );
    }
    let watts: Vec<f64> = evaluated.iter().filter_map(|q| q.mean_watts).collect();
    let avg_watts = mean(&watts).filter(|_| whole && watts.len() == measured);
    if accuracy.is_some() && avg_energy.is_none() {
        why.insert(
            "intelligence_per_joule",
            "the evaluated queries' energy is not all known".into(),
        );
    }
    if accuracy.is_some() && avg_watts.is_none() {
        why.insert(
            "intelligence_per_watt",
            "the evaluated queries' power is not all known".into(),
        );
    }
    let per = |a: Option<f64>, d: Option<f64>| match (a, d) {
        (Some(a), Some(d)) if d > 0.0 => Some(a / d),
        _ => None,
    };
    let per_correct =
        |total: Option<f64>, key: &'static str, unknown: &str, why: &mut BTreeMap<_, _>| {
            if correct == 0 && accuracy.is_some() {
                why.insert(key, "no answer was correct".to_string());
                return None;
            }
            if total.is_none() && accuracy.is_some() {
                why.insert(key, "the energy per query is not known".to_string());
            }
            if total.is_none() && accuracy.is_some() {
                why.insert(key, unknown.to_string());
            }
            total.map(|t| t * evaluated.len() as f64 / correct as f64)
        };
    let joules_per_correct_answer = per_correct(
        avg_energy,
        "joules_per_correct_answer",
        "the evaluated queries' energy is not all known",
        &mut why,
    );
    let net_joules_per_correct_answer = per_correct(
        net_divisor,
        "net_joules_per_correct_answer",
        "no net energy clearly above zero is known",
        &mut why,
    );
    let ttft: Vec<f64> = queries.iter().filter_map(|q| q.ttft_seconds).collect();
    let itl: Vec<f64> = queries.iter().filter_map(|q| q.itl_seconds).collect();
    if ttft.is_empty() {
        why.insert(
            "ttft_seconds_median",
            "no query said when its first token came".into(),
        );
    }
    if itl.is_empty() {
        why.insert(
            "itl_seconds_median",
            "no query made two tokens or more with a first-token time".into(),
        );
    }
    Summary {
        accuracy,
        correct,
        incorrect,
        unevaluated,
        intelligence_per_joule: per(accuracy, avg_energy),
        intelligence_per_watt: per(accuracy, avg_watts),
        avg_per_query_energy_joules: avg_energy,
        avg_per_query_power_watts: avg_watts,
        joules_per_correct_answer,
        net_intelligence_per_joule: per(accuracy, net_divisor),
        avg_per_query_net_energy_joules: avg_net,
        net_joules_per_correct_answer,
        wh_per_1000_queries: avg_energy.map(|j| j * 1000.0 / 3600.0),
        ttft_seconds_median: percentile(&ttft, 0.5),
        ttft_seconds_p90: percentile(&ttft, 0.9),
        itl_seconds_median: percentile(&itl, 0.5),
        itl_seconds_p90: percentile(&itl, 0.9),
        measured_queries: measured,
        why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(verdict: Verdict, joules: f64, seconds: f64) -> Query {
        Query {
            verdict: Some(verdict),
            energy_joules: Some(joules),
            net_energy_joules: Some(joules - 20.0 * seconds),
            mean_watts: Some(joules / seconds),
            ttft_seconds: Some(seconds / 10.0),
            itl_seconds: Some(seconds / 100.0),
        }
    }

    #[test]
    fn three_of_four_right_at_100_j_each_is_0_0075_per_joule_and_133_j_per_correct_answer() {
        use Verdict::*;
        // Four evaluated queries of 100 J over 2 s (50 W), one unevaluated of 1,000 J that
        // counts in nothing; an idle draw of 20 W: 60 J net each.
        let mut queries = vec![
            q(Correct, 100.0, 2.0),
            q(Correct, 100.0, 2.0),
            q(Incorrect, 100.0, 2.0),
            q(Correct, 100.0, 2.0),
        ];
        queries.push(Query {
            verdict: Some(Unevaluated),
            ..q(Correct, 1000.0, 2.0)
        });
        let s = summarise(&queries);
        assert_eq!((s.correct, s.incorrect, s.unevaluated), (3, 1, 1));
        assert_eq!(s.accuracy, Some(0.75));
        assert_eq!(s.avg_per_query_energy_joules, Some(100.0));
        // 0.75 ÷ 100 J; 0.75 ÷ 50 W.
        assert_eq!(s.intelligence_per_joule, Some(0.0075));
        assert_eq!(s.intelligence_per_watt, Some(0.015));
        // 400 J for 3 correct answers; 240 J net.
        assert!((s.joules_per_correct_answer.unwrap_or(0.0) - 400.0 / 3.0).abs() < 1e-9);
        assert!((s.net_joules_per_correct_answer.unwrap_or(0.0) - 80.0).abs() < 1e-9);
        assert_eq!(s.net_intelligence_per_joule, Some(0.0125));
        // 100 J a query: 1,000 queries are 100 kJ = 27.8 Wh.
        assert!((s.wh_per_1000_queries.unwrap_or(0.0) - 27.777_777_777_8).abs() < 1e-6);
        assert_eq!(s.why, BTreeMap::new());
    }

    #[test]
    fn no_correct_answer_has_no_joules_per_correct_answer_and_says_why() {
        let s = summarise(&[q(Verdict::Incorrect, 100.0, 1.0)]);
        assert_eq!(s.accuracy, Some(0.0));
        assert_eq!(s.intelligence_per_joule, Some(0.0));
        assert_eq!(s.joules_per_correct_answer, None);
        assert_eq!(s.why["joules_per_correct_answer"], "no answer was correct");
        let none = summarise(&[Query::default()]);
        assert_eq!((none.accuracy, none.unevaluated), (None, 1));
        assert_eq!(none.why["accuracy"], "no query was evaluated");
    }

    #[test]
    fn a_query_left_unmeasured_leaves_the_means_unknown_rather_than_partial() {
        let mut lost = q(Verdict::Correct, 100.0, 1.0);
        lost.energy_joules = None;
        let s = summarise(&[q(Verdict::Correct, 100.0, 1.0), lost]);
        assert_eq!(s.accuracy, Some(1.0));
        assert_eq!(s.avg_per_query_energy_joules, None);
        assert_eq!(s.intelligence_per_joule, None);
        assert_eq!(
            s.why["avg_per_query_energy_joules"],
            "1 of 2 evaluated queries were measured"
        );
    }

    #[test]
    fn a_net_energy_about_zero_divides_nothing_and_says_why() {
        // 100 J over 1 s at an idle draw of 100 W: nothing above idle.
        let mut flat = q(Verdict::Correct, 100.0, 1.0);
        flat.net_energy_joules = Some(1e-12);
        let s = summarise(&[flat]);
        assert_eq!(s.avg_per_query_net_energy_joules, Some(1e-12));
        assert_eq!(s.net_intelligence_per_joule, None);
        assert_eq!(s.net_joules_per_correct_answer, None);
        assert!(s.why["net_intelligence_per_joule"].contains("within 1 % of zero"));
        assert_eq!(s.intelligence_per_joule, Some(0.01));
    }

    #[test]
    fn percentiles_are_values_some_query_had() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(5.0));
        assert_eq!(percentile(&v, 0.9), Some(9.0));
        assert_eq!(percentile(&[3.0], 0.9), Some(3.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
