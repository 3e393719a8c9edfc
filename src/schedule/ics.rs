//! The iCalendar feed (`/api/schedule.ics`, RFC 5545) in Owncast's form: CRLF line endings, lines
//! folded at 75 octets without splitting a UTF-8 character, text escaped, times in UTC and one VEVENT
//! per scheduled or cancelled event with the stable UID `<id>@owncast`.

use chrono::{DateTime, Duration, Utc};

use super::model::ScheduledEvent;

const ICS_TIME: &str = "%Y%m%dT%H%M%SZ";

/// Escape a TEXT value: backslash, semicolon, comma and newlines.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("\\n");
            }
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Fold one content line: at most 75 octets on the first line and 74 (after the leading space) on
/// each continuation, never inside a UTF-8 character; every line ends with CRLF.
pub fn fold(line: &str, out: &mut String) {
    let mut limit = 75;
    let mut used = 0;
    for c in line.chars() {
        let n = c.len_utf8();
        if used + n > limit {
            out.push_str("\r\n ");
            limit = 74;
            used = 0;
        }
        out.push(c);
        used += n;
    }
    out.push_str("\r\n");
}

/// The whole calendar for `events`, stamped `now`.
pub fn calendar(events: &[ScheduledEvent], now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let stamp = now.format(ICS_TIME).to_string();
    for line in [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//Owncast//Schedule//EN",
        "CALSCALE:GREGORIAN",
        "METHOD:PUBLISH",
        "REFRESH-INTERVAL;VALUE=DURATION:PT15M",
    ] {
        fold(line, &mut out);
    }
    for e in events {
        let end = e.start_time + Duration::minutes(e.duration_minutes);
        fold("BEGIN:VEVENT", &mut out);
        fold(&format!("UID:{}@owncast", e.id), &mut out);
        fold(&format!("DTSTAMP:{stamp}"), &mut out);
        fold(&format!("DTSTART:{}", e.start_time.format(ICS_TIME)), &mut out);
        fold(&format!("DTEND:{}", end.format(ICS_TIME)), &mut out);
        fold(&format!("SUMMARY:{}", escape(&e.name)), &mut out);
        if !e.description.is_empty() {
            fold(&format!("DESCRIPTION:{}", escape(&e.description)), &mut out);
        }
        let status = if e.status == "cancelled" { "CANCELLED" } else { "CONFIRMED" };
        fold(&format!("STATUS:{status}"), &mut out);
        fold("END:VEVENT", &mut out);
    }
    fold("END:VCALENDAR", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_keeps_octet_limits_and_characters_whole() {
        let mut out = String::new();
        let line = format!("DESCRIPTION:{}", "ü".repeat(100));
        fold(&line, &mut out);
        let lines: Vec<&str> = out.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert!(lines.len() > 2);
        assert!(lines.iter().all(|l| l.len() <= 75), "{lines:?}");
        assert!(lines[1..].iter().all(|l| l.starts_with(' ')));
        let unfolded = out.replace("\r\n ", "");
        assert_eq!(unfolded.trim_end(), line);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a,b;c\\d\r\ne\nf"), "a\\,b\\;c\\\\d\\ne\\nf");
    }
}
