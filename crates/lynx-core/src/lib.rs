//! lynx's domain: the words of DESIGN.md as types, and the pure computations on them.
//!
//! Configuration (suites and model shapes, parsed from TOML), the device names users type,
//! step-time statistics, the warm-up equilibrium detector and the result schema. Everything lynx
//! serialises is defined here, once. This crate knows nothing of libtorch or devices and does no
//! I/O beyond parsing the text it is handed.

pub mod catalogue;
pub mod checks;
pub mod compare;
pub mod config;
pub mod derived;
pub mod device;
pub mod equilibrium;
pub mod fleet;
pub mod latency;
pub mod result;
pub mod roofline;
pub mod shortlist;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod telemetry;
pub mod time;
pub mod value;
