//! The worker's only writer of stdout: `WorkerEvent`s, one JSON object per line (logs go to stderr).

use std::io::Write;

use crate::transcode::WorkerEvent;

/// Writes events to stdout, one JSON line each, flushed at once.
pub(super) fn emit(event: &WorkerEvent) {
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
