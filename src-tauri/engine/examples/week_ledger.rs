//! Writes a week of generated history into a ledger, for timing and looking at reports:
//! `cargo run --release -p wattbar-engine --example week_ledger -- DIR/wattbar.db`, then
//! `WATTBAR_DATA_DIR=DIR wattbar-cli report --from 7d --out DIR/`.
//!
//! One sample a minute: 50 W at night, 150 W from 09:00 to 17:00 UTC, with three hours missing
//! on the third day (a gap, not 0 W).

use wattbar_engine::store::{Row, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: week_ledger PATH/wattbar.db")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    let start = (now / 86_400.0).floor() * 86_400.0 - 7.0 * 86_400.0;
    let (mut store, _) = Store::open(std::path::Path::new(&path), start)?;
    let session = store.start_session(start, "EUR")?;
    let mut batch = Vec::new();
    let (mut joules, mut cost) = (0.0, 0.0);
    let mut t = start;
    while t < now {
        let hour = (t % 86_400.0) / 3600.0;
        let day = ((t - start) / 86_400.0).floor();
        t += 60.0;
        if day == 2.0 && (12.0..15.0).contains(&hour) {
            continue;
        }
        let watts = if (9.0..17.0).contains(&hour) {
            150.0
        } else {
            50.0
        };
        let j = watts * 60.0;
        let c = j / 3.6e6 * 0.30;
        joules += j;
        cost += c;
        batch.push(Row {
            t,
            watts: Some(watts),
            joules: j,
            cost: c,
            by_domain: vec![("system".into(), j)],
            seconds: 60.0,
            currency: "EUR".into(),
        });
        if batch.len() == 1440 {
            store.write_batch(session, &batch, joules, cost)?;
            batch.clear();
        }
    }
    store.write_batch(session, &batch, joules, cost)?;
    store.end_session(session, now)?;
    println!("{path}: {:.3} kWh over 7 days", joules / 3.6e6);
    Ok(())
}
