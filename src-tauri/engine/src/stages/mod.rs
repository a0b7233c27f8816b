//! The stages of a sample, each a type that owns its state and observes each interval; the
//! engine's loop calls them by name.

pub mod rest;
