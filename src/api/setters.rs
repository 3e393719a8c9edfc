//! Admin config setters: `POST /api/admin/config/<name>` with `{"value": ...}`, answered with a
//! StatusResponse.
//!
//! `SETTERS` is the one table of the plain setters: path, documented value shape, and a function that
//! validates the value and applies it to a copy of the settings. The settings store persists the copy
//! only if that succeeds. The few setters with side effects (admin password hashing, logo and favicon
//! files) have their own handlers below. After every change a CONFIG_CHANGED event is published, and
//! STREAM_TITLE_UPDATED for the stream title, as Owncast does.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::http::Method;
use axum::Json;
use base64::Engine;
use serde_json::Value;

use super::admin::MASKED;
use super::Server;
use crate::config::validate::{self, ValidationError};
use crate::config::{BrowserNotification, DiscordNotification, Settings};
use crate::events::Event;
use crate::http::{setter_value, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};

const GROUP: &str = "admin";
/// Longest free text (page content, custom CSS/JS).
const LONG_TEXT: usize = 200_000;
/// Largest logo or favicon, decoded.
const MAX_IMAGE_BYTES: usize = 2 * 1024 * 1024;
const MAX_FAVICON_BYTES: usize = 200 * 1024;

type Apply = fn(&Server, &Value, &mut Settings) -> Result<(), ValidationError>;

/// One plain setter.
pub struct Setter {
    pub name: &'static str,
    pub summary: &'static str,
    pub value: ValueDoc,
    pub apply: Apply,
    /// Takes effect only after a restart (ports, addresses).
    pub needs_restart: bool,
}

const fn setter(name: &'static str, summary: &'static str, value: ValueDoc, apply: Apply) -> Setter {
    Setter { name, summary, value, apply, needs_restart: false }
}

const fn restart_setter(name: &'static str, summary: &'static str, value: ValueDoc, apply: Apply) -> Setter {
    Setter { name, summary, value, apply, needs_restart: true }
}

/// Store a validated value in its settings field.
fn set<T>(slot: &mut T, value: Result<T, ValidationError>) -> Result<(), ValidationError> {
    *slot = value?;
    Ok(())
}

fn tags(v: &Value) -> Result<Vec<String>, ValidationError> {
    let list = validate::string_list(v, 50)?;
    if list.iter().any(|t| t.chars().count() > 64) {
        return Err(ValidationError("a tag may be at most 64 characters".into()));
    }
    Ok(list)
}

/// The slur filter's extra words: each one word (no spaces), at most 64 characters, kept lowercase.
fn slur_words(v: &Value) -> Result<Vec<String>, ValidationError> {
    let list = validate::string_list(v, 1000)?;
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for w in list {
        if w.chars().count() > 64 || w.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ValidationError(format!("'{w}' is not a single word of at most 64 characters")));
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
    }
    Ok(out)
}

fn needs_server_url(s: &Settings, what: &str) -> Result<(), ValidationError> {
    if s.server_url.is_empty() {
        return Err(ValidationError(format!("set the server URL (serverurl) before enabling {what}")));
    }
    Ok(())
}

use ValueDoc::{Boolean, Json as JsonSchema, Schema, String as Str, StringMap};

/// An http(s) URL that `validate::url` takes (a regular expression, without anchors).
/// The last host label starts with a letter (a name ending in a number would be read as IPv4).
macro_rules! url_re {
    () => {
        r"https?://([A-Za-z0-9]+[.-])*[A-Za-z][A-Za-z0-9]*(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*"
    };
}

// The documented value of each setter: the constraints its validation applies (see `validate`).
const TEXT_500: &str = r#"{"type":"string","maxLength":500}"#;
const TEXT_4000: &str = r#"{"type":"string","maxLength":4000}"#;
const LONG_TEXT_SCHEMA: &str = r#"{"type":"string","maxLength":200000}"#;
const TAGS: &str = r#"{"type":"array","maxItems":50,"items":{"type":"string","maxLength":64}}"#;
const NAME_LIST: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string"}}"#;
const SLUR_WORDS: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string","pattern":"^\\s*[^\\s\\x00-\\x1f\\x7f-\\x9f]{0,64}\\s*$"}}"#;
const DOMAINS: &str = r#"{"type":"array","maxItems":1000,"items":{"type":"string","pattern":"^\\s*([A-Za-z0-9-]*\\.[A-Za-z0-9.-]*)?\\s*$"}}"#;
const URL_OR_EMPTY: &str = concat!(r#"{"type":"string","maxLength":2048,"pattern":"^("#, url_re!(), r#")?$"}"#);
const SOCKET_URL: &str = r#"{"type":"string","maxLength":2048,"pattern":"^((wss?|https?)://([A-Za-z0-9]+[.-])*[A-Za-z][A-Za-z0-9]*(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*)?$"}"#;
const PORT: &str = r#"{"type":"integer","minimum":1,"maximum":65535}"#;
/// A port, or 0 for off (the SRT server).
const PORT_OR_OFF: &str = r#"{"type":"integer","minimum":0,"maximum":65535}"#;
/// SRT's passphrase rule (10-79 characters; printable ASCII so it fits an `srt://` URL), or empty.
const SRT_PASSPHRASE: &str = r#"{"type":"string","pattern":"^([\\x20-\\x7e]{10,79})?$"}"#;
const IP: &str = r#"{"type":"string","pattern":"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"}"#;
const AUTOPLAY: &str = r#"{"anyOf":[{"type":"boolean"},{"type":"string","enum":["on","off","muted"]}]}"#;
const CODEC: &str = r#"{"type":"string","pattern":"^[A-Za-z0-9_]{1,64}$"}"#;
const STREAM_KEYS: &str = r#"{"type":"array","minItems":1,"items":{"type":"object","required":["key"],"properties":{
  "key":{"type":"string","maxLength":256,"pattern":"^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$"},
  "comment":{"type":"string"}}}}"#;
const VARIANTS: &str = r#"{"type":"array","minItems":1,"maxItems":10,"items":{"type":"object","properties":{
  "name":{"type":"string"},"videoPassthrough":{"type":"boolean"},"audioPassthrough":{"type":"boolean"},
  "videoBitrate":{"type":"integer","minimum":0,"maximum":100000},
  "audioBitrate":{"type":"integer","minimum":0,"maximum":1000},
  "scaledWidth":{"type":"integer","minimum":0,"maximum":7680,"multipleOf":2},
  "scaledHeight":{"type":"integer","minimum":0,"maximum":4320,"multipleOf":2},
  "framerate":{"type":"integer","minimum":0,"maximum":120},
  "cpuUsageLevel":{"type":"integer","minimum":0,"maximum":4}}}}"#;
const SOCIAL_HANDLES: &str = concat!(
    r#"{"type":"array","items":{"type":"object","required":["platform","url"],"properties":{
  "platform":{"type":"string","pattern":"\\S"},"icon":{"type":"string"},
  "url":{"type":"string","pattern":"^"#,
    url_re!(),
    r#"$"}}}}"#
);
const EXTERNAL_ACTIONS: &str = concat!(
    r#"{"type":"array","items":{"type":"object","required":["title"],"properties":{
  "title":{"type":"string","pattern":"\\S"},"url":{"type":"string"},"html":{"type":"string"},
  "description":{"type":"string"},"icon":{"type":"string"},"color":{"type":"string"},"openExternally":{"type":"boolean"}},
  "anyOf":[{"required":["url"],"properties":{"url":{"pattern":"^"#,
    url_re!(),
    r#"$"}}},
    {"required":["html"],"properties":{"html":{"pattern":"\\S"},"url":{"pattern":"^\\s*$"}}}]}}"#
);
const S3: &str = concat!(
    r#"{"type":"object","properties":{"enabled":{"type":"boolean"},"endpoint":{"type":"string"},
  "accessKey":{"type":"string"},"secret":{"type":"string"},"bucket":{"type":"string"},"region":{"type":"string"},
  "acl":{"type":"string"},"pathPrefix":{"type":"string"},"forcePathStyle":{"type":"boolean"}},
  "anyOf":[{"properties":{"enabled":{"const":false}}},
    {"required":["endpoint","bucket","accessKey","secret"],"properties":{"endpoint":{"pattern":"^"#,
    url_re!(),
    r#"$"},
      "bucket":{"pattern":"\\S"},"accessKey":{"minLength":1},"secret":{"minLength":1}}}]}"#
);
const DISCORD: &str = concat!(
    r#"{"type":"object","properties":{"enabled":{"type":"boolean"},"goLiveMessage":{"type":"string"},
  "webhook":{"type":"string","pattern":"^("#,
    url_re!(),
    r#")?$"}}}"#
);

/// Every plain setter, by path under `/api/admin/config/`.
pub static SETTERS: &[Setter] = &[
    setter("name", "Server name", JsonSchema(r#"{"type":"string","maxLength":255}"#), |_, v, s| {
        set(&mut s.name, validate::string(v, 255))
    }),
    setter("serversummary", "Server summary", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.summary, validate::string(v, 4000))
    }),
    setter("streamtitle", "Stream title", JsonSchema(r#"{"type":"string","maxLength":255}"#), |_, v, s| {
        set(&mut s.stream_title, validate::string(v, 255))
    }),
    setter("welcomemessage", "Chat welcome message", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.welcome_message, validate::string(v, 4000))
    }),
    setter("offlinemessage", "Offline message (markdown)", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.offline_message, validate::string(v, 4000))
    }),
    setter("pagecontent", "Extra page content (markdown)", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.extra_page_content, validate::string(v, LONG_TEXT))
    }),
    setter("tags", "Tags", JsonSchema(TAGS), |_, v, s| set(&mut s.tags, tags(v))),
    setter("nsfw", "Mark the stream as NSFW", Boolean, |_, v, s| set(&mut s.nsfw, validate::boolean(v))),
    setter("customstyles", "Custom CSS", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.custom_styles, validate::string(v, LONG_TEXT))
    }),
    setter("customjavascript", "Custom JavaScript", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.custom_javascript, validate::string(v, LONG_TEXT))
    }),
    setter("appearance", "Appearance variables", StringMap, |_, v, s| {
        set(&mut s.appearance_variables, validate::typed(v, "appearance variables (expected an object of strings)"))
    }),
    setter("socialhandles", "Social handles", JsonSchema(SOCIAL_HANDLES), |_, v, s| {
        set(&mut s.social_handles, validate::social_handles(v))
    }),
    setter("externalactions", "External actions", JsonSchema(EXTERNAL_ACTIONS), |_, v, s| {
        set(&mut s.external_actions, validate::external_actions(v))
    }),
    setter("streamkeys", "Stream keys", JsonSchema(STREAM_KEYS), |_, v, s| {
        set(&mut s.stream_keys, validate::stream_keys(v))
    }),
    setter("video/streamoutputvariants", "Output quality variants", JsonSchema(VARIANTS), |_, v, s| {
        set(&mut s.video_quality_variants, validate::variants(v))
    }),
    setter(
        "video/streamlatencylevel",
        "Latency level 0 (lowest) to 4",
        JsonSchema(r#"{"type":"integer","minimum":0,"maximum":4}"#),
        |_, v, s| {
            // The range check makes the narrowing exact.
            set(&mut s.latency_level, validate::integer(v, 0, 4).map(|n| n as u32))
        },
    ),
    setter("video/codec", "Video encoder: auto or an available encoder name", JsonSchema(CODEC), |server, v, s| {
        let wanted = validate::string(v, 64)?;
        let available = server.available_codecs();
        if wanted != "auto" && !available.contains(&wanted) {
            return Err(ValidationError(format!(
                "encoder '{wanted}' is not available on this server; available: auto, {}",
                available.join(", ")
            )));
        }
        s.video_codec = wanted;
        Ok(())
    }),
    setter("chat/disable", "Disable chat", Boolean, |_, v, s| set(&mut s.chat_disabled, validate::boolean(v))),
    setter("chat/joinmessagesenabled", "Show join and part messages", Boolean, |_, v, s| {
        set(&mut s.chat_join_messages_enabled, validate::boolean(v))
    }),
    setter("chat/establishedusermode", "Only established users may chat", Boolean, |_, v, s| {
        set(&mut s.chat_established_user_mode, validate::boolean(v))
    }),
    setter("chat/spamprotectionenabled", "Chat flood protection", Boolean, |_, v, s| {
        set(&mut s.chat_spam_protection_enabled, validate::boolean(v))
    }),
    setter("chat/slurfilterenabled", "Chat slur filter", Boolean, |_, v, s| {
        set(&mut s.chat_slur_filter_enabled, validate::boolean(v))
    }),
    setter(
        "chat/slurfilterwords",
        "Words the chat slur filter masks besides its built-in list (castd)",
        JsonSchema(SLUR_WORDS),
        |_, v, s| set(&mut s.chat_slur_filter_words, slur_words(v)),
    ),
    setter("chat/requireauthentication", "Require authentication to chat", Boolean, |_, v, s| {
        set(&mut s.chat_require_authentication, validate::boolean(v))
    }),
    setter("chat/forbiddenusernames", "Forbidden chat names", JsonSchema(NAME_LIST), |_, v, s| {
        set(&mut s.forbidden_usernames, validate::string_list(v, 1000))
    }),
    setter("chat/suggestedusernames", "Suggested chat names", JsonSchema(NAME_LIST), |_, v, s| {
        set(&mut s.suggested_usernames, validate::string_list(v, 1000))
    }),
    setter("hideviewercount", "Hide the viewer count", Boolean, |_, v, s| {
        set(&mut s.hide_viewer_count, validate::boolean(v))
    }),
    setter("disablesearchindexing", "Ask search engines not to index", Boolean, |_, v, s| {
        set(&mut s.disable_search_indexing, validate::boolean(v))
    }),
    setter(
        "sockethostoverride",
        "Chat websocket host override (ws, wss, http or https URL, or empty)",
        JsonSchema(SOCKET_URL),
        |_, v, s| set(&mut s.socket_host_override, validate::socket_url(v)),
    ),
    setter("videoservingendpoint", "Video serving endpoint (URL or empty)", JsonSchema(URL_OR_EMPTY), |_, v, s| {
        set(&mut s.video_serving_endpoint, validate::url(v, true))
    }),
    setter("serverurl", "Public URL of this server (or empty)", JsonSchema(URL_OR_EMPTY), |_, v, s| {
        set(&mut s.server_url, validate::url(v, true))
    }),
    setter(
        "directoryurl",
        "Directory (YP) service URL (castd; empty = Owncast's directory)",
        JsonSchema(URL_OR_EMPTY),
        |_, v, s| set(&mut s.directory_url, validate::url(v, true)),
    ),
    // Accepted without a server URL, as Owncast does; the admin health message warns until it is set.
    setter("directoryenabled", "List in the directory (listed once serverurl is set)", Boolean, |_, v, s| {
        set(&mut s.directory_enabled, validate::boolean(v))
    }),
    setter("s3", "Object storage settings", JsonSchema(S3), |_, v, s| {
        let mut next = validate::s3(v)?;
        if next.secret == MASKED {
            next.secret = s.s3.secret.clone();
        }
        set(&mut s.s3, Ok(next))
    }),
    setter("notifications/browser", "Browser push notifications", Schema("BrowserNotification"), |_, v, s| {
        let n: BrowserNotification = validate::typed(v, "browser notification settings")?;
        set(&mut s.browser_notifications, Ok(n))
    }),
    setter("notifications/discord", "Discord go-live notification", JsonSchema(DISCORD), |_, v, s| {
        let mut n: DiscordNotification = validate::typed(v, "discord notification settings")?;
        // Enabled without a webhook sends nothing (accepted, as a half-filled form is).
        if !n.webhook.trim().is_empty() {
            n.webhook = validate::url(&Value::String(n.webhook.clone()), false)?;
        }
        set(&mut s.discord_notifications, Ok(n))
    }),
    setter("federation/enable", "Enable federation (400 until serverurl is set)", Boolean, |_, v, s| {
        let on = validate::boolean(v)?;
        if on {
            needs_server_url(s, "federation")?;
        }
        set(&mut s.federation_enabled, Ok(on))
    }),
    setter("federation/private", "Approve followers by hand", Boolean, |_, v, s| {
        set(&mut s.federation_private, validate::boolean(v))
    }),
    setter(
        "federation/username",
        "Fediverse user name",
        JsonSchema(r#"{"type":"string","pattern":"^[A-Za-z0-9_]{1,30}$"}"#),
        |_, v, s| set(&mut s.federation_username, validate::federation_username(v)),
    ),
    setter("federation/livemessage", "Fediverse go-live message", JsonSchema(TEXT_500), |_, v, s| {
        set(&mut s.federation_go_live_message, validate::string(v, 500))
    }),
    setter("federation/showengagement", "Show fediverse engagement in chat", Boolean, |_, v, s| {
        set(&mut s.federation_show_engagement, validate::boolean(v))
    }),
    setter("federation/enablequotes", "Allow quote posts", Boolean, |_, v, s| {
        set(&mut s.federation_enable_quotes, validate::boolean(v))
    }),
    setter("federation/hidefollowers", "Hide the followers tab", Boolean, |_, v, s| {
        set(&mut s.federation_hide_followers, validate::boolean(v))
    }),
    setter("federation/blockdomains", "Blocked fediverse domains", JsonSchema(DOMAINS), |_, v, s| {
        set(&mut s.federation_blocked_domains, validate::domains(v))
    }),
    setter(
        "ffmpegpath",
        "Path of the ffmpeg binary (absolute, or empty; castd transcodes in-process)",
        JsonSchema(r#"{"type":"string","maxLength":4096,"pattern":"^(/.*)?$"}"#),
        |_, v, s| {
            let p = validate::string(v, 4096)?;
            let path = std::path::Path::new(&p);
            if !p.is_empty() && (!path.is_absolute() || !path.is_file()) {
                return Err(ValidationError(format!("'{p}' is not an absolute path to an existing file")));
            }
            set(&mut s.ffmpeg_path, Ok(p))
        },
    ),
    restart_setter("rtmpserverport", "RTMP port", JsonSchema(PORT), |_, v, s| {
        set(&mut s.rtmp_server_port, validate::port(v))
    }),
    restart_setter("srtserverport", "SRT port (0: no SRT)", JsonSchema(PORT_OR_OFF), |_, v, s| {
        set(&mut s.srt_server_port, validate::integer(v, 0, 65535).map(|n| n as u16))
    }),
    setter(
        "srt/passphrase",
        "SRT encryption passphrase (10-79 characters; empty: none)",
        JsonSchema(SRT_PASSPHRASE),
        |_, v, s| {
            let p = validate::string(v, 79)?;
            if !p.is_empty() && (p.len() < 10 || !p.bytes().all(|b| (0x20..0x7f).contains(&b))) {
                return Err(ValidationError(
                    "an SRT passphrase is 10 to 79 printable ASCII characters (or empty for none)".into(),
                ));
            }
            set(&mut s.srt_passphrase, Ok(p))
        },
    ),
    restart_setter("rtmpserverbindaddress", "RTMP bind address", JsonSchema(IP), |_, v, s| {
        set(&mut s.rtmp_server_bind_address, validate::ip_address(v))
    }),
    restart_setter("webserverport", "Web port", JsonSchema(PORT), |_, v, s| {
        set(&mut s.web_server_port, validate::port(v))
    }),
    restart_setter("webserverip", "Web bind address", JsonSchema(IP), |_, v, s| {
        set(&mut s.web_server_ip, validate::ip_address(v))
    }),
    setter("autoplay", "Autoplay: on, off or muted (or a boolean)", JsonSchema(AUTOPLAY), |_, v, s| {
        let mode = match v {
            Value::Bool(true) => "on".to_string(),
            Value::Bool(false) => "off".to_string(),
            other => validate::string(other, 16)?,
        };
        if !matches!(mode.as_str(), "on" | "off" | "muted") {
            return Err(ValidationError(format!("autoplay must be on, off or muted, not '{mode}'")));
        }
        set(&mut s.autoplay, Ok(mode))
    }),
    // The schedule's setters (`schedule/*`) are the schedule module's.
];

/// Publish what a successful change means to the rest of the daemon.
fn announce(server: &Server, name: &str) {
    server.bus.publish(Event::ConfigChanged { key: name.to_string() });
    if name == "streamtitle" {
        let state = server.stream.borrow().clone();
        let event = crate::stream::stream_event(&server.settings.get(), &state, &server.viewers);
        server.bus.publish(Event::StreamTitleUpdated(event));
    }
}

async fn apply_setter(
    server: Arc<Server>,
    setter: &'static Setter,
    body: Bytes,
) -> Result<Json<StatusResponse>, ApiError> {
    apply(&server, setter, setter_value(&body)?).await
}

/// Validate and save `value` with `setter`, then announce the change.
async fn apply(server: &Arc<Server>, setter: &'static Setter, value: Value) -> Result<Json<StatusResponse>, ApiError> {
    let server2 = server.clone();
    server.settings.update::<ApiError, _>(|s| Ok((setter.apply)(&server2, &value, s)?)).await?;
    announce(server, setter.name);
    let msg = if setter.needs_restart {
        format!("{} saved; it takes effect when castd restarts", setter.name)
    } else {
        format!("{} changed", setter.name)
    };
    Ok(StatusResponse::ok(msg))
}

/// Apply the plain setter called `name` (for other routes that change the same setting, such as the
/// integrations API's stream title).
pub async fn apply_named(server: &Arc<Server>, name: &str, value: Value) -> Result<Json<StatusResponse>, ApiError> {
    let setter =
        SETTERS.iter().find(|s| s.name == name).ok_or_else(|| ApiError::Internal(format!("no setter {name}")))?;
    apply(server, setter, value).await
}

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    let mut reg = reg.scope(server);
    reg.schema::<crate::config::StreamKey>();
    reg.schema::<crate::config::StreamOutputVariant>();
    reg.schema::<crate::config::SocialHandle>();
    reg.schema::<crate::config::ExternalAction>();
    reg.schema::<crate::config::S3Info>();
    reg.schema::<BrowserNotification>();
    reg.schema::<DiscordNotification>();
    for setter in SETTERS {
        let path = format!("/api/admin/config/{}", setter.name);
        reg.post(
            &path,
            GROUP,
            Auth::Admin,
            setter.summary,
            BodyDoc::Value(setter.value),
            move |State(server): State<Arc<Server>>, body: Bytes| apply_setter(server, setter, body),
        );
    }
    let password = JsonSchema(r#"{"type":"string","minLength":1,"maxLength":72}"#);
    reg.post("/api/admin/config/adminpass", GROUP, Auth::Admin, "Admin password", BodyDoc::Value(password), admin_pass);
    reg.post(
        "/api/admin/config/logo",
        GROUP,
        Auth::Admin,
        "Logo (base64 image or data URL)",
        BodyDoc::Value(Str),
        logo,
    );
    reg.post(
        "/api/admin/config/favicon",
        GROUP,
        Auth::Admin,
        "Favicon (PNG or ICO upload)",
        BodyDoc::MultipartFile("favicon"),
        favicon,
    );
    reg.route(
        Method::DELETE,
        "/api/admin/config/favicon",
        GROUP,
        Auth::Admin,
        "Reset the favicon",
        BodyDoc::None,
        reset_favicon,
    );
}

/// Any non-empty password, as Owncast takes it (its default is `abc123`); a weak one is saved with
/// the weak flag, which the security warnings report. bcrypt uses at most 72 bytes, so a longer
/// password is refused rather than silently cut.
async fn admin_pass(State(server): State<Arc<Server>>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let pw = validate::string(&setter_value(&body)?, 256)?;
    if pw.is_empty() {
        return Err(ApiError::bad("the admin password must not be empty"));
    }
    if pw.len() > crate::password::MAX_PASSWORD_BYTES {
        return Err(ApiError::bad(format!(
            "the admin password may be at most {} bytes long",
            crate::password::MAX_PASSWORD_BYTES
        )));
    }
    let weak = crate::password::is_weak(&pw);
    let hash = tokio::task::spawn_blocking(move || crate::password::hash(&pw))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.admin_password_hash = hash;
            s.admin_password_weak = weak;
            Ok(())
        })
        .await?;
    announce(&server, "adminpass");
    Ok(StatusResponse::ok("admin password changed"))
}

/// Decode `data:<type>;base64,<data>` or bare base64.
fn decode_base64_image(s: &str) -> Result<Vec<u8>, ApiError> {
    let data = match s.split_once(";base64,") {
        Some((prefix, data)) if prefix.starts_with("data:") => data,
        _ => s,
    };
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| ApiError::bad(format!("the image is not valid base64: {e}")))
}

/// Write `bytes` as `<data-dir>/<stem>.<ext>` through a temporary file, so a crash never leaves half.
async fn store_upload(server: &Server, stem: &str, ext: &str, bytes: &[u8]) -> Result<String, ApiError> {
    let name = format!("{stem}.{ext}");
    let tmp = server.data_dir.join(format!(".{name}.tmp"));
    tokio::fs::write(&tmp, bytes).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    tokio::fs::rename(&tmp, server.data_dir.join(&name)).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(name)
}

async fn logo(State(server): State<Arc<Server>>, body: Bytes) -> Result<Json<StatusResponse>, ApiError> {
    let encoded = validate::string(&setter_value(&body)?, MAX_IMAGE_BYTES * 2)?;
    let bytes = decode_base64_image(&encoded)?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ApiError::bad("the logo is too large (at most 2 MB)"));
    }
    let Some((_, ext)) = super::public::image_type(&bytes) else {
        return Err(ApiError::bad("the logo must be a PNG, JPEG, GIF, WebP or SVG image"));
    };
    let name = store_upload(&server, "logo", ext, &bytes).await?;
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.logo = name;
            Ok(())
        })
        .await?;
    announce(&server, "logo");
    Ok(StatusResponse::ok("logo changed"))
}

async fn favicon(
    State(server): State<Arc<Server>>,
    form: Result<Multipart, MultipartRejection>,
) -> Result<Json<StatusResponse>, ApiError> {
    // Not a multipart upload at all (no body, another content type): there is no file.
    let Ok(mut form) = form else {
        return Err(ApiError::bad("no file provided"));
    };
    let mut data = None;
    while let Some(field) = form.next_field().await.map_err(|e| ApiError::bad(format!("invalid upload: {e}")))? {
        if field.name() == Some("favicon") {
            let bytes = field.bytes().await.map_err(|e| ApiError::bad(format!("invalid upload: {e}")))?;
            data = Some(bytes);
        }
    }
    let Some(bytes) = data.filter(|b| !b.is_empty()) else {
        return Err(ApiError::bad("no file provided"));
    };
    if bytes.len() > MAX_FAVICON_BYTES {
        return Err(ApiError::bad("file too large, max 200KB"));
    }
    let ext = match super::public::image_type(&bytes) {
        Some((_, ext @ ("png" | "ico"))) => ext,
        _ => return Err(ApiError::bad("favicon must be PNG or ICO format")),
    };
    let name = store_upload(&server, "favicon", ext, &bytes).await?;
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.favicon = name;
            Ok(())
        })
        .await?;
    announce(&server, "favicon");
    Ok(StatusResponse::ok("favicon updated"))
}

async fn reset_favicon(State(server): State<Arc<Server>>) -> Result<Json<StatusResponse>, ApiError> {
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.favicon = String::new();
            Ok(())
        })
        .await?;
    announce(&server, "favicon");
    Ok(StatusResponse::ok("favicon reset"))
}
