//! Recurrence values of a series (RFC 5545 `DTSTART;TZID=<IANA zone>:...` + `RRULE:...`): parsing
//! with Owncast's error messages and expansion in the DTSTART zone (DST-correct), through the `rrule`
//! crate and `chrono-tz`.

use chrono::{DateTime, Duration, Utc};
use rrule::RRuleSet;

use super::ScheduleError;

/// Most occurrences one window may hold (Owncast: 1000).
pub const MAX_OCCURRENCES: u16 = 1000;
/// Most steps an expansion may take (Owncast: 500 000).
pub const MAX_ITERATIONS: usize = 500_000;
/// How many instants a preview shows.
pub const PREVIEW_COUNT: usize = 5;

/// A parsed recurrence: the rule set and the IANA zone its times are in.
pub struct Recurrence {
    set: RRuleSet,
    /// The DTSTART zone (`UTC` when DTSTART is given in UTC).
    pub timezone: String,
}

fn bad(msg: impl Into<String>) -> ScheduleError {
    ScheduleError::Invalid(msg.into())
}

/// Parse a recurrence value, with Owncast's messages for what is missing.
pub fn parse(value: &str) -> Result<Recurrence, ScheduleError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(bad("recurrence value is empty"));
    }
    let lines: Vec<String> = value
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            // A floating DTSTART date-time (no zone, no `Z`; `DTSTART:` or with parameters such as
            // `DTSTART;VALUE=DATE-TIME:`) is read as UTC rather than the host's local time.
            let upper = l.to_ascii_uppercase();
            let floating = (upper.starts_with("DTSTART:") || upper.starts_with("DTSTART;"))
                && !upper.contains("TZID")
                && !upper.ends_with('Z')
                && upper.rsplit(':').next().is_some_and(|v| v.contains('T'));
            if floating {
                format!("{l}Z")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !lines.iter().any(|l| l.to_ascii_uppercase().starts_with("RRULE")) {
        return Err(bad("recurrence value has no RRULE"));
    }
    if !lines.iter().any(|l| l.to_ascii_uppercase().starts_with("DTSTART")) {
        return Err(bad("recurrence value has no DTSTART"));
    }
    let text = lines.join("\n");
    // The parser is fed input from the API: a panic inside it must stay a 400.
    let parsed = std::panic::catch_unwind(|| text.parse::<RRuleSet>())
        .map_err(|_| bad("unable to parse recurrence value: the rule could not be read"))?;
    let set = parsed.map_err(|e| bad(format!("unable to parse recurrence value: {e}")))?;
    let timezone = match set.get_dt_start().timezone() {
        rrule::Tz::Tz(tz) => tz.name().to_string(),
        rrule::Tz::Local(_) => "UTC".to_string(),
    };
    Ok(Recurrence { set, timezone })
}

impl Recurrence {
    /// The occurrences with `from <= start < to` (UTC), at most `MAX_OCCURRENCES`; a rule needing more
    /// than `MAX_ITERATIONS` steps to get there is refused (Owncast's limits and messages).
    pub fn between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<DateTime<Utc>>, ScheduleError> {
        let set = self.set.clone().limit();
        let walk = std::panic::AssertUnwindSafe(move || {
            let mut out = Vec::new();
            for (steps, date) in set.into_iter().enumerate() {
                if steps >= MAX_ITERATIONS {
                    return Err(bad("recurrence rule is too dense to expand"));
                }
                let date = date.with_timezone(&Utc);
                if date >= to {
                    break;
                }
                if date >= from {
                    if out.len() >= usize::from(MAX_OCCURRENCES) {
                        return Err(bad("recurrence rule produces too many occurrences"));
                    }
                    out.push(date);
                }
            }
            Ok(out)
        });
        std::panic::catch_unwind(walk).map_err(|_| bad("recurrence rule is too dense to expand"))?
    }

    /// Owncast's preview: the first `PREVIEW_COUNT` instants in `[now, now + 1 year)`.
    pub fn preview(&self, now: DateTime<Utc>) -> Result<Vec<DateTime<Utc>>, ScheduleError> {
        let mut all = self.between(now, now + Duration::days(365))?;
        all.truncate(PREVIEW_COUNT);
        Ok(all)
    }
}

/// Parse `value` and expand it over `[from, to)` on the blocking pool (an expansion may take up to
/// `MAX_ITERATIONS` steps); gives the occurrences and the rule's zone.
pub async fn expand(
    value: String,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(Vec<DateTime<Utc>>, String), ScheduleError> {
    tokio::task::spawn_blocking(move || {
        let rule = parse(&value)?;
        Ok((rule.between(from, to)?, rule.timezone))
    })
    .await
    .map_err(|_| bad("recurrence rule is too dense to expand"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn msg(value: &str) -> String {
        match parse(value) {
            Err(ScheduleError::Invalid(m)) => m,
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("{value:?} was accepted"),
        }
    }

    #[test]
    fn missing_parts_have_owncasts_messages() {
        assert_eq!(msg("  "), "recurrence value is empty");
        assert_eq!(msg("DTSTART:20300101T100000Z"), "recurrence value has no RRULE");
        assert_eq!(msg("RRULE:FREQ=WEEKLY"), "recurrence value has no DTSTART");
        assert!(msg("DTSTART:nonsense\nRRULE:FREQ=WEEKLY").starts_with("unable to parse recurrence value: "));
        assert!(msg("DTSTART;TZID=Mars/Olympus:20300101T100000\nRRULE:FREQ=WEEKLY")
            .starts_with("unable to parse recurrence value: "));
    }

    #[test]
    fn weekly_new_york_keeps_local_time_in_autumn() {
        // 2030-11-03 is the first Sunday of November: New York moves from UTC-4 to UTC-5.
        let r = parse("DTSTART;TZID=America/New_York:20301020T190000\nRRULE:FREQ=WEEKLY;COUNT=4").unwrap();
        let from = Utc.with_ymd_and_hms(2030, 10, 1, 0, 0, 0).unwrap();
        let got = r.between(from, from + Duration::days(60)).unwrap();
        let hours: Vec<u32> = got.iter().map(chrono::Timelike::hour).collect();
        assert_eq!(hours, vec![23, 23, 0, 0], "{got:?}");
    }

    #[test]
    fn weekly_berlin_keeps_local_time_across_dst() {
        // 2030-03-31 is the last Sunday of March: Berlin moves from UTC+1 to UTC+2.
        let r = parse("DTSTART;TZID=Europe/Berlin:20300317T190000\nRRULE:FREQ=WEEKLY;COUNT=4").unwrap();
        assert_eq!(r.timezone, "Europe/Berlin");
        let from = Utc.with_ymd_and_hms(2030, 3, 1, 0, 0, 0).unwrap();
        let got = r.between(from, from + Duration::days(60)).unwrap();
        let hours: Vec<u32> = got.iter().map(chrono::Timelike::hour).collect();
        assert_eq!(hours, vec![18, 18, 17, 17], "{got:?}");
    }

    #[test]
    fn limits_are_enforced() {
        let r = parse("DTSTART:20300101T000000Z\nRRULE:FREQ=MINUTELY").unwrap();
        let from = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        assert!(matches!(r.between(from, from + Duration::days(30)),
            Err(ScheduleError::Invalid(m)) if m == "recurrence rule produces too many occurrences"));
        let old = parse("DTSTART:19000101T000000Z\nRRULE:FREQ=MINUTELY").unwrap();
        assert!(matches!(old.between(from, from + Duration::days(1)),
            Err(ScheduleError::Invalid(m)) if m == "recurrence rule is too dense to expand"));
        let floating = parse("DTSTART:20300101T100000\nRRULE:FREQ=DAILY;COUNT=2").unwrap();
        assert_eq!(floating.timezone, "UTC");
        assert_eq!(floating.preview(from).unwrap().len(), 2);
    }

    /// A DTSTART without a zone is UTC in every form, whatever the host's zone (tests/faketime.sh runs
    /// this with `TZ=Europe/Berlin`).
    #[test]
    fn a_floating_dtstart_is_utc_in_every_form() {
        let from = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let ten = Utc.with_ymd_and_hms(2030, 1, 1, 10, 0, 0).unwrap();
        for value in [
            "DTSTART:20300101T100000\nRRULE:FREQ=DAILY;COUNT=2",
            "DTSTART;VALUE=DATE-TIME:20300101T100000\nRRULE:FREQ=DAILY;COUNT=2",
            "DTSTART:20300101T100000Z\nRRULE:FREQ=DAILY;COUNT=2",
        ] {
            let r = parse(value).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(r.timezone, "UTC", "{value}");
            let got = r.between(from, from + Duration::days(3)).unwrap();
            assert_eq!(got, vec![ten, ten + Duration::days(1)], "{value}");
        }
    }
}
