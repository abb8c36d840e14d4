//! Shared by the integration tests (each uses part of it).
#[allow(dead_code)]
pub mod synth;
