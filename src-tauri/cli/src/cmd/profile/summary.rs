//! A profile's summary: what `profile` writes to its JSON file and prints, from the records of
//! the prompts it asked.

use super::*;

/// The queries' energy drawn from the battery and its wear: `null` on a machine without one;
/// the wear `null` where any query's was not priced.
fn battery_totals(q: &[QueryRecord]) -> Value {
    let on: Vec<&crate::cmd::run::summary::BatteryFigure> =
        q.iter().filter_map(|r| r.battery.as_ref()).collect();
    if on.is_empty() {
        return Value::Null;
    }
    let joules: f64 = on.iter().map(|b| b.joules).sum();
    let energy: f64 = q.iter().filter_map(|r| r.energy_joules).sum();
    let wear: Option<f64> = on.iter().map(|b| b.wear).sum();
    json!({
        "joules": joules,
        "share_percent": (energy > 0.0).then(|| joules / energy * 100.0),
        "wear": wear,
        "currency": on[0].currency,
    })
}

pub(super) fn summary(
    o: &Options,
    q: &[QueryRecord],
    idle_watts: Option<f64>,
    measured: String,
) -> Value {
    let stat =
        |f: fn(&QueryRecord) -> Option<f64>| Stats::of(&q.iter().filter_map(f).collect::<Vec<_>>());
    let sum = |f: fn(&QueryRecord) -> Option<f64>| {
        let v: Vec<f64> = q.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>())
    };
    let tokens = |f: fn(&QueryRecord) -> Option<u64>| q.iter().filter_map(f).sum::<u64>();
    let graded = summarise(
        &q.iter()
            .map(|r| Query {
                verdict: Some(r.verdict),
                energy_joules: r.energy_joules,
                net_energy_joules: r.net_energy_joules,
                mean_watts: r.mean_watts,
                ttft_seconds: r.ttft_seconds,
                itl_seconds: r.itl_seconds,
            })
            .collect::<Vec<_>>(),
    );
    let graders = sorted_once(q.iter().map(|r| r.grader.as_str()));
    let sources = sorted_once(q.iter().flat_map(|r| r.sources.iter().map(String::as_str)));
    let mut out = json!({
        "model": o.model,
        "eval": o.eval,
        "machine": sysinfo::System::host_name(),
        "api": format!("{:?}", o.api).to_lowercase(),
        "queries": q.len(),
        "measured": measured,
        "baseline_watts": idle_watts,
        "baseline": if o.idle.is_zero() { Value::Null } else {
            Value::from(format!("the machine idle for {:.1} s before the first prompt", o.idle.as_secs_f64()))
        },
        "totals": {
            "wall_seconds": sum(|r| Some(r.wall_seconds)),
            "energy_joules": sum(|r| r.energy_joules),
            "net_energy_joules": sum(|r| r.net_energy_joules),
            "carbon_g": sum(|r| r.carbon_g),
            "prompt_tokens": tokens(|r| r.prompt_tokens),
            "completion_tokens": tokens(|r| r.completion_tokens),
            "battery": battery_totals(q),
        },
        "graders": graders,
        "sources": sources,
        "energy": energy_terms(q),
        "per_query": {
            "ttft_seconds": stat(|r| r.ttft_seconds),
            "tokens_per_second": stat(|r| r.tokens_per_second),
            "energy_joules": stat(|r| r.energy_joules),
            "net_energy_joules": stat(|r| r.net_energy_joules),
            "joules_per_token": stat(|r| r.joules_per_token),
            "mean_watts": stat(|r| r.mean_watts),
            "peak_watts": stat(|r| r.peak_watts),
            "wall_seconds": stat(|r| Some(r.wall_seconds)),
            "itl_seconds": stat(|r| r.itl_seconds),
        },
    });
    // A grader model's requests are its own records, measured apart: never in the figures
    // above, said here per grader model.
    let mut grading: std::collections::BTreeMap<&str, (usize, Vec<f64>, u64)> = Default::default();
    for g in q.iter().filter_map(|r| r.grader_record.as_ref()) {
        let e = grading.entry(g.model.as_str()).or_default();
        e.0 += 1;
        e.1.extend(g.energy_joules);
        e.2 += g.completion_tokens.unwrap_or(0);
    }
    if let Some(o) = out.as_object_mut() {
        let models: Vec<Value> = grading
            .iter()
            .map(|(model, (requests, joules, tokens))| {
                json!({
                    "model": model,
                    "requests": requests,
                    "measured_requests": joules.len(),
                    "energy_joules": (!joules.is_empty()).then(|| joules.iter().sum::<f64>()),
                    "completion_tokens": tokens,
                })
            })
            .collect();
        o.insert("grader_models".into(), Value::from(models));
    }
    // IPW's figures and the rest of the grading's, beside the others.
    if let (Some(o), Ok(Value::Object(g))) = (out.as_object_mut(), serde_json::to_value(graded)) {
        o.extend(g);
    }
    out
}

/// Each name once, sorted.
pub(super) fn sorted_once<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = names.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// What the queries' energy is: its scope and the parts it covers (one, or each there was: a run
/// whose headline changed scope mixed two quantities, and says so), the worst quality, the least
/// share of a query measured and the sum of the bounds.
fn energy_terms(q: &[QueryRecord]) -> Value {
    let scopes = sorted_once(q.iter().map(|r| wattbar_core::Scope::shown(r.scope)));
    let covers = sorted_once(q.iter().flat_map(|r| r.covers.iter().map(String::as_str)));
    let bounds: Vec<f64> = q.iter().filter_map(|r| r.energy_bound_joules).collect();
    json!({
        "scope": (scopes.len() == 1).then(|| scopes[0]),
        "scopes": scopes,
        "covers": covers,
        "quality": q.iter().filter_map(|r| r.quality).max(),
        "least_covered": q.iter().filter_map(|r| r.covered).min_by(f64::total_cmp),
        "bound_joules": (!bounds.is_empty()).then(|| bounds.iter().sum::<f64>()),
    })
}

pub(super) fn human(s: &Value) -> String {
    let f = |v: &Value, digits: usize| {
        v.as_f64()
            .map_or("—".to_string(), |x| format!("{x:.digits$}"))
    };
    let mut t = format!(
        "wattbar profile: {} over {} prompts ({})\n",
        s["model"].as_str().unwrap_or(""),
        s["queries"],
        s["measured"].as_str().unwrap_or("")
    );
    t.push_str(&format!(
        "  energy       {} J gross, {} J net; {} completion tokens\n",
        f(&s["totals"]["energy_joules"], 1),
        f(&s["totals"]["net_energy_joules"], 1),
        s["totals"]["completion_tokens"]
    ));
    let b = &s["totals"]["battery"];
    if !b.is_null() {
        t.push_str(&format!(
            "  on battery   {} J ({} % of it), {}\n",
            f(&b["joules"], 1),
            f(&b["share_percent"], 0),
            match b["wear"].as_f64() {
                Some(w) => format!("wear {w:.6} {}", b["currency"].as_str().unwrap_or("")),
                None => "wear not priced".to_string(),
            }
        ));
    }
    for (key, label, unit) in [
        ("joules_per_token", "J/token", "J"),
        ("tokens_per_second", "tokens/s", ""),
        ("ttft_seconds", "first token", "s"),
        ("mean_watts", "mean power", "W"),
    ] {
        let st = &s["per_query"][key];
        if st.is_null() {
            continue;
        }
        t.push_str(&format!(
            "  {label:<13}mean {} {unit}, median {}, min {}, max {}\n",
            f(&st["mean"], 3),
            f(&st["median"], 3),
            f(&st["min"], 3),
            f(&st["max"], 3)
        ));
    }
    t.push_str(&format!(
        "  graded       {} correct, {} incorrect, {} unevaluated: accuracy {}\n",
        s["correct"],
        s["incorrect"],
        s["unevaluated"],
        f(&s["accuracy"], 3)
    ));
    t.push_str(&format!(
        "  per answer   {} J a query, {} J a correct answer, {} correct per kJ\n",
        f(&s["avg_per_query_energy_joules"], 1),
        f(&s["joules_per_correct_answer"], 1),
        s["intelligence_per_joule"]
            .as_f64()
            .map_or("—".to_string(), |x| format!("{:.3}", x * 1000.0))
    ));
    t
}
