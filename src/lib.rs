//! castd: a self-hosted live-video streaming server with viewer chat and an Owncast-compatible API.
//!
//! `main.rs` parses the command line and starts the parts defined here; see DESIGN.md in the shared
//! folder for the architecture.

pub mod api;
pub mod app;
pub mod chat;
pub mod config;
pub mod events;
pub mod hardware;
pub mod hls;
pub mod ingest;
pub mod markdown;
pub mod metrics;
pub mod notifications;
pub mod password;
pub mod store;
pub mod systemd;
pub mod tokens;
pub mod transcode;
pub mod web;
pub mod webhooks;
