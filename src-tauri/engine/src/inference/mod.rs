//! Inference energy in the engine: what the proxy reports ([`events`], sent by [`reporter`]), the
//! requests the engine knows of ([`requests`]), the book that turns them into records
//! ([`book`]), and the proxy that sees them pass ([`proxy`]).

pub mod book;
pub mod events;
pub mod proxy;
pub mod reporter;
pub mod requests;

pub use book::{Book, InferenceView};
pub use events::{Finished, RecordIds, RequestEvent};
pub use reporter::{InFlight, Reporter};
pub use requests::Requests;
