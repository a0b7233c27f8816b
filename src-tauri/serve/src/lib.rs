//! wattbar-serve: what the engine offers beyond its process. The local API ([`api`]: JSON,
//! the event stream, the dashboard's files), Prometheus' `/metrics` ([`metrics`]), the payloads
//! they share ([`view`]), the one accept loop with its limits ([`net`]) and the inference proxy
//! that measures each request ([`proxy`]).
//!
//! Rule: everything here reads the engine's published state and asks it through an
//! [`EngineReader`](wattbar_engine::EngineReader); nothing here samples, accounts or writes the
//! ledger.

pub mod api;
pub mod integrations;
pub mod metrics;
pub mod mqtt;
pub mod net;
pub mod otlp;
pub mod proxy;
pub mod summary;
pub mod view;
