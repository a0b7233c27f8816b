//! The cost of waking once a second and doing nothing, three ways: what the engine's loop costs
//! before it does any work. Measure each with `scripts/measure-idle --seconds 60 -- CMD`:
//!
//! ```text
//! cargo build --release -p wattbar-engine --example idle_floor
//! scripts/measure-idle -- target/release/examples/idle_floor tokio     # tokio interval
//! scripts/measure-idle -- target/release/examples/idle_floor blocking  # + spawn_blocking
//! scripts/measure-idle -- target/release/examples/idle_floor thread    # one timed wait
//! ```

use std::time::{Duration, Instant};

const PERIOD: Duration = Duration::from_secs(1);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "thread".into());
    if mode == "thread" {
        let (_keep, inbox) = std::sync::mpsc::channel::<()>();
        let mut next = Instant::now();
        loop {
            next += PERIOD;
            let _ = inbox.recv_timeout(next.saturating_duration_since(Instant::now()));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut tick = tokio::time::interval(PERIOD);
        loop {
            tick.tick().await;
            if mode == "blocking" {
                let _ = tokio::task::spawn_blocking(|| std::hint::black_box(1)).await;
            }
        }
    })
}
