//! What readers may ask of the engine, and how it answers. Each command is applied and
//! republished at once, on the engine's thread; a refused one changes nothing and says why.

use crate::error::Error;
use crate::inference::events::RequestEvent;
use crate::inference::reporter::Sink;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use wattbar_core::inference::Record;
use wattbar_core::Preferences;
use wattbar_ledger::store::profiles::StoredProfile;

/// Where the engine says whether it took a change.
pub type Reply = oneshot::Sender<Result<(), Error>>;

pub use crate::inference::events::External;

/// The engine thread's inbox: readers' commands and the proxy's events.
pub type EngineInbox = crate::inbox::Inbox<Command, RequestEvent>;

/// Where a [`Reporter`](crate::inference::reporter::Reporter) sends the proxy's events: into
/// `inbox`.
pub fn events_into(inbox: &Arc<EngineInbox>) -> Sink {
    let inbox = Arc::clone(inbox);
    Arc::new(move |event| inbox.report(event))
}

/// Requests to the engine. Each one is applied and republished at once.
#[derive(Debug)]
pub enum Command {
    /// Write everything to the store, end the session and stop; answers when done.
    /// Writes the last batch and stops; answers whether the ledger took it.
    Shutdown(std::sync::mpsc::Sender<Result<(), wattbar_ledger::store::StoreError>>),
    /// Replace every preference at once (validated first; a refused set changes nothing and its
    /// reason goes back on the reply). Not saved: for a session's overrides.
    SetPreferences(Box<Preferences>, Option<Reply>),
    /// Set one preference by its key in the schema, starting from the engine's own preferences:
    /// validated with every other field, applied, saved to the preferences file (where the
    /// engine has one) and published before the answer, which holds every preference.
    SetPreference {
        key: String,
        value: serde_json::Value,
        reply: oneshot::Sender<Result<Preferences, Error>>,
    },
    SetLowPower(bool),
    /// Someone looks while the engine rests ([`crate::stages::rest`]): back to the configured
    /// pace at once.
    Wake,
    SetInterval(Duration),
    ResetSession,
    /// Make and store a record for inference a client measured itself; answers the record.
    RecordInference(Box<External>, oneshot::Sender<Result<Record, Error>>),
    /// Keep a graded profile of a model (`wattbar-cli profile`); answers once it is kept and the
    /// batch holding it was written (where there is a ledger; a failed write is kept for the
    /// next batch and shown, as every write is).
    RecordProfile(Box<StoredProfile>, Reply),
    /// Answers once record `id` is settled (published), or at once when nothing of it is
    /// pending: its request never began, was abandoned, or was settled already.
    AwaitSettled(u64, oneshot::Sender<()>),
}
