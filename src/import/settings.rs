//! Owncast's datastore keys onto castd's `Settings`, the key pairs (ActivityPub, VAPID) the tables
//! step stores, and the files the settings name (logo, favicon) plus the emoji and `public/` trees.

use std::path::Path;

use base64::Engine;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, LineEnding};
use rsa::{RsaPrivateKey, RsaPublicKey};

use super::gob::Value;
use super::source::{copy_open, entry, Entry, Source};
use super::{ImportError, Report};
use crate::config::{
    BrowserNotification, DiscordNotification, ExternalAction, S3Info, Settings, SocialHandle, StreamKey,
    StreamOutputVariant,
};

/// What the settings step hands the tables step.
#[derive(Default)]
pub struct Plan {
    /// The ActivityPub private key as PKCS#8 PEM (castd's `federation_keys` format).
    pub federation_key_pem: Option<String>,
    /// The VAPID private key (32 bytes), castd's `notification_keys` format.
    pub vapid_key: Option<Vec<u8>>,
}

/// Keys read for their value but not carried over: statistics, housekeeping, values castd derives.
const IGNORED: &[&str] = &[
    "DATA_STORE_VERSION",
    "HAS_POPULATED_DEFAULTS",
    "HAS_POPULATED_FEDERATION_DEFAULTS",
    "peak_viewers_session",
    "peak_viewers_overall",
    "last_disconnect_time",
    "server_init_date",
    "logo_uniqueness",
    "has_configured_initial_notifications",
    "public_key",
    "browser_push_public_key",
    "notifications_enabled",
];

const KIND: &str = "settings";

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn list(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Slice(items) => items.iter().map(|i| i.as_str().map(str::to_string)).collect(),
        // Older datastores kept lists joined with commas.
        Value::String(joined) => {
            Some(joined.split(',').map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect())
        }
        _ => None,
    }
}

fn structs(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Slice(items) if items.iter().all(|i| matches!(i, Value::Struct(_))) => Some(items),
        _ => None,
    }
}

fn port(v: &Value) -> Option<u16> {
    v.as_f64().filter(|p| p.fract() == 0.0 && (0.0..=65535.0).contains(p)).map(|p| p as u16)
}

fn u32_of(f: f64) -> u32 {
    if f.is_finite() && f > 0.0 {
        f.min(f64::from(u32::MAX)) as u32
    } else {
        0
    }
}

/// Apply one key's value to `out`; `None` when the value does not have the shape the key needs.
fn apply_key(key: &str, v: &Value, out: &mut Settings, plan: &mut Plan, report: &mut Report) -> Option<()> {
    match key {
        "server_name" => out.instance.name = s(v)?,
        "server_summary" => out.instance.summary = s(v)?,
        "server_welcome_message" => out.instance.welcome_message = s(v)?,
        "server_url" => out.server.server_url = s(v)?,
        "stream_title" => out.instance.stream_title = s(v)?,
        "extra_page_content" => out.instance.extra_page_content = s(v)?,
        "custom_offline_message" => out.instance.offline_message = s(v)?,
        "logo_path" => out.instance.logo = s(v)?,
        "favicon_path" => out.instance.favicon = s(v)?,
        "admin_password_key" => {
            let stored = s(v)?;
            if stored.starts_with("$2") {
                out.server.admin_password_weak = crate::password::verify("abc123", &stored);
                out.server.admin_password_hash = stored;
            } else if !stored.is_empty() {
                // A datastore before version 4 kept the password itself.
                out.server.admin_password_weak = crate::password::is_weak(&stored);
                out.server.admin_password_hash = crate::password::hash(&stored).ok()?;
                report.note("the admin password was stored in plain text by this Owncast; castd keeps only its hash");
            }
        }
        "stream_keys" => {
            let keys: Vec<StreamKey> = structs(v)?
                .iter()
                .map(|k| StreamKey { key: k.str_field("Key"), comment: k.str_field("Comment") })
                .filter(|k| !k.key.is_empty())
                .collect();
            report.add("stream keys", keys.len() as u64);
            out.server.stream_keys = keys;
        }
        "stream_key" => {
            // The legacy single key (datastore before version 2), only when there is no list.
            let key = s(v)?;
            if out.server.stream_keys.is_empty() && !key.is_empty() {
                out.server.stream_keys = vec![StreamKey { key, comment: "Default stream key".into() }];
                report.add("stream keys", 1);
            }
        }
        "http_port_number" => out.server.web_server_port = port(v)?,
        "http_listen_address" => out.server.web_server_ip = s(v)?,
        "rtmp_port_number" => out.server.rtmp_server_port = port(v)?,
        "rtmp_bind_address" => out.server.rtmp_server_bind_address = s(v)?,
        "websocket_host_override" => out.server.socket_host_override = s(v)?,
        "server_metadata_tags" => out.instance.tags = list(v)?,
        "social_handles" => {
            out.instance.social_handles = structs(v)?
                .iter()
                .map(|h| SocialHandle {
                    platform: h.str_field("Platform"),
                    url: h.str_field("URL"),
                    icon: h.str_field("Icon"),
                })
                .collect()
        }
        "nsfw" => out.instance.nsfw = v.as_bool()?,
        "autoplay" => {
            out.instance.autoplay = match v {
                Value::Bool(true) => "on".into(),
                Value::Bool(false) => "off".into(),
                _ => match s(v)?.as_str() {
                    "always" | "on" => "on".into(),
                    "sound-only" | "muted" => "muted".into(),
                    _ => "off".into(),
                },
            }
        }
        "hide_viewer_count" => out.instance.hide_viewer_count = v.as_bool()?,
        "disable_search_indexing" => out.instance.disable_search_indexing = v.as_bool()?,
        "directory_enabled" => out.directory.directory_enabled = v.as_bool()?,
        "directory_registration_key" => {
            if !s(v)?.is_empty() {
                report.note("the directory registration key was not kept: castd registers with the directory anew");
            }
        }
        "ffmpeg_path" => out.server.ffmpeg_path = s(v)?,
        "video_codec" => out.video.video_codec = s(v).filter(|c| !c.is_empty())?,
        "video_latency_level" => out.video.latency_level = u32_of(v.as_f64()?).min(4),
        "video_serving_endpoint" => out.server.video_serving_endpoint = s(v)?,
        "video_stream_output_variants" => {
            let variants: Vec<StreamOutputVariant> = structs(v)?
                .iter()
                .map(|o| StreamOutputVariant {
                    name: o.str_field("Name"),
                    video_passthrough: o.bool_field("IsVideoPassthrough"),
                    audio_passthrough: o.bool_field("IsAudioPassthrough"),
                    video_bitrate: u32_of(o.num_field("VideoBitrate")),
                    audio_bitrate: u32_of(o.num_field("AudioBitrate")),
                    scaled_width: u32_of(o.num_field("ScaledWidth")),
                    scaled_height: u32_of(o.num_field("ScaledHeight")),
                    framerate: u32_of(o.num_field("Framerate")),
                    cpu_usage_level: u32_of(o.num_field("CPUUsageLevel")).min(4),
                })
                .collect();
            if !variants.is_empty() {
                report.add("video variants", variants.len() as u64);
                out.video.video_quality_variants = variants;
            }
        }
        "s3_storage_config" => {
            out.storage.s3 = S3Info {
                enabled: v.bool_field("Enabled"),
                endpoint: v.str_field("Endpoint"),
                access_key: v.str_field("AccessKey"),
                secret: v.str_field("Secret"),
                bucket: v.str_field("Bucket"),
                region: v.str_field("Region"),
                acl: v.str_field("ACL"),
                path_prefix: v.str_field("PathPrefix"),
                force_path_style: v.bool_field("ForcePathStyle"),
            };
            // Datastores before version 3 kept the serving endpoint here.
            let serving = v.str_field("ServingEndpoint");
            if !serving.is_empty() && out.server.video_serving_endpoint.is_empty() {
                out.server.video_serving_endpoint = serving;
            }
        }
        "chat_disabled" => out.chat.chat_disabled = v.as_bool()?,
        "chat_join_messages_enabled" => out.chat.chat_join_messages_enabled = v.as_bool()?,
        "chat_established_users_only_mode" => out.chat.chat_established_user_mode = v.as_bool()?,
        "chat_spam_protection_enabled" => out.chat.chat_spam_protection_enabled = v.as_bool()?,
        "chat_slur_filter_enabled" => out.chat.chat_slur_filter_enabled = v.as_bool()?,
        "chat_require_authentication" => out.chat.chat_require_authentication = v.as_bool()?,
        "blocked_usernames" => out.chat.forbidden_usernames = list(v)?,
        "suggested_usernames" => out.chat.suggested_usernames = list(v)?,
        "external_actions" => {
            out.instance.external_actions = structs(v)?
                .iter()
                .map(|a| ExternalAction {
                    url: a.str_field("URL"),
                    html: a.str_field("HTML"),
                    title: a.str_field("Title"),
                    description: a.str_field("Description"),
                    icon: a.str_field("Icon"),
                    color: a.str_field("Color"),
                    open_externally: a.bool_field("OpenExternally"),
                })
                .collect()
        }
        "custom_styles" => out.instance.custom_styles = s(v)?,
        "custom_javascript" => out.instance.custom_javascript = s(v)?,
        "custom_color_variable_values" => {
            let Value::Map(pairs) = v else { return None };
            out.instance.appearance_variables = pairs
                .iter()
                .map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
                .collect::<Option<_>>()?;
        }
        "federation_enabled" => out.federation.federation_enabled = v.as_bool()?,
        "federation_username" => out.federation.federation_username = s(v).filter(|u| !u.is_empty())?,
        "federation_private" => out.federation.federation_private = v.as_bool()?,
        "federation_go_live_message" => out.federation.federation_go_live_message = s(v)?,
        "federation_show_engagement" => out.federation.federation_show_engagement = v.as_bool()?,
        "federation_enable_quotes" => out.federation.federation_enable_quotes = v.as_bool()?,
        "federation_hide_followers_tab" => out.federation.federation_hide_followers = v.as_bool()?,
        "federation_blocked_domains" => out.federation.federation_blocked_domains = list(v)?,
        "private_key" => {
            let pem = s(v)?;
            let key = RsaPrivateKey::from_pkcs1_pem(&pem).or_else(|_| RsaPrivateKey::from_pkcs8_pem(&pem)).ok()?;
            plan.federation_key_pem = Some(key.to_pkcs8_pem(LineEnding::LF).ok()?.to_string());
        }
        "discord_configuration" => {
            out.notifications.discord_notifications = DiscordNotification {
                enabled: v.bool_field("Enabled"),
                webhook: v.str_field("Webhook"),
                go_live_message: v.str_field("GoLiveMessage"),
            }
        }
        "browser_push_configuration" => {
            out.notifications.browser_notifications =
                BrowserNotification { enabled: v.bool_field("Enabled"), go_live_message: v.str_field("GoLiveMessage") }
        }
        "browser_push_private_key" => {
            let raw = s(v)?;
            let raw = raw.trim().trim_end_matches('=');
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(raw)
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(raw))
                .ok()?;
            // Checked the way castd loads it.
            web_push_native::jwt_simple::algorithms::ES256KeyPair::from_bytes(&bytes).ok()?;
            plan.vapid_key = Some(bytes);
        }
        "schedule_enabled" => out.schedule.schedule_enabled = v.as_bool()?,
        "schedule_reminder_message" => out.schedule.schedule_reminder_message = s(v)?,
        _ => return None,
    }
    Some(())
}

/// Keys castd has no setting for (reported, not carried over).
fn known(key: &str) -> bool {
    !matches!(
        key,
        "schedule_show_countdown"
            | "schedule_chat_open_minutes"
            | "schedule_first_reminder_minutes"
            | "schedule_second_reminder_minutes"
    )
}

/// Read every datastore key into `out`; returns the key pairs for the tables step.
pub fn apply(source: &Source, out: &mut Settings, report: &mut Report) -> Result<Plan, ImportError> {
    let mut plan = Plan::default();
    // The key list first, so the legacy single `stream_key` only fills in when there is no list.
    let mut keys: Vec<&String> = source.datastore.keys().collect();
    keys.sort_by_key(|k| (k.as_str() == "stream_key", k.as_str() == "video_serving_endpoint"));
    for key in keys {
        if IGNORED.contains(&key.as_str()) {
            continue;
        }
        let raw = &source.datastore[key];
        let value = match super::gob::decode(raw) {
            Ok(v) => v,
            Err(e) => {
                report.skip(KIND, format!("{key}: the value cannot be decoded ({e})"));
                continue;
            }
        };
        if !known(key) {
            report.skip(KIND, format!("{key}: castd has no such setting"));
            continue;
        }
        match apply_key(key, &value, out, &mut plan, report) {
            Some(()) => report.imported_one(KIND),
            None => report.skip(KIND, format!("{key}: unknown key or unexpected value")),
        }
    }
    check(out, report);
    if source.datastore.contains_key("private_key") && plan.federation_key_pem.is_none() {
        return Err(ImportError::Corrupt(
            "the ActivityPub private key (datastore key private_key) cannot be read; without it followers \
             would not recognise this server"
                .into(),
        ));
    }
    // The stored public key must be the private key's, or remote servers would see another actor.
    if let (Some(pem), Some(raw)) = (&plan.federation_key_pem, source.datastore.get("public_key")) {
        let stored = super::gob::decode(raw).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let private = RsaPrivateKey::from_pkcs8_pem(pem).map_err(|e| ImportError::Corrupt(e.to_string()))?;
        match RsaPublicKey::from_public_key_pem(&stored) {
            Ok(public) if public == RsaPublicKey::from(&private) => {}
            _ => {
                return Err(ImportError::Corrupt(
                    "the datastore's ActivityPub public_key is not the public half of its private_key".into(),
                ))
            }
        }
    }
    if plan.federation_key_pem.is_some() {
        report.add("federation key pair", 1);
    }
    if out.server.admin_password_hash.is_empty() {
        report.note("no admin password in the Owncast datastore: castd generates one at its first start");
    } else {
        report.add("admin password", 1);
    }
    Ok(plan)
}

/// Run the imported values through the validators castd's admin API uses; a value they refuse is
/// reported and replaced by castd's default, so the daemon never starts on settings it would not take.
fn check(out: &mut Settings, report: &mut Report) {
    use crate::config::validate;
    use serde_json::json;
    let defaults = Settings::default();
    let mut refuse = |what: &str, e: validate::ValidationError| {
        report.skip(KIND, format!("{what}: {e}; castd's default kept"));
    };
    if !out.server.stream_keys.is_empty() {
        match validate::stream_keys(&json!(out.server.stream_keys)) {
            Ok(keys) => out.server.stream_keys = keys,
            Err(e) => {
                refuse("stream_keys", e);
                out.server.stream_keys = Vec::new();
            }
        }
    }
    if let Err(e) = validate::variants(&json!(out.video.video_quality_variants)) {
        refuse("video_stream_output_variants", e);
        out.video.video_quality_variants = defaults.video.video_quality_variants.clone();
    }
    if let Err(e) = validate::ip_address(&json!(out.server.web_server_ip)) {
        refuse("http_listen_address", e);
        out.server.web_server_ip = defaults.server.web_server_ip.clone();
    }
    if let Err(e) = validate::ip_address(&json!(out.server.rtmp_server_bind_address)) {
        refuse("rtmp_bind_address", e);
        out.server.rtmp_server_bind_address = defaults.server.rtmp_server_bind_address.clone();
    }
    if let Err(e) = validate::socket_url(&json!(out.server.socket_host_override)) {
        refuse("websocket_host_override", e);
        out.server.socket_host_override = String::new();
    }
    if let Err(e) = validate::federation_username(&json!(out.federation.federation_username)) {
        refuse("federation_username", e);
        out.federation.federation_username = defaults.federation.federation_username.clone();
    }
    // Links shown to viewers: only http(s) URLs, as the admin API takes them (one bad entry goes, the
    // others stay).
    let handles = std::mem::take(&mut out.instance.social_handles);
    for h in handles {
        match validate::social_handles(&json!([h])) {
            Ok(mut ok) => out.instance.social_handles.append(&mut ok),
            Err(e) => refuse("social_handles", e),
        }
    }
    let actions = std::mem::take(&mut out.instance.external_actions);
    for a in actions {
        match validate::external_actions(&json!([a])) {
            Ok(mut ok) => out.instance.external_actions.append(&mut ok),
            Err(e) => refuse("external_actions", e),
        }
    }
    match validate::domains(&json!(out.federation.federation_blocked_domains)) {
        Ok(d) => out.federation.federation_blocked_domains = d,
        Err(e) => {
            refuse("federation_blocked_domains", e);
            out.federation.federation_blocked_domains = Vec::new();
        }
    }
}

/// A plain file name inside Owncast's data dir (no directories, no way out of it).
fn plain_name(name: &str) -> Option<&str> {
    let p = Path::new(name);
    let file = p.file_name()?.to_str()?;
    (p.components().count() == 1 && !file.starts_with('.')).then_some(file)
}

/// Copy the logo, favicon, custom emoji and public files into `dir` (the castd data dir being built).
pub fn copy_files(source: &Source, dir: &Path, out: &mut Settings, report: &mut Report) -> Result<(), ImportError> {
    for (kind, is_logo) in [("logo", true), ("favicon", false)] {
        let name = if is_logo { out.instance.logo.clone() } else { out.instance.favicon.clone() };
        if name.is_empty() {
            continue;
        }
        let kept = match plain_name(&name).map(|file| (file, entry(&source.data_dir.join(file)))) {
            Some((file, Entry::File(from))) => {
                copy_open(from, &dir.join(file)).map_err(ImportError::io("copying the logo"))?;
                report.imported_one(kind);
                file.to_string()
            }
            Some((_, Entry::Link)) => {
                report.skip(kind, format!("{name} is a symbolic link (castd copies no links)"));
                String::new()
            }
            Some(_) => {
                report.skip(kind, format!("{name} is missing from the Owncast data directory"));
                String::new()
            }
            None => {
                report.skip(kind, format!("{name} is not a plain file name"));
                String::new()
            }
        };
        if is_logo {
            out.instance.logo = kept;
        } else {
            out.instance.favicon = kept;
        }
    }
    // The folders themselves are not followed when they are links either.
    for (folder, kind) in [("emoji", "custom emoji"), ("public", "public files")] {
        if matches!(entry(&source.data_dir.join(folder)), Entry::Link) {
            report.skip(kind, format!("{folder}/ is a symbolic link (castd copies no links)"));
        }
    }
    if matches!(entry(&source.data_dir.join("emoji")), Entry::Dir) {
        copy_emoji(&source.data_dir.join("emoji"), &dir.join("emoji"), report)?;
    }
    let public = source.data_dir.join("public");
    if matches!(entry(&public), Entry::Dir) {
        copy_tree(&public, &dir.join("public"), report, 0)?;
    }
    Ok(())
}

/// Custom emoji: image files whose stem is a valid emoji name (subdirectories are Owncast's
/// built-in sets, which castd ships itself).
fn copy_emoji(from: &Path, to: &Path, report: &mut Report) -> Result<(), ImportError> {
    const KIND: &str = "custom emoji";
    let Ok(rd) = std::fs::read_dir(from) else { return Ok(()) };
    std::fs::create_dir_all(to).map_err(ImportError::io("creating the emoji directory"))?;
    let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let file = match entry(&path) {
            Entry::File(f) => f,
            Entry::Dir => {
                report.skip(KIND, "a subdirectory (Owncast's built-in emoji sets) is not copied");
                continue;
            }
            _ => {
                report.skip(KIND, "not a regular file");
                continue;
            }
        };
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let Ok(clean) = crate::chat::emoji::sanitize_name(stem) else {
            report.skip(KIND, "the file name is not a valid emoji name");
            continue;
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, crate::chat::emoji::MAX_EMOJI_BYTES as u64 + 1),
            &mut bytes,
        )
        .map_err(ImportError::io("reading an emoji"))?;
        if bytes.len() > crate::chat::emoji::MAX_EMOJI_BYTES {
            report.skip(KIND, "larger than castd's emoji limit");
            continue;
        }
        let Some(ext) = crate::chat::emoji::image_ext(&bytes) else {
            report.skip(KIND, "not a PNG, GIF, JPEG or WebP image");
            continue;
        };
        std::fs::write(to.join(format!("{clean}.{ext}")), &bytes).map_err(ImportError::io("writing an emoji"))?;
        report.imported_one(KIND);
    }
    Ok(())
}

/// Copy `public/` (regular files and directories; links are not followed).
fn copy_tree(from: &Path, to: &Path, report: &mut Report, depth: usize) -> Result<(), ImportError> {
    const KIND: &str = "public files";
    if depth > 32 {
        report.skip(KIND, "nested too deeply");
        return Ok(());
    }
    std::fs::create_dir_all(to).map_err(ImportError::io("creating the public directory"))?;
    let rd = std::fs::read_dir(from).map_err(ImportError::io("reading Owncast's public directory"))?;
    for e in rd.filter_map(Result::ok) {
        let path = e.path();
        let target = to.join(e.file_name());
        match entry(&path) {
            Entry::Dir => copy_tree(&path, &target, report, depth + 1)?,
            Entry::File(from) => {
                copy_open(from, &target).map_err(ImportError::io("copying a public file"))?;
                report.imported_one(KIND);
            }
            Entry::Link | Entry::Other => report.skip(KIND, "a link or special file is not copied"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_castd_would_refuse_fall_back_to_its_defaults_and_are_reported() {
        let mut s = Settings::default();
        s.federation.federation_username = "no spaces allowed".into();
        s.video.video_quality_variants = vec![StreamOutputVariant { scaled_width: 641, ..Default::default() }];
        s.server.stream_keys = vec![StreamKey { key: " padded-key ".into(), comment: String::new() }];
        s.server.web_server_ip = "not-an-ip".into();
        s.federation.federation_blocked_domains = vec!["Spam.Example".into()];
        let mut report = Report::default();
        check(&mut s, &mut report);
        assert_eq!(s.federation.federation_username, "streamer");
        assert_eq!(s.video.video_quality_variants, Settings::default().video.video_quality_variants);
        assert_eq!(s.server.web_server_ip, "0.0.0.0");
        assert_eq!(s.server.stream_keys[0].key, "padded-key");
        assert_eq!(s.federation.federation_blocked_domains, vec!["spam.example".to_string()]);
        let reasons: Vec<&String> = report.skipped[KIND].keys().collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons.iter().any(|r| r.starts_with("federation_username:")), "{reasons:?}");
    }

    #[test]
    fn links_for_viewers_must_be_http() {
        use crate::config::{ExternalAction, SocialHandle};
        let mut s = Settings::default();
        let handle = |url: &str| SocialHandle { platform: "x".into(), url: url.into(), ..Default::default() };
        s.instance.social_handles = vec![handle("https://ok.example/@me"), handle("javascript:alert(1)")];
        let action = |url: &str| ExternalAction { title: "a".into(), url: url.into(), ..Default::default() };
        s.instance.external_actions = vec![action("javascript:alert(2)"), action("https://ok.example/donate")];
        let mut report = Report::default();
        check(&mut s, &mut report);
        assert_eq!(s.instance.social_handles, vec![handle("https://ok.example/@me")]);
        assert_eq!(s.instance.external_actions, vec![action("https://ok.example/donate")]);
        assert_eq!(report.skipped[KIND].len(), 2, "{:?}", report.skipped);
    }
}
