//! systemd integration through the `sd_notify` protocol: `READY=1` once every listener is bound,
//! `STATUS=` lines with the stream state (shown by `systemctl status castd`), `STOPPING=1` on shutdown
//! and `WATCHDOG=1` keep-alives from the tokio runtime.
//!
//! Everything here is a no-op outside systemd (no `NOTIFY_SOCKET` in the environment), so `main` calls
//! it unconditionally and other modules can call [`status`] whenever the state they own changes.
//! Sending is best-effort: a failed send is logged at debug level and never fails the caller.
//!
//! The watchdog pings at half of `WATCHDOG_USEC` (as sd_watchdog_enabled(3) recommends) from a task on
//! the main runtime, so a wedged runtime stops the pings and systemd restarts the service. It only runs
//! when `WATCHDOG_PID` is unset or names this process, so re-executed worker processes (which inherit
//! the environment) never ping on the daemon's behalf; systemd also ignores their messages
//! (`NotifyAccess=main`).
//!
//! Logging: when stderr is connected to the journal (`JOURNAL_STREAM` names stderr's device and inode,
//! as systemd.exec(5) says to check), [`JournalPrefix`] starts each log line with a syslog priority
//! `<N>` so `journalctl -p warning` filters castd's warnings, and the timestamp is left to the journal.
//!
//! Status texts are single lines: control characters (a newline would start a new `KEY=value`
//! assignment, e.g. a forged `MAINPID=`) are replaced with spaces and the text is capped at
//! [`MAX_STATUS_LEN`] bytes, because parts of it (the stream title, the encoder) come from input.

use std::time::Duration;

use sd_notify::NotifyState;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::stream::{StreamState, StreamWatch};
use crate::tasks::{Stage, Tasks};

/// Longest `STATUS=` text sent, in bytes (systemd shows one line; longer texts are cut at a char boundary).
pub const MAX_STATUS_LEN: usize = 200;

/// Why a notification could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("sending to the systemd notification socket: {0}")]
    Send(#[from] std::io::Error),
}

/// Whether castd was started by systemd with a notification socket (`Type=notify`).
pub fn under_systemd() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// Send raw states; `Ok` without doing anything outside systemd.
pub fn send(states: &[NotifyState<'_>]) -> Result<(), NotifyError> {
    sd_notify::notify(states)?;
    Ok(())
}

fn send_logged(states: &[NotifyState<'_>]) {
    if let Err(e) = send(states) {
        tracing::debug!("{e}");
    }
}

/// Make `text` safe for one `STATUS=` line: no control characters, at most [`MAX_STATUS_LEN`] bytes.
pub fn sanitize_status(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_STATUS_LEN));
    for c in text.chars().map(|c| if c.is_control() { ' ' } else { c }) {
        if out.len() + c.len_utf8() > MAX_STATUS_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// Tell systemd the service is up (`READY=1`) together with a first status line.
pub fn ready(status_text: &str) {
    let text = sanitize_status(status_text);
    send_logged(&[NotifyState::Ready, NotifyState::Status(&text)]);
}

/// Update the status line shown by `systemctl status castd`.
pub fn status(status_text: &str) {
    let text = sanitize_status(status_text);
    send_logged(&[NotifyState::Status(&text)]);
}

/// Tell systemd the service is shutting down.
pub fn stopping() {
    send_logged(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// The keep-alive period: half of the watchdog timeout systemd set for this process, if any.
pub fn watchdog_period() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|timeout| timeout / 2).filter(|p| !p.is_zero())
}

/// Start sending `WATCHDOG=1` every [`watchdog_period`] until the `Background` stage stops (the last);
/// nothing when systemd set no watchdog.
pub fn spawn_watchdog(tasks: &Tasks) {
    let Some(period) = watchdog_period() else { return };
    tracing::debug!("systemd watchdog: pinging every {period:?}");
    tasks.spawn_until_stopped(Stage::Background, "systemd watchdog", async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            send_logged(&[NotifyState::Watchdog]);
        }
    });
}

/// The status line for the stream state: `"listening on <url>; stream offline"` or, while a broadcaster
/// is connected, `"listening on <url>; stream online (<encoder>)"`.
pub fn stream_status_line(listen_url: &str, online: bool, encoder: &str) -> String {
    match (online, encoder.is_empty()) {
        (false, _) => format!("listening on {listen_url}; stream offline"),
        (true, true) => format!("listening on {listen_url}; stream online"),
        (true, false) => format!("listening on {listen_url}; stream online ({encoder})"),
    }
}

fn current_stream_line(stream: &StreamState, listen_url: &str) -> String {
    let encoder = stream.broadcaster.as_ref().map(|b| b.stream_details.encoder.clone()).unwrap_or_default();
    stream_status_line(listen_url, stream.online, &encoder)
}

/// Send `READY=1` with the current stream state, then keep `STATUS=` in step with the stream state
/// until its writer is gone. Does nothing (and spawns nothing) outside systemd.
pub fn announce_ready(mut stream: StreamWatch, listen_url: String, tasks: &Tasks) {
    if !under_systemd() {
        return;
    }
    let line = current_stream_line(&stream.borrow_and_update(), &listen_url);
    ready(&line);
    tasks.spawn_until_stopped(Stage::Background, "systemd status", async move {
        let mut last = line;
        while stream.changed().await.is_ok() {
            let line = current_stream_line(&stream.borrow_and_update(), &listen_url);
            if line != last {
                status(&line);
                last = line;
            }
        }
    });
}

/// Whether stderr is the journal: `JOURNAL_STREAM=<dev>:<inode>` matches stderr's own device and inode
/// (a child whose stderr was redirected elsewhere inherits the variable but fails this check).
pub fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = value.to_str().and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
        return false;
    };
    match std::fs::File::from(fd).metadata() {
        Ok(m) => m.dev() == dev && m.ino() == ino,
        Err(_) => false,
    }
}

/// The syslog priority journald reads from a `<N>` line prefix (`SyslogLevelPrefix=`, on by default).
pub fn syslog_priority(level: &tracing::Level) -> u8 {
    match *level {
        tracing::Level::ERROR => 3,
        tracing::Level::WARN => 4,
        tracing::Level::INFO => 6,
        _ => 7,
    }
}

/// A log formatter that prefixes every line of the wrapped formatter with `<N>` (the event's syslog
/// priority), for stderr connected to the journal.
pub struct JournalPrefix<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for JournalPrefix<F>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", syslog_priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_one_line_without_control_characters() {
        let s = sanitize_status("title\nMAINPID=1\r\tx\u{7}");
        assert_eq!(s, "title MAINPID=1  x ");
        assert!(!s.contains('\n'));
    }

    #[test]
    fn status_is_capped_at_a_char_boundary() {
        let long = "é".repeat(MAX_STATUS_LEN);
        let s = sanitize_status(&long);
        assert!(s.len() <= MAX_STATUS_LEN);
        assert_eq!(s.len(), MAX_STATUS_LEN);
        assert!(s.chars().all(|c| c == 'é'));
        assert_eq!(sanitize_status("short"), "short");
    }

    #[test]
    fn stream_lines() {
        assert_eq!(
            stream_status_line("http://0.0.0.0:8080", false, "x"),
            "listening on http://0.0.0.0:8080; stream offline"
        );
        assert_eq!(stream_status_line("u", true, ""), "listening on u; stream online");
        assert_eq!(stream_status_line("u", true, "h264_vaapi"), "listening on u; stream online (h264_vaapi)");
    }
}
