//! Viewer access (placeholder until the lead's `access` lands): the JWT check and the admission hook.

pub mod hook;
pub mod jwt;
