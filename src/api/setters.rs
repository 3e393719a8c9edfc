//! The server feature's admin config setters: the instance details and the server settings
//! (`POST /api/admin/config/<name>` with `{"value": ...}`, answered with a StatusResponse).
//!
//! `SETTERS` is the table of this feature's plain setters (see `http::setters`); the video settings'
//! are `api::video`'s, and every other feature registers its own (chat, federation, notifications,
//! storage, directory, schedule). The few setters with side effects (admin password hashing, logo and
//! favicon files) have their own handlers below. The settings store announces every change itself;
//! the stream title's setter also publishes STREAM_TITLE_UPDATED after every call, as Owncast does.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, State};
use axum::http::Method;
use axum::Json;
use base64::Engine;
use serde_json::Value;

use super::Server;
use crate::config::validate::{self, url_re, ValidationError, URL_OR_EMPTY_SCHEMA};
use crate::events::Event;
use crate::http::setters::{self, set, Setter, SettingsHost};
use crate::http::{setter_value, ApiError, Auth, BodyDoc, Registry, StatusResponse, ValueDoc};
use crate::store::settings::SettingsStore;

const GROUP: &str = "admin";
/// Longest free text (page content, custom CSS/JS).
const LONG_TEXT: usize = 200_000;
/// Largest logo or favicon, decoded.
const MAX_IMAGE_BYTES: usize = 2 * 1024 * 1024;
const MAX_FAVICON_BYTES: usize = 200 * 1024;

fn tags(v: &Value) -> Result<Vec<String>, ValidationError> {
    let list = validate::string_list(v, 50)?;
    if list.iter().any(|t| t.chars().count() > 64) {
        return Err(ValidationError("a tag may be at most 64 characters".into()));
    }
    Ok(list)
}

use ValueDoc::{Boolean, Json as JsonSchema, String as Str, StringMap};

// The documented value of each setter: the constraints its validation applies (see `validate`).
const TEXT_4000: &str = r#"{"type":"string","maxLength":4000}"#;
const LONG_TEXT_SCHEMA: &str = r#"{"type":"string","maxLength":200000}"#;
const TAGS: &str = r#"{"type":"array","maxItems":50,"items":{"type":"string","maxLength":64}}"#;
const SOCKET_URL: &str = r#"{"type":"string","maxLength":2048,"pattern":"^((wss?|https?)://([A-Za-z0-9]+[.-])*[A-Za-z][A-Za-z0-9]*(:[0-9]{1,4})?(/[A-Za-z0-9._~-]*)*)?$"}"#;
const PORT: &str = r#"{"type":"integer","minimum":1,"maximum":65535}"#;
const IP: &str = r#"{"type":"string","pattern":"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"}"#;
const AUTOPLAY: &str = r#"{"anyOf":[{"type":"boolean"},{"type":"string","enum":["on","off","muted"]}]}"#;
const STREAM_KEYS: &str = r#"{"type":"array","minItems":1,"items":{"type":"object","required":["key"],"properties":{
  "key":{"type":"string","maxLength":256,"pattern":"^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f][^\\x00-\\x1f\\x7f-\\x9f]*$"},
  "comment":{"type":"string"}}}}"#;
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

/// The server feature's plain setters (instance details and server settings), by path under
/// `/api/admin/config/`.
pub static SETTERS: &[Setter<Server>] = &[
    Setter::new("name", "Server name", JsonSchema(r#"{"type":"string","maxLength":255}"#), |_, v, s| {
        set(&mut s.instance.name, validate::string(v, 255))
    }),
    Setter::new("serversummary", "Server summary", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.instance.summary, validate::string(v, 4000))
    }),
    Setter::new("streamtitle", "Stream title", JsonSchema(r#"{"type":"string","maxLength":255}"#), |_, v, s| {
        set(&mut s.instance.stream_title, validate::string(v, 255))
    })
    .after(Server::stream_title_updated),
    Setter::new("welcomemessage", "Chat welcome message", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.instance.welcome_message, validate::string(v, 4000))
    }),
    Setter::new("offlinemessage", "Offline message (markdown)", JsonSchema(TEXT_4000), |_, v, s| {
        set(&mut s.instance.offline_message, validate::string(v, 4000))
    }),
    Setter::new("pagecontent", "Extra page content (markdown)", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.instance.extra_page_content, validate::string(v, LONG_TEXT))
    }),
    Setter::new("tags", "Tags", JsonSchema(TAGS), |_, v, s| set(&mut s.instance.tags, tags(v))),
    Setter::new("nsfw", "Mark the stream as NSFW", Boolean, |_, v, s| set(&mut s.instance.nsfw, validate::boolean(v))),
    Setter::new("customstyles", "Custom CSS", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.instance.custom_styles, validate::string(v, LONG_TEXT))
    }),
    Setter::new("customjavascript", "Custom JavaScript", JsonSchema(LONG_TEXT_SCHEMA), |_, v, s| {
        set(&mut s.instance.custom_javascript, validate::string(v, LONG_TEXT))
    })
    .guard(Server::server_admins_script),
    Setter::new("appearance", "Appearance variables", StringMap, |_, v, s| {
        set(
            &mut s.instance.appearance_variables,
            validate::typed(v, "appearance variables (expected an object of strings)"),
        )
    }),
    Setter::new("socialhandles", "Social handles", JsonSchema(SOCIAL_HANDLES), |_, v, s| {
        set(&mut s.instance.social_handles, validate::social_handles(v))
    }),
    Setter::new("externalactions", "External actions", JsonSchema(EXTERNAL_ACTIONS), |_, v, s| {
        set(&mut s.instance.external_actions, validate::external_actions(v))
    }),
    Setter::new("streamkeys", "Stream keys", JsonSchema(STREAM_KEYS), |server: &Server, v, s| {
        let keys = validate::stream_keys(v)?;
        // A key names the channel it publishes to: unique across the server.
        if let Some(k) = keys.iter().find(|k| (server.key_taken)(&k.key)) {
            let shown: String = k.key.chars().take(4).collect();
            return Err(ValidationError(format!(
                "the stream key {shown}… is another channel's: stream keys are unique across the server"
            )));
        }
        set(&mut s.server.stream_keys, Ok(keys))
    })
    .guard(Server::stream_key_guesses),
    Setter::new("hideviewercount", "Hide the viewer count", Boolean, |_, v, s| {
        set(&mut s.instance.hide_viewer_count, validate::boolean(v))
    }),
    Setter::new("disablesearchindexing", "Ask search engines not to index", Boolean, |_, v, s| {
        set(&mut s.instance.disable_search_indexing, validate::boolean(v))
    }),
    Setter::new(
        "sockethostoverride",
        "Chat websocket host override (ws, wss, http or https URL, or empty)",
        JsonSchema(SOCKET_URL),
        |_, v, s| set(&mut s.server.socket_host_override, validate::socket_url(v)),
    )
    .server_wide(),
    Setter::new(
        "videoservingendpoint",
        "Video serving endpoint (URL or empty)",
        JsonSchema(URL_OR_EMPTY_SCHEMA),
        |_, v, s| set(&mut s.server.video_serving_endpoint, validate::url(v, true)),
    )
    .server_wide(),
    Setter::new("serverurl", "Public URL of this server (or empty)", JsonSchema(URL_OR_EMPTY_SCHEMA), |_, v, s| {
        set(&mut s.server.server_url, validate::url(v, true))
    })
    .server_wide(),
    Setter::new(
        "ffmpegpath",
        "Path of the ffmpeg binary (absolute, or empty; castd transcodes in-process)",
        JsonSchema(r#"{"type":"string","maxLength":4096,"pattern":"^(/.*)?$"}"#),
        |_, v, s| {
            let p = validate::string(v, 4096)?;
            let path = std::path::Path::new(&p);
            if !p.is_empty() && (!path.is_absolute() || !path.is_file()) {
                return Err(ValidationError(format!("'{p}' is not an absolute path to an existing file")));
            }
            set(&mut s.server.ffmpeg_path, Ok(p))
        },
    )
    .server_wide(),
    Setter::restart("rtmpserverport", "RTMP port", JsonSchema(PORT), |_, v, s| {
        set(&mut s.server.rtmp_server_port, validate::port(v))
    })
    .server_wide(),
    Setter::restart("rtmpserverbindaddress", "RTMP bind address", JsonSchema(IP), |_, v, s| {
        set(&mut s.server.rtmp_server_bind_address, validate::ip_address(v))
    })
    .server_wide(),
    Setter::restart("webserverport", "Web port", JsonSchema(PORT), |_, v, s| {
        set(&mut s.server.web_server_port, validate::port(v))
    })
    .server_wide(),
    Setter::restart("webserverip", "Web bind address", JsonSchema(IP), |_, v, s| {
        set(&mut s.server.web_server_ip, validate::ip_address(v))
    })
    .server_wide(),
    // The server's capacity (`media::capacity`): server-wide, the default channel's settings.
    Setter::new(
        "server/maxlivechannels",
        "The most channels live at once (0: no limit); beyond it a publisher is refused or served as passthrough",
        JsonSchema(r#"{"type":"integer","minimum":0,"maximum":10000}"#),
        |_, v, s| set(&mut s.server.max_live_channels, validate::integer(v, 0, 10_000).map(|n| n as u32)),
    )
    .server_wide(),
    Setter::new(
        "server/overcapacity",
        "What happens to a publisher beyond the server's capacity: refuse, or passthrough (no ladder)",
        JsonSchema(r#"{"type":"string","enum":["refuse","passthrough"]}"#),
        |_, v, s| {
            let mode = match validate::string(v, 16)?.as_str() {
                "refuse" => crate::config::OverCapacity::Refuse,
                "passthrough" => crate::config::OverCapacity::Passthrough,
                other => {
                    return Err(ValidationError(format!("overcapacity must be refuse or passthrough, not '{other}'")))
                }
            };
            set(&mut s.server.over_capacity, Ok(mode))
        },
    )
    .server_wide(),
    Setter::new(
        "server/transcodebudget",
        "Encoded pixels per second the server transcodes in real time, over every live channel's encoded rungs \
         (width x height x fps); 0: from the CPU cores",
        JsonSchema(r#"{"type":"integer","minimum":0,"maximum":1000000000000}"#),
        |_, v, s| set(&mut s.server.transcode_budget, validate::integer(v, 0, 1_000_000_000_000).map(|n| n as u64)),
    )
    .server_wide(),
    // Where channels' URLs may lead (`outbound::Reach`): the server admin's decision alone.
    Setter::new(
        "allowprivatetargets",
        "Whether the URLs channel admins set (webhooks, admission hook, JWKS, Discord, simulcast) may reach \
         loopback and private addresses (default false; link-local and reserved ranges stay refused)",
        Boolean,
        |_, v, s| set(&mut s.server.allow_private_targets, validate::boolean(v)),
    )
    .server_wide(),
    Setter::new("autoplay", "Autoplay: on, off or muted (or a boolean)", JsonSchema(AUTOPLAY), |_, v, s| {
        let mode = match v {
            Value::Bool(true) => "on".to_string(),
            Value::Bool(false) => "off".to_string(),
            other => validate::string(other, 16)?,
        };
        if !matches!(mode.as_str(), "on" | "off" | "muted") {
            return Err(ValidationError(format!("autoplay must be on, off or muted, not '{mode}'")));
        }
        set(&mut s.instance.autoplay, Ok(mode))
    }),
];

impl SettingsHost for Server {
    fn settings_store(&self) -> &SettingsStore {
        &self.settings
    }

    fn is_channel(&self) -> bool {
        !self.channel.is_default()
    }
}

impl Server {
    /// Before a channel's `streamkeys` call: each key that is not already the channel's is a guess the
    /// uniqueness check would answer ("another channel's"), counted against the channel
    /// ([`Server::key_guesses`]); past the limit the call is 429 before any key is looked at. The
    /// default channel's admin is the server admin, who may read every channel's keys anyway.
    fn stream_key_guesses(&self, v: &Value) -> Result<(), ApiError> {
        if !self.is_channel() {
            return Ok(());
        }
        // A value that is not a list of keys is refused by the setter itself, without a check.
        let Ok(keys) = validate::stream_keys(v) else { return Ok(()) };
        let current = self.settings.get();
        let own = &current.server.stream_keys;
        let mut seen: Vec<&str> = Vec::new();
        for k in &keys {
            if own.iter().any(|o| o.key == k.key) || seen.contains(&k.key.as_str()) {
                continue;
            }
            seen.push(&k.key);
            // One constant address: the limit is the channel's, whatever address its admin uses.
            self.key_guesses.attempt(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))?;
        }
        Ok(())
    }

    /// Before a `customjavascript` call: custom JavaScript is the server admin's alone, set on the
    /// default channel. A channel's API refuses it (403) whoever calls, the server admin too: script
    /// served from castd's origin acts with every credential a visitor's browser holds there (the
    /// server admin's cached Basic credentials, other channels' pass cookies and chat tokens), so no
    /// channel's page runs any (`api::public`).
    fn server_admins_script(&self, _: &Value) -> Result<(), ApiError> {
        if !self.is_channel() {
            return Ok(());
        }
        Err(ApiError::Forbidden(
            "custom JavaScript is only for the server admin: it runs on the default channel's pages \
             (/api/admin/config/customjavascript), never on a channel's"
                .into(),
        ))
    }

    /// STREAM_TITLE_UPDATED, after every call of the stream title's setter.
    fn stream_title_updated(&self) {
        let state = self.stream.borrow().clone();
        let event = crate::stream::stream_event(&self.settings.get(), &state, &self.viewers);
        self.bus.publish(Event::StreamTitleUpdated(event));
    }
}

/// Apply the plain setter called `name` (for other routes that change the same setting, such as the
/// integrations API's stream title).
pub async fn apply_named(server: &Arc<Server>, name: &str, value: Value) -> Result<Json<StatusResponse>, ApiError> {
    let setter =
        SETTERS.iter().find(|s| s.name == name).ok_or_else(|| ApiError::Internal(format!("no setter {name}")))?;
    setters::apply(server, setter, value).await
}

pub fn routes(reg: &mut Registry, server: Arc<Server>) {
    setters::register(reg, server.clone(), SETTERS);
    let mut reg = reg.scope(server);
    reg.schema::<crate::config::StreamKey>();
    reg.schema::<crate::config::SocialHandle>();
    reg.schema::<crate::config::ExternalAction>();
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
    // On the hash's own pool, like every bcrypt run (a flood of wrong logins cannot delay it for long).
    let hash = crate::password::hash_pooled(&pw)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.server.admin_password_hash = hash;
            s.server.admin_password_weak = weak;
            Ok(())
        })
        .await?;
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
            s.instance.logo = name;
            Ok(())
        })
        .await?;
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
            s.instance.favicon = name;
            Ok(())
        })
        .await?;
    Ok(StatusResponse::ok("favicon updated"))
}

async fn reset_favicon(State(server): State<Arc<Server>>) -> Result<Json<StatusResponse>, ApiError> {
    server
        .settings
        .update::<ApiError, _>(|s| {
            s.instance.favicon = String::new();
            Ok(())
        })
        .await?;
    Ok(StatusResponse::ok("favicon reset"))
}
