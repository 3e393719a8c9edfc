//! `/schedule/{id}`: a scheduled stream's public page, which the reminders (Fediverse, browser push,
//! Discord) and the ActivityPub Event's `url` link to. Server-rendered HTML (no web UI build needed):
//! the name, the description, the start in the event's own time zone and in the viewer's, the
//! duration, a live countdown, whether it was cancelled, "Add to calendar" (this event as iCalendar,
//! `/schedule/{id}/calendar.ics`), the schedule's feed and the way to the stream; OpenGraph and
//! Twitter card tags for link previews. 404 while the schedule is off or for an id that names no
//! event: a page saying so for a browser, the usual JSON refusal otherwise. The page's one inline
//! script (local time, countdown) is allowed by its hash in the page's Content-Security-Policy
//! (`http::headers`); the page may not be framed.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::{Duration, Utc};

use super::model::ScheduledEvent;
use super::{db, ics, Schedule, ScheduleError};
use crate::http::headers::{Framing, Page};
use crate::http::ApiError;

/// HTML escaping for text and attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

async fn find(s: &Schedule, id: String) -> Result<Option<ScheduledEvent>, ScheduleError> {
    if !s.settings.get().schedule.schedule_enabled || id.len() > 64 {
        return Ok(None);
    }
    Ok(s.store.call(move |c| db::event(c, &id)).await?)
}

/// The 404 answer: a page for a browser (`Accept` names HTML), Owncast's JSON otherwise.
fn not_found(headers: &HeaderMap, server: &str) -> Response {
    let html = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("text/html"));
    if !html {
        return ApiError::NotFound("no such scheduled stream".into()).into_response();
    }
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Not found · {0}</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"></head><body>\
         <main id=\"schedule-not-found\"><h1>No such scheduled stream</h1><p><a href=\"/\">{0}</a></p></main>\
         </body></html>",
        esc(server)
    );
    (StatusCode::NOT_FOUND, Html(body)).into_response()
}

/// "1 hour 30 minutes".
fn duration_text(minutes: i64) -> String {
    let (h, m) = (minutes / 60, minutes % 60);
    let unit = |n: i64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    match (h, m) {
        (0, m) => unit(m, "minute"),
        (h, 0) => unit(h, "hour"),
        (h, m) => format!("{} {}", unit(h, "hour"), unit(m, "minute")),
    }
}

/// The page's script (the local time and the countdown), inline and allowed by its hash.
const COUNTDOWN_JS: &str = r#"
(function () {
  var main = document.getElementById('scheduled-event');
  var start = Date.parse(main.dataset.start), end = Date.parse(main.dataset.end);
  var local = document.getElementById('event-local-time');
  try { local.textContent = 'Your time: ' + new Date(start).toLocaleString(undefined, { dateStyle: 'full', timeStyle: 'short' }); } catch (e) {}
  var out = document.getElementById('event-countdown');
  if (!out) return;
  function two(n) { return (n < 10 ? '0' : '') + n; }
  function tick() {
    var now = Date.now();
    if (now >= end) { out.textContent = 'ended'; return; }
    if (now >= start) { out.textContent = 'now (live)'; return; }
    var s = Math.floor((start - now) / 1000), d = Math.floor(s / 86400);
    var rest = two(Math.floor(s % 86400 / 3600)) + ':' + two(Math.floor(s % 3600 / 60)) + ':' + two(s % 60);
    out.textContent = (d > 0 ? d + (d === 1 ? ' day ' : ' days ') : '') + rest;
  }
  tick();
  setInterval(tick, 1000);
})();
"#;

/// `GET /schedule/{id}`.
pub async fn page(
    State(s): State<Arc<Schedule>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ScheduleError> {
    let settings = s.settings.get().clone();
    let Some(e) = find(&s, id).await? else { return Ok(not_found(&headers, &settings.instance.name)) };
    let base = settings.server.server_url.trim_end_matches('/').to_string();
    let tz: chrono_tz::Tz = e.timezone.parse().unwrap_or(chrono_tz::UTC);
    let when = e.start_time.with_timezone(&tz).format("%A, %B %-d, %Y at %-I:%M %p %Z").to_string();
    let start = e.start_time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let end = (e.start_time + Duration::minutes(e.duration_minutes)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let cancelled = e.status == "cancelled";
    let summary = if e.description.trim().is_empty() {
        format!("{} on {}", when, settings.instance.name)
    } else {
        e.description.clone()
    };
    let page_url = if base.is_empty() { String::new() } else { format!("{base}/schedule/{}", e.id) };
    let mut og = vec![
        ("og:type", "website".to_string()),
        ("og:site_name", settings.instance.name.clone()),
        ("og:title", e.name.clone()),
        ("og:description", summary.clone()),
        ("twitter:card", "summary".to_string()),
        ("twitter:title", e.name.clone()),
        ("twitter:description", summary.clone()),
    ];
    if !base.is_empty() {
        og.push(("og:url", page_url.clone()));
        og.push(("og:image", format!("{base}/logo/external")));
        og.push(("twitter:image", format!("{base}/logo/external")));
    }
    let meta: String = og
        .iter()
        .map(|(k, v)| {
            let attr = if k.starts_with("og:") { "property" } else { "name" };
            format!("<meta {attr}=\"{k}\" content=\"{}\">\n", esc(v))
        })
        .collect();
    let description = if e.description.trim().is_empty() {
        String::new()
    } else {
        format!(
            "<div id=\"event-description\" class=\"description\">{}</div>",
            crate::markdown::to_html(&e.description)
        )
    };
    let status = if cancelled {
        "<p id=\"event-cancelled\" class=\"cancelled\">This stream was cancelled.</p>"
    } else {
        "<p>Starts in <strong id=\"event-countdown\">…</strong></p>"
    };
    let id = esc(&e.id);
    let body = format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · {server}</title>
<meta name="description" content="{summary}">
{meta}<link rel="icon" href="/logo">
<style>
body {{ font-family: system-ui, sans-serif; margin: 0; background: #f4f4f8; color: #1b1b24; }}
main {{ max-width: 40rem; margin: 3rem auto; padding: 2rem; background: #fff; border-radius: 12px; }}
h1 {{ margin-top: 0; }} .muted {{ color: #5d5d70; }} .cancelled {{ color: #b00020; font-weight: bold; }}
.links a {{ display: inline-block; margin: 0.5rem 1rem 0 0; }}
.button {{ padding: 0.5rem 1rem; border-radius: 6px; background: #2b59c3; color: #fff; text-decoration: none; }}
</style>
</head>
<body>
<main id="scheduled-event" data-event-id="{id}" data-start="{start}" data-end="{end}" data-status="{status_name}">
<p class="muted"><a href="/">{server}</a> · scheduled stream</p>
<h1 id="event-name">{title}</h1>
<p id="event-when"><time datetime="{start}">{when}</time> · {duration}</p>
<p class="muted" id="event-local-time"></p>
{status}
{description}
<p class="links">
<a id="add-to-calendar" class="button" href="/schedule/{id}/calendar.ics" download="{id}.ics">Add to calendar</a>
<a id="subscribe-calendar" href="/api/schedule.ics">Subscribe to the schedule</a>
<a id="watch" href="/">Watch the stream</a>
</p>
</main>
<script>{countdown}</script>
</body>
</html>
"#,
        title = esc(&e.name),
        server = esc(&settings.instance.name),
        summary = esc(&summary),
        start = start,
        end = end,
        when = esc(&when),
        duration = duration_text(e.duration_minutes),
        status_name = if cancelled { "cancelled" } else { "scheduled" },
        countdown = COUNTDOWN_JS,
    );
    let mut resp = Html(body).into_response();
    // The page policy of `http::headers`, with this page's one inline script allowed by its hash.
    Page::new(Framing::Nobody).inline_script(COUNTDOWN_JS).apply(&mut resp);
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// `GET /schedule/{id}/calendar.ics`: this one event as an iCalendar file (the "Add to calendar" link).
pub async fn calendar(
    State(s): State<Arc<Schedule>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ScheduleError> {
    let name = s.settings.get().instance.name.clone();
    let Some(e) = find(&s, id).await? else { return Ok(not_found(&headers, &name)) };
    let mut resp = ics::calendar(std::slice::from_ref(&e), Utc::now()).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/calendar; charset=utf-8"));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{}.ics\"", e.id.replace('"', ""))) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration_text(1), "1 minute");
        assert_eq!(duration_text(60), "1 hour");
        assert_eq!(duration_text(150), "2 hours 30 minutes");
        assert_eq!(esc("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
    }
}
