//! Following which models the server holds (`GET /api/ps`), for what resident models cost.
//!
//! Rules:
//! - Asked every [`POLL`]; each answer goes to the engine, which uses it at its next sample.
//!   Where no answer comes, the engine is told the set is unknown, never empty.
//! - A server without `/api/ps` (llama.cpp's) is asked again only after [`NOT_OFFERED_RETRY`];
//!   one that fails otherwise (not running, an error), after [`FAILED_RETRY`]: an idle machine
//!   pays one request every few seconds at most.
//! - Each kind of failure is logged once, until an answer comes.

use super::server_api::{ps, HttpClient, PsError};
use super::upstream::Upstream;
use std::time::Duration;
use wattbar_engine::inference::Reporter;

pub(super) const POLL: Duration = Duration::from_secs(5);
pub(super) const NOT_OFFERED_RETRY: Duration = Duration::from_secs(300);
pub(super) const FAILED_RETRY: Duration = Duration::from_secs(30);

/// Reads the loaded models until the task is dropped.
pub(super) async fn follow(reporter: Reporter, upstream: Upstream, client: HttpClient) {
    let mut said: Option<PsError> = None;
    loop {
        let wait = match ps(&client, &upstream).await {
            Ok(models) => {
                if said.take().is_some() {
                    tracing::info!("{upstream} says which models it holds again");
                }
                reporter.loaded(Some(models));
                POLL
            }
            Err(e) => {
                reporter.loaded(None);
                let wait = match e {
                    PsError::NotOffered(_) => NOT_OFFERED_RETRY,
                    PsError::Failed(_) => FAILED_RETRY,
                };
                if said.as_ref() != Some(&e) {
                    tracing::info!(
                        "what resident models cost is not followed for now: {e} (asked again in \
                         {} s)",
                        wait.as_secs()
                    );
                    said = Some(e);
                }
                wait
            }
        };
        tokio::time::sleep(wait).await;
    }
}
