//! Wattbar's home: the data folder and what lives in it, outside the ledger.
//!
//! - [`paths`]: where the folder is (`WATTBAR_DATA_DIR`, else the platform's data folder) and
//!   the files in it;
//! - [`lock`]: one engine per folder, and how the others find its API;
//! - [`prefs_file`]: the preferences, one JSON object, written only by the engine;
//! - [`secrets`]: the API's bearer token and the secrets the preferences keep apart (a plug's,
//!   a broker's, a model server's), each in a file its user alone may read.

mod kept_apart;
pub mod lock;
pub use kept_apart::mqtt_password_for;
pub mod paths;
pub mod prefs_file;
pub mod secrets;
