//! Issue 2 acceptance: the real daemon's configuration API, auth, persistence and OpenAPI document.
//!
//! The API tests run twice (`each_channel!`): on the default channel at the root and on a channel under
//! `/c/c1`, administered with that channel's own password (a channel's API answers the server-wide
//! setters 403: checked here). Default channel only, being about the server: the first start's
//! password file and the admin password flag, the OpenAPI document the CLI prints, SIGTERM, `--help`
//! and the embedded web assets.

mod common;

use std::collections::BTreeSet;

use common::{each_channel, On, Server, Target};
use serde_json::{json, Value};

each_channel!(
    every_setter_round_trips_and_survives_restart,
    every_setter_rejects_wrong_types_and_bad_bodies,
    out_of_range_values_are_refused_with_a_message,
    admin_routes_need_the_admin_password,
    public_endpoints,
    logo_and_favicon_uploads,
    serverconfig_is_every_features_part_in_owncast_order,
);

/// The root's setters a channel's API does not have (404 there): the server's settings
/// (`config::ServerSettings`: ports, URLs, the encoder, capacity, SRT, the directory, object storage).
/// Read from the two OpenAPI documents, so no list is kept by hand; a few are named to show it is not
/// empty. Empty on the default channel (it has every setter).
fn root_only_setters(daemon: &Server, on: On) -> BTreeSet<String> {
    if !on.is_channel() {
        return BTreeSet::new();
    }
    let root = setter_names(&openapi(daemon));
    let channel = setter_names(&openapi(&daemon.channel(common::target::CHANNEL)));
    let only: BTreeSet<String> = root.difference(&channel).cloned().collect();
    for name in ["serverurl", "rtmpserverport", "video/codec", "ffmpegpath", "s3", "srtserverport", "directoryenabled"]
    {
        assert!(only.contains(name), "{name} is the server's: not on a channel's API ({only:?})");
    }
    for name in ["streamkeys", "name", "video/streamoutputvariants", "chatdisabled"] {
        assert!(!only.contains(name), "{name} is a channel's own");
    }
    only
}

/// Setters a channel's API has but refuses whoever calls (403): the server admin's alone.
const ROOT_ADMINS_ALONE: &[&str] = &["customjavascript"];

/// (setter, a valid value, JSON pointer in /api/admin/serverconfig, expected stored value there,
/// JSON pointer in /api/config when public, expected public value).
type SetterCase = (&'static str, Value, &'static str, Value, Option<(&'static str, Value)>);

fn setter_cases() -> Vec<SetterCase> {
    let variants = json!([
        {"name": "high", "videoPassthrough": false, "audioPassthrough": true, "videoBitrate": 3000, "audioBitrate": 0,
         "scaledWidth": 1280, "scaledHeight": 720, "framerate": 30, "cpuUsageLevel": 1},
        {"name": "low", "videoPassthrough": false, "audioPassthrough": false, "videoBitrate": 600, "audioBitrate": 96,
         "scaledWidth": 0, "scaledHeight": 360, "framerate": 24, "cpuUsageLevel": 3}
    ]);
    let s3 = json!({"enabled": true, "endpoint": "https://s3.example.com", "accessKey": "AK", "secret": "SK",
        "bucket": "b", "region": "r", "acl": "public-read", "pathPrefix": "p", "forcePathStyle": true});
    let s3_masked = json!({"enabled": true, "endpoint": "https://s3.example.com", "accessKey": "AK", "secret": "********",
        "bucket": "b", "region": "r", "acl": "public-read", "pathPrefix": "p", "forcePathStyle": true});
    let handles = json!([{"platform": "mastodon", "url": "https://social.example/@me", "icon": "/img/m.svg"}]);
    let actions = json!([{"url": "https://example.com/donate", "html": "", "title": "Donate", "description": "d",
        "icon": "", "color": "#ff0000", "openExternally": true}]);
    vec![
        ("name", json!("My Stream"), "/instanceDetails/name", json!("My Stream"), Some(("/name", json!("My Stream")))),
        (
            "serversummary",
            json!("About"),
            "/instanceDetails/summary",
            json!("About"),
            Some(("/summary", json!("About"))),
        ),
        (
            "streamtitle",
            json!("Live now"),
            "/instanceDetails/streamTitle",
            json!("Live now"),
            Some(("/streamTitle", json!("Live now"))),
        ),
        ("welcomemessage", json!("Hi all"), "/instanceDetails/welcomeMessage", json!("Hi all"), None),
        (
            "offlinemessage",
            json!("**back soon**"),
            "/instanceDetails/offlineMessage",
            json!("**back soon**"),
            Some(("/offlineMessage", json!("<p><strong>back soon</strong></p>"))),
        ),
        (
            "pagecontent",
            json!("# Hello"),
            "/instanceDetails/extraPageContent",
            json!("# Hello"),
            Some(("/extraPageContent", json!("<h1>Hello</h1>\n"))),
        ),
        ("tags", json!(["a", "b"]), "/instanceDetails/tags", json!(["a", "b"]), Some(("/tags", json!(["a", "b"])))),
        ("nsfw", json!(true), "/instanceDetails/nsfw", json!(true), Some(("/nsfw", json!(true)))),
        (
            "customstyles",
            json!("body{color:red}"),
            "/instanceDetails/customStyles",
            json!("body{color:red}"),
            Some(("/customStyles", json!("body{color:red}"))),
        ),
        (
            "customjavascript",
            json!("console.log(1)"),
            "/instanceDetails/customJavascript",
            json!("console.log(1)"),
            None,
        ),
        (
            "appearance",
            json!({"--theme-color": "#123456"}),
            "/instanceDetails/appearanceVariables",
            json!({"--theme-color": "#123456"}),
            Some(("/appearanceVariables", json!({"--theme-color": "#123456"}))),
        ),
        (
            "socialhandles",
            handles.clone(),
            "/instanceDetails/socialHandles",
            handles.clone(),
            Some(("/socialHandles", handles)),
        ),
        ("externalactions", actions.clone(), "/externalActions", actions.clone(), Some(("/externalActions", actions))),
        (
            "streamkeys",
            json!([{"key": "key-one-123", "comment": "obs"}]),
            "/streamKeys",
            json!([{"key": "key-one-123", "comment": "obs"}]),
            None,
        ),
        ("video/streamoutputvariants", variants.clone(), "/videoSettings/videoQualityVariants", variants, None),
        ("video/streamlatencylevel", json!(4), "/videoSettings/latencyLevel", json!(4), None),
        ("video/codec", json!("libx264"), "/videoCodec", json!("libx264"), None),
        ("chat/disable", json!(true), "/chatDisabled", json!(true), Some(("/chatDisabled", json!(true)))),
        ("chat/joinmessagesenabled", json!(false), "/chatJoinMessagesEnabled", json!(false), None),
        ("chat/establishedusermode", json!(true), "/chatEstablishedUserMode", json!(true), None),
        (
            "chat/spamprotectionenabled",
            json!(false),
            "/chatSpamProtectionEnabled",
            json!(false),
            Some(("/chatSpamProtectionDisabled", json!(true))),
        ),
        ("chat/slurfilterenabled", json!(true), "/chatSlurFilterEnabled", json!(true), None),
        ("chat/slurfilterwords", json!(["Darn"]), "/chatSlurFilterWords", json!(["darn"]), None),
        (
            "chat/requireauthentication",
            json!(true),
            "/chatRequireAuthentication",
            json!(true),
            Some(("/chatRequireAuthentication", json!(true))),
        ),
        ("chat/forbiddenusernames", json!(["bad"]), "/forbiddenUsernames", json!(["bad"]), None),
        ("chat/suggestedusernames", json!(["nice"]), "/suggestedUsernames", json!(["nice"]), None),
        ("hideviewercount", json!(true), "/hideViewerCount", json!(true), Some(("/hideViewerCount", json!(true)))),
        ("disablesearchindexing", json!(true), "/disableSearchIndexing", json!(true), None),
        (
            "sockethostoverride",
            json!("https://chat.example.com"),
            "/socketHostOverride",
            json!("https://chat.example.com"),
            Some(("/socketHostOverride", json!("https://chat.example.com"))),
        ),
        (
            "videoservingendpoint",
            json!("https://cdn.example.com"),
            "/videoServingEndpoint",
            json!("https://cdn.example.com"),
            None,
        ),
        (
            "serverurl",
            json!("https://live.example.com"),
            "/serverURL",
            json!("https://live.example.com"),
            Some(("/authentication/indieAuthEnabled", json!(true))),
        ),
        // a local directory, so enabling the listing below pings nothing outside this machine
        ("directoryurl", json!("http://127.0.0.1:9"), "/yp/directoryUrl", json!("http://127.0.0.1:9"), None),
        ("directoryenabled", json!(true), "/yp/enabled", json!(true), None),
        ("s3", s3, "/s3", s3_masked, None),
        (
            "notifications/browser",
            json!({"enabled": true, "goLiveMessage": "up!"}),
            "/notifications/browser",
            json!({"enabled": true, "goLiveMessage": "up!"}),
            Some(("/notifications/browser/enabled", json!(true))),
        ),
        (
            "notifications/discord",
            json!({"enabled": true, "webhook": "https://discord.example/hook", "goLiveMessage": "live"}),
            "/notifications/discord",
            // The webhook URL is a secret: shown masked.
            json!({"enabled": true, "webhook": "********", "goLiveMessage": "live"}),
            None,
        ),
        (
            "federation/enable",
            json!(true),
            "/federation/enabled",
            json!(true),
            Some(("/federation/enabled", json!(true))),
        ),
        ("federation/private", json!(true), "/federation/isPrivate", json!(true), None),
        (
            "federation/username",
            json!("caster"),
            "/federation/username",
            json!("caster"),
            Some(("/federation/account", json!("caster@live.example.com"))),
        ),
        ("federation/livemessage", json!("on air"), "/federation/goLiveMessage", json!("on air"), None),
        ("federation/showengagement", json!(false), "/federation/showEngagement", json!(false), None),
        ("federation/enablequotes", json!(true), "/federation/enableQuotes", json!(true), None),
        (
            "federation/hidefollowers",
            json!(true),
            "/federation/hideFollowersTab",
            json!(true),
            Some(("/federation/hideFollowersTab", json!(true))),
        ),
        (
            "federation/blockdomains",
            json!(["spam.example"]),
            "/federation/blockedDomains",
            json!(["spam.example"]),
            None,
        ),
        ("ffmpegpath", json!("/bin/sh"), "/ffmpegPath", json!("/bin/sh"), None),
        ("server/maxlivechannels", json!(3), "/capacity/maxLiveChannels", json!(3), None),
        ("server/overcapacity", json!("passthrough"), "/capacity/overCapacity", json!("passthrough"), None),
        ("server/transcodebudget", json!(120_000_000), "/capacity/transcodeBudget", json!(120_000_000), None),
        ("allowprivatetargets", json!(true), "/allowPrivateTargets", json!(true), None),
        ("rtmpserverport", json!(19350), "/rtmpServerPort", json!(19350), None),
        ("srtserverport", json!(18890), "/srtServerPort", json!(18890), None),
        ("srt/passphrase", json!("a-passphrase-42"), "/srtPassphrase", json!("********"), None),
        ("webrtc/enabled", json!(false), "/webrtcEnabled", json!(false), None),
        ("webrtc/maxviewers", json!(42), "/webrtcMaxViewers", json!(42), None),
        ("webrtc/variant", json!(1), "/webrtcVariant", json!(1), None),
        ("webrtc/requireauthentication", json!(true), "/webrtcRequireAuthentication", json!(true), None),
        ("rtmpserverbindaddress", json!("127.0.0.1"), "/rtmpServerAddress", json!("127.0.0.1"), None),
        ("webserverport", json!(18080), "/webServerPort", json!(18080), None),
        ("webserverip", json!("127.0.0.1"), "/webServerIP", json!("127.0.0.1"), None),
        ("autoplay", json!("muted"), "/instanceDetails/autoplay", json!("muted"), Some(("/autoplay", json!("muted")))),
        ("schedule/enabled", json!(true), "/schedule/enabled", json!(true), Some(("/schedule/enabled", json!(true)))),
        ("schedule/remindermessage", json!("soon"), "/schedule/reminderMessage", json!("soon"), None),
        (
            "schedule/showcountdown",
            json!(true),
            "/schedule/showCountdown",
            json!(true),
            Some(("/schedule/showCountdown", json!(true))),
        ),
        (
            "schedule/chatopenminutes",
            json!(30),
            "/schedule/chatOpenMinutesBefore",
            json!(30),
            Some(("/schedule/chatOpenMinutesBefore", json!(30))),
        ),
        ("schedule/firstreminderminutes", json!(60), "/schedule/firstReminderMinutes", json!(60), None),
        ("schedule/secondreminderminutes", json!(0), "/schedule/secondReminderMinutes", json!(0), None),
        (
            "simulcast/targets",
            json!([{"id": "yt", "name": "YouTube", "url": "rtmp://127.0.0.1:1/live2", "streamKey": "secret-key",
                    "enabled": false, "variant": "source"}]),
            "/simulcastTargets",
            json!([{"id": "yt", "name": "YouTube", "url": "rtmp://127.0.0.1:1/live2", "streamKey": "********",
                    "enabled": false, "variant": "source"}]),
            None,
        ),
        ("replay/enable", json!(false), "/replay/enabled", json!(false), Some(("/clips/enabled", json!(false)))),
        (
            "replay/clipsenabled",
            json!(false),
            "/replay/clipsEnabled",
            json!(false),
            Some(("/clips/enabled", json!(false))),
        ),
        (
            "replay/maxclipduration",
            json!(30),
            "/replay/maxClipDurationSeconds",
            json!(30),
            Some(("/clips/maxDurationSeconds", json!(30))),
        ),
        (
            "replay/clippermissions",
            json!("moderators"),
            "/replay/clipPermissions",
            json!("moderators"),
            Some(("/clips/permissions", json!("moderators"))),
        ),
        ("replay/maxgigabytes", json!(2.5), "/replay/maxGigabytes", json!(2.5), None),
        ("replay/retentiondays", json!(7), "/replay/retentionDays", json!(7), None),
        ("replay/announceclips", json!(false), "/replay/announceClips", json!(false), None),
        // Unlisted, not password: the cases after it read the public config without a viewing pass.
        ("visibility", json!("unlisted"), "/access/visibility", json!("unlisted"), None),
        ("viewer/passlifetime", json!(600), "/access/viewerPassSeconds", json!(600), None),
        ("viewer/federationposts", json!("none"), "/access/privateFederationPosts", json!("none"), None),
        (
            "viewer/jwt",
            json!({"secret": "0123456789abcdef0123456789abcdef", "issuer": "https://shop.example", "audience": "castd"}),
            "/access/viewerJwt",
            json!({"secret": "********", "jwksUrl": "", "issuer": "https://shop.example", "audience": "castd",
                   "nameClaim": "", "loginUrl": ""}),
            None,
        ),
        (
            "viewer/admissionhook",
            json!({"url": "http://127.0.0.1:9/admit", "secret": "hook-secret", "onPlay": false, "onPublish": true,
                   "cacheSeconds": 5}),
            "/access/admissionHook",
            json!({"url": "http://127.0.0.1:9/admit", "secret": "********", "onPlay": false, "onPublish": true,
                   "cacheSeconds": 5}),
            None,
        ),
    ]
}

fn openapi(server: &impl common::Api) -> Value {
    server.get_json("/api/openapi.json")
}

/// Every (method, path) in the OpenAPI document.
fn documented_routes(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            out.push((method.to_uppercase(), path.clone(), op.clone()));
        }
    }
    out
}

fn setter_names(doc: &Value) -> BTreeSet<String> {
    documented_routes(doc)
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p.starts_with("/api/admin/config/"))
        .map(|(_, p, _)| p.trim_start_matches("/api/admin/config/").to_string())
        .collect()
}

fn every_setter_round_trips_and_survives_restart(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let doc = openapi(&server);
    let cases = setter_cases();
    // the table covers every documented plain setter (adminpass, logo and favicon have their own tests)
    let covered: BTreeSet<String> = cases.iter().map(|c| c.0.to_string()).collect();
    let special: BTreeSet<String> = ["adminpass", "logo", "favicon"].iter().map(|s| s.to_string()).collect();
    let missing: Vec<_> = setter_names(&doc).difference(&covered).filter(|s| !special.contains(*s)).cloned().collect();
    assert!(missing.is_empty(), "setters without a round-trip case: {missing:?}");

    // A channel's API refuses the server-wide setters (403) and changes nothing: its own are checked.
    let root_only = root_only_setters(&daemon, on);
    let cases: Vec<_> = cases
        .into_iter()
        .filter(|c| !(on.is_channel() && (root_only.contains(c.0) || ROOT_ADMINS_ALONE.contains(&c.0))))
        .collect();
    if on.is_channel() {
        for name in &root_only {
            let r = server.admin_post(&format!("/api/admin/config/{name}"), &json!({ "value": "x" }));
            assert_eq!(r.status().as_u16(), 404, "{name} on a channel");
        }
        for name in ROOT_ADMINS_ALONE {
            let r = server.admin_post(&format!("/api/admin/config/{name}"), &json!({ "value": "x" }));
            assert_eq!(r.status().as_u16(), 403, "{name} on a channel");
        }
    }
    if let Some(url) = setter_cases().into_iter().find(|c| c.0 == "serverurl") {
        // the server's URL, set by the server admin (federation needs it: the channel's follows it)
        server.set_server_wide("serverurl", url.1);
    }
    for (name, value, _, _, _) in &cases {
        server.set(name, value.clone());
    }
    let check = |server: &Target, when: &str| {
        let cfg = server.admin_json("/api/admin/serverconfig");
        let public = server.get_json("/api/config");
        for (name, _, ptr, expected, public_case) in &cases {
            // after a restart the harness's --webserverport/--rtmpport/--webserverip flags win, and are saved
            let flag = match (*name, when) {
                ("rtmpserverport" | "webserverport" | "srtserverport", "after restart") => Some(json!(0)),
                ("webserverip", "after restart") => Some(json!("127.0.0.1")),
                _ => None,
            };
            let expected = flag.as_ref().unwrap_or(expected);
            assert_eq!(cfg.pointer(ptr), Some(expected), "{when}: serverconfig {ptr} after setting {name}");
            if let Some((pptr, pexpected)) = public_case {
                assert_eq!(public.pointer(pptr), Some(pexpected), "{when}: /api/config {pptr} after setting {name}");
            }
        }
    };
    check(&server, "before restart");
    drop(server);
    let daemon = daemon.restart();
    check(&on.of(&daemon), "after restart");
    // the saved port flags do not override the command line the harness passes
    assert!(daemon.web_port != 18080);
}

/// A value of the wrong JSON type for a documented `value` schema.
fn wrong_value(schema: &Value, doc: &Value) -> Value {
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => doc.pointer(r.trim_start_matches('#')).cloned(),
        None => Some(schema.clone()),
    }
    .unwrap_or(Value::Null);
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!(12345),
        Some("boolean") => json!("yes"),
        Some("integer") | Some("number") => json!("many"),
        Some("array") => json!({"not": "a list"}),
        Some("object") => json!(["not", "an", "object"]),
        // A choice of shapes (autoplay: a boolean or on/off/muted): a number is none of them.
        None if schema.get("anyOf").is_some() => json!(12345),
        other => panic!("unexpected schema type {other:?} in {schema}"),
    }
}

fn every_setter_rejects_wrong_types_and_bad_bodies(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let doc = openapi(&server);
    let before = server.admin_json("/api/admin/serverconfig");
    let mut checked = 0;
    for (method, path, op) in documented_routes(&doc) {
        if method != "POST" || !path.starts_with("/api/admin/config/") {
            continue;
        }
        let Some(schema) = op.pointer("/requestBody/content/application~1json/schema/properties/value") else {
            continue; // multipart (favicon)
        };
        let bad = wrong_value(schema, &doc);
        let r = server.admin_post(&path, &json!({ "value": bad }));
        let name = path.trim_start_matches("/api/admin/config/");
        // a channel refuses the server admin's own setter whatever the value
        let want = if on.is_channel() && ROOT_ADMINS_ALONE.contains(&name) { 403 } else { 400 };
        assert_eq!(r.status().as_u16(), want, "{path} accepted {bad}");
        let body: Value = r.json().unwrap();
        assert_eq!(body["success"], json!(false), "{path}");
        assert!(!body["message"].as_str().unwrap_or_default().is_empty(), "{path} gave no message");

        // missing value, malformed JSON, empty body
        for raw in ["{}", "{\"value\": ", "", "[1,2]"] {
            let r = server
                .client
                .post(server.url(&path))
                .basic_auth("admin", Some(&server.admin_password))
                .header("content-type", "application/json")
                .body(raw)
                .send()
                .unwrap();
            assert_eq!(r.status().as_u16(), 400, "{path} with body {raw:?}");
            let body: Value = r.json().unwrap();
            assert_eq!(body["success"], json!(false));
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} setters were checked");
    // nothing changed
    assert_eq!(server.admin_json("/api/admin/serverconfig"), before);
}

fn out_of_range_values_are_refused_with_a_message(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let root_only = root_only_setters(&daemon, on);
    let cases = [
        ("video/streamlatencylevel", json!(5), "out of range"),
        ("video/streamlatencylevel", json!(-1), "out of range"),
        ("webserverport", json!(0), "out of range"),
        ("rtmpserverport", json!(70000), "out of range"),
        ("srtserverport", json!(70000), "out of range"),
        ("srt/passphrase", json!("too-short"), "10 to 79 printable ASCII characters"),
        ("webserverip", json!("not-an-ip"), "not an IP"),
        ("serverurl", json!("ftp://example.com"), "http"),
        ("sockethostoverride", json!("no url"), "not a valid URL"),
        ("sockethostoverride", json!("ftp://chat.example.com"), "ws, wss, http or https"),
        ("video/streamoutputvariants", json!([]), "at least one"),
        ("video/streamoutputvariants", json!([{"cpuUsageLevel": 7}]), "cpuUsageLevel"),
        ("video/streamoutputvariants", json!([{"framerate": 500}]), "framerate"),
        ("streamkeys", json!([{"key": "  "}]), "must not be empty"),
        ("streamkeys", json!([{"key": "a\u{0}b"}]), "control characters"),
        ("video/codec", json!("h264_nvenc"), "not available"),
        ("federation/enable", json!(true), "server URL"),
        ("federation/username", json!("has space"), "letters"),
        ("autoplay", json!("sometimes"), "on, off or muted"),
        ("ffmpegpath", json!("relative/ffmpeg"), "absolute"),
        ("server/overcapacity", json!("queue"), "refuse or passthrough"),
        ("server/maxlivechannels", json!(-1), "out of range"),
        ("socialhandles", json!([{"platform": "x", "url": "javascript:alert(1)"}]), "http"),
        ("adminpass", json!(""), "must not be empty"),
        ("logo", json!("bm90IGFuIGltYWdl"), "must be a PNG"),
        ("logo", json!("!!!"), "base64"),
    ];
    for (name, value, needle) in cases {
        let r = server.admin_post(&format!("/api/admin/config/{name}"), &json!({ "value": value }));
        if on.is_channel() && ROOT_ADMINS_ALONE.contains(&name) {
            assert_eq!(r.status().as_u16(), 403, "{name} is the server admin's alone");
            continue;
        }
        if on.is_channel() && root_only.contains(name) {
            assert_eq!(r.status().as_u16(), 404, "{name} is not on a channel's API");
            continue;
        }
        assert_eq!(r.status().as_u16(), 400, "{name} accepted {value}");
        let body: Value = r.json().unwrap();
        let msg = body["message"].as_str().unwrap_or_default().to_string();
        assert!(msg.contains(needle), "{name} {value}: message {msg:?} lacks {needle:?}");
    }
}

fn admin_routes_need_the_admin_password(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let doc = openapi(&server);
    let mut checked = 0;
    for (method, path, op) in documented_routes(&doc) {
        // Routes that need the admin: every alternative names it (a way out of a private channel lists
        // the channel admin's Basic credentials as one alternative to a viewing pass).
        if op.get("security").and_then(|s| s.as_array()).is_none_or(|s| !s.iter().all(|r| r.get("admin").is_some())) {
            continue;
        }
        let path = path.replace("{", "").replace("}", "");
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        // Each route's wrong password comes from an address of its own: from one address, wrong
        // passwords get 429 after the first few (tests/security_limits.rs), and this is about each
        // route refusing, not about that limit.
        let n = u16::try_from(checked + 1).unwrap().to_be_bytes();
        let from = std::net::IpAddr::from([127, 0, 2 + n[0], n[1]]);
        let client = reqwest::blocking::Client::builder().local_address(from).build().unwrap();
        for auth in [None, Some(("admin", "wrong-password")), Some(("root", server.admin_password.as_str()))] {
            let mut req = client.request(m.clone(), server.url(&path)).json(&json!({"value": "x"}));
            if let Some((u, p)) = auth {
                req = req.basic_auth(u, Some(p));
            }
            let r = req.send().unwrap();
            assert_eq!(r.status().as_u16(), 401, "{method} {path} with {auth:?}");
            assert!(
                r.headers().get("www-authenticate").is_some_and(|v| v.to_str().unwrap().starts_with("Basic")),
                "{method} {path}: no WWW-Authenticate"
            );
            if m != reqwest::Method::HEAD {
                let body: Value = r.json().unwrap_or_else(|e| panic!("{method} {path}: not JSON: {e}"));
                assert_eq!(body, *UNAUTHORIZED, "{method} {path} with {auth:?}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} admin routes");
    // the right password works
    assert!(server.admin_get("/api/admin/status").status().is_success());
    // a cross-site browser request is refused even with credentials
    let r = server
        .client
        .get(server.url("/api/admin/status"))
        .basic_auth("admin", Some(&server.admin_password))
        .header("origin", "https://evil.example")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

/// Owncast's 401 body, whose text Owncast clients match case-sensitively.
static UNAUTHORIZED: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| json!({"success": false, "message": "Unauthorized"}));

/// Every kind of Owncast auth answers its 401 with the same StatusResponse, `Unauthorized` exactly: the
/// admin's Basic auth, an integration's bearer token and a chat user's `?accessToken=`.
#[test]
fn unauthorized_answers_say_exactly_unauthorized() {
    let server = Server::start();
    let body = |r: reqwest::blocking::Response, what: &str| -> Value {
        assert_eq!(r.status().as_u16(), 401, "{what}");
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "{what}");
        r.json().unwrap_or_else(|e| panic!("{what}: not JSON: {e}"))
    };
    let get = |path: &str| server.client.get(server.url(path));
    // admin: no credentials, a wrong password
    assert_eq!(body(get("/api/admin/status").send().unwrap(), "admin, none"), *UNAUTHORIZED);
    let wrong = get("/api/admin/chat/messages").basic_auth("admin", Some("not-the-password")).send().unwrap();
    assert_eq!(body(wrong, "admin, wrong password"), *UNAUTHORIZED);
    // integrations: no token, an unknown one, one without the scope
    assert_eq!(body(get("/api/integrations/chat").send().unwrap(), "integration, none"), *UNAUTHORIZED);
    let unknown = get("/api/integrations/chat").bearer_auth("no-such-token").send().unwrap();
    assert_eq!(body(unknown, "integration, unknown token"), *UNAUTHORIZED);
    let r =
        server.admin_post("/api/admin/accesstokens/create", &json!({"name": "bot", "scopes": ["CAN_SEND_MESSAGES"]}));
    let token = r.json::<Value>().unwrap()["accessToken"].as_str().unwrap().to_string();
    let unscoped = get("/api/integrations/chat").bearer_auth(&token).send().unwrap();
    assert_eq!(body(unscoped, "integration, without the scope"), *UNAUTHORIZED);
    let post = server.client.post(server.url("/api/integrations/chat/system")).bearer_auth(&token);
    assert_eq!(body(post.json(&json!({"body": "x"})).send().unwrap(), "integration POST"), *UNAUTHORIZED);
    // a chat user: no token, an unknown one
    assert_eq!(body(get("/api/chat").send().unwrap(), "chat user, none"), *UNAUTHORIZED);
    assert_eq!(body(get("/api/chat?accessToken=nope").send().unwrap(), "chat user, unknown"), *UNAUTHORIZED);
    let r = server.client.post(server.url("/api/chat/messagevisibility?accessToken=nope"));
    let r = r.json(&json!({"idArray": ["x"], "visible": false})).send().unwrap();
    assert_eq!(body(r, "moderator, unknown"), *UNAUTHORIZED);
}

#[test]
fn first_start_password_file_and_changed_password() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start();
    let file = server.data_dir.join("initial-admin-password");
    let meta = std::fs::metadata(&file).expect("initial-admin-password exists");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let pw = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(pw.len() >= 16, "generated password is too short");
    // Never logged (the journal and the admin log view keep logs); the log says where the file is.
    assert!(!server.log_text().contains(&pw), "the password is not logged");
    assert!(server.log_text().contains("initial-admin-password"), "the log names the file");
    let r = server.client.get(server.url("/api/admin/status")).basic_auth("admin", Some(&pw)).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // not a well-known default
    let r = server.client.get(server.url("/api/admin/status")).basic_auth("admin", Some("abc123")).send().unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // change it; the old one stops working, the new one survives a restart
    server.set("adminpass", json!("a-new-password-1"));
    let r = server.client.get(server.url("/api/admin/status")).basic_auth("admin", Some(&pw)).send().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let mut server = server.restart();
    server.admin_password = "a-new-password-1".into();
    assert!(server.admin_get("/api/admin/status").status().is_success());
    assert!(!server.log_text().contains("generated an admin password"), "no new password on the second start");
    // the database never holds the password itself
    let db = std::fs::read(server.data_dir.join("castd.db")).unwrap();
    let wal = std::fs::read(server.data_dir.join("castd.db-wal")).unwrap_or_default();
    for bytes in [db, wal] {
        assert!(!bytes.windows(16).any(|w| w == &b"a-new-password-1"[..]), "plain password stored");
    }
}

#[test]
fn adminpassword_flag_is_persisted_and_streamkey_flag_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut server =
        Server::start_in(dir.path(), &["--adminpassword", "flag-password-1", "--streamkey", "temporary-key-1"]);
    server.admin_password = "flag-password-1".into();
    let cfg = server.admin_json("/api/admin/serverconfig");
    assert_eq!(cfg["streamKeyOverridden"], json!(true));
    assert!(!cfg["streamKeys"].to_string().contains("temporary-key-1"));
    server.stop();
    let mut server = Server::start_in(dir.path(), &[]);
    server.admin_password = "flag-password-1".into();
    let cfg = server.admin_json("/api/admin/serverconfig");
    assert_eq!(cfg["streamKeyOverridden"], json!(false));
    // a default stream key was generated (random, not a well-known one)
    let keys = cfg["streamKeys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    assert!(keys[0]["key"].as_str().unwrap().len() >= 16);
}

#[test]
fn openapi_lists_every_route_the_router_serves() {
    let server = Server::start();
    let doc = openapi(&server);
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..2]), Some("3."));
    let routes = documented_routes(&doc);
    assert!(routes.len() >= 60, "only {} routes documented", routes.len());
    for (method, path, _) in &routes {
        let concrete = path.replace("{", "x").replace("}", "");
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let r = server
            .client
            .request(m, server.url(&concrete))
            .basic_auth("admin", Some(&server.admin_password))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().unwrap_or_default();
        // federation routes answer 405 while federation is off (Owncast's behaviour), with that message
        assert!(
            status != 405 || text.contains("federation is not enabled"),
            "{method} {path} is documented but the router has no such method"
        );
        assert!(
            !(status == 404 && text.contains("no such route")),
            "{method} {path} is documented but the router does not serve it"
        );
        assert!(status < 500, "{method} {path} answered {status} without a body: {text}");
    }
    // every success answer that is JSON (any `application/*json` media type) says its shape: a schema
    // from the Rust type that builds the body, never an untyped `json!` body
    let mut untyped = Vec::new();
    for (method, path, op) in &routes {
        for (status, resp) in op["responses"].as_object().expect("responses") {
            if !status.starts_with('2') {
                continue;
            }
            for (ctype, content) in resp["content"].as_object().into_iter().flatten() {
                let essence = ctype.split(';').next().unwrap_or_default().trim();
                let json = essence.starts_with("application/") && essence.ends_with("json");
                let schema = &content["schema"];
                if json && schema.as_object().is_none_or(|o| o.is_empty()) {
                    untyped.push(format!("{method} {path} {status} {ctype}"));
                }
            }
        }
    }
    assert!(untyped.is_empty(), "JSON success answers without a schema: {untyped:?}");
    // the control: a route that is not documented is not served
    let r = server.get("/api/definitely/not/a/route");
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = r.json().unwrap();
    assert_eq!(body["success"], json!(false));
    // and the CLI prints the same document
    let out = std::process::Command::new(common::BIN)
        .args(["--data-dir", server.data_dir.to_str().unwrap(), "openapi"])
        .output()
        .unwrap();
    let cli_doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli_doc["paths"], doc["paths"]);
    assert_eq!(cli_doc["components"], doc["components"]);
}

/// `castd openapi` prints the document without a daemon: it neither creates nor reads the data dir
/// (the web UI's types are generated from it on machines without one).
#[test]
fn openapi_command_touches_no_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let out = std::process::Command::new(common::BIN)
        .args(["--data-dir", data_dir.to_str().unwrap(), "openapi"])
        .output()
        .unwrap();
    assert!(out.status.success(), "castd openapi failed: {}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["paths"]["/api/admin/webhooks/create"].is_object());
    assert!(!data_dir.exists(), "castd openapi created the data dir {}", data_dir.display());
}

/// The webhook create body's event types are exactly those the route accepts: each type castd knows
/// (the `EventType` schema) is created when the document lists it and refused when it does not.
#[test]
fn webhook_event_types_are_documented_exactly() {
    let server = Server::start();
    let doc = openapi(&server);
    let names = |v: &Value| -> BTreeSet<String> {
        v.as_array().expect("an enum").iter().map(|n| n.as_str().expect("a name").to_string()).collect()
    };
    let body = &doc["paths"]["/api/admin/webhooks/create"]["post"]["requestBody"]["content"]["application/json"];
    let documented = names(&body["schema"]["properties"]["events"]["items"]["enum"]);
    let known = names(&doc["components"]["schemas"]["EventType"]["enum"]);
    assert!(known.len() > documented.len(), "internal event types are not webhook types");
    let mut accepted = BTreeSet::new();
    for name in &known {
        let r = server
            .admin_post("/api/admin/webhooks/create", &json!({"url": "http://hooks.example/x", "events": [name]}));
        match r.status().as_u16() {
            200 => {
                accepted.insert(name.clone());
            }
            400 => {}
            s => panic!("creating a {name} webhook answered {s}"),
        }
    }
    assert_eq!(documented, accepted, "the documented webhook event types differ from those accepted");
}

fn public_endpoints(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let status = server.get_json("/api/status");
    for field in [
        "online",
        "viewerCount",
        "lastConnectTime",
        "lastDisconnectTime",
        "serverTime",
        "versionNumber",
        "streamTitle",
        "name",
        "description",
        "logo",
        "tags",
        "social",
        "overallMaxViewerCount",
        "sessionMaxViewerCount",
        "nsfw",
    ] {
        assert!(status.get(field).is_some(), "/api/status lacks {field}");
    }
    assert_eq!(status["online"], json!(false));
    let cfg = server.get_json("/api/config");
    for field in [
        "name",
        "summary",
        "streamTitle",
        "offlineMessage",
        "logo",
        "version",
        "tags",
        "customStyles",
        "extraPageContent",
        "socketHostOverride",
        "appearanceVariables",
        "socialHandles",
        "externalActions",
        "notifications",
        "federation",
        "maxSocketPayloadSize",
        "hideViewerCount",
        "chatDisabled",
        "chatRequireAuthentication",
        "nsfw",
        "autoplay",
        "authentication",
    ] {
        assert!(cfg.get(field).is_some(), "/api/config lacks {field}");
    }
    assert_eq!(cfg["maxSocketPayloadSize"], json!(2048));
    assert_eq!(cfg["tags"], json!(["owncast", "streaming"]));

    // hideViewerCount hides the counts from the public status only
    server.set("hideviewercount", json!(true));
    let status = server.get_json("/api/status");
    assert!(status.get("viewerCount").is_none());
    assert!(server.admin_json("/api/admin/status").get("viewerCount").is_some());

    // directory data only when enabled (the directory itself is a local address: no ping leaves); the
    // directory lists the server: a channel has none of its routes
    assert_eq!(server.get("/api/yp").status().as_u16(), 404);
    if !on.is_channel() {
        server.set("directoryurl", json!("http://127.0.0.1:9"));
        server.set("serverurl", json!("https://live.example.com"));
        server.set("directoryenabled", json!(true));
        assert_eq!(server.get_json("/api/yp")["name"], json!("castd"));
    }

    let variants = server.get_json("/api/video/variants");
    assert_eq!(variants, json!([{"index": 0, "name": "1200 kbps"}]));
    assert!(server.get_json("/api/socialplatforms")["mastodon"]["name"].is_string());

    let robots = server.get("/robots.txt").text().unwrap();
    assert!(robots.contains("Disallow: /admin"));
    server.set("disablesearchindexing", json!(true));
    assert!(server.get("/robots.txt").text().unwrap().lines().any(|l| l == "Disallow: /"));

    // Custom JavaScript is the server admin's alone: a channel's setter is 403 and its script empty.
    if server.is_channel() {
        let r = server.admin_post("/api/admin/config/customjavascript", &json!({ "value": "window.x = 1;" }));
        assert_eq!(r.status().as_u16(), 403);
    } else {
        server.set("customjavascript", json!("window.x = 1;"));
    }
    let r = server.get("/customjavascript");
    assert!(r.headers()["content-type"].to_str().unwrap().contains("javascript"));
    assert_eq!(r.text().unwrap(), if server.is_channel() { "" } else { "window.x = 1;" });

    // CORS preflight on API routes
    let r = server.client.request(reqwest::Method::OPTIONS, server.url("/api/admin/config/name")).send().unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    assert!(r.headers()["access-control-allow-methods"].to_str().unwrap().contains("POST"));
}

fn logo_and_favicon_uploads(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    // the built-in logo first
    let r = server.get("/logo");
    assert_eq!(r.headers()["content-type"], "image/svg+xml");

    // a real 1x1 PNG
    let png: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4, 0x89, 0x00, 0x00, 0x00,
        0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D,
        0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(png);
    server.set("logo", json!(format!("data:image/png;base64,{b64}")));
    let r = server.get("/logo");
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().unwrap().as_ref(), png);

    let form = |bytes: Vec<u8>| {
        reqwest::blocking::multipart::Form::new()
            .part("favicon", reqwest::blocking::multipart::Part::bytes(bytes).file_name("favicon.png"))
    };
    let up = |f| {
        server
            .client
            .post(server.url("/api/admin/config/favicon"))
            .basic_auth("admin", Some(&server.admin_password))
            .multipart(f)
            .send()
            .unwrap()
    };
    let r = up(form(b"GIF89a-not-allowed".to_vec()));
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("PNG or ICO"));
    let r = up(form(vec![0x89; 300 * 1024]));
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("too large"));
    let r = up(reqwest::blocking::multipart::Form::new().text("other", "x"));
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("no file"));
    let r = up(form(png.to_vec()));
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().unwrap());
    let r = server.get("/favicon.ico");
    assert_eq!(r.headers()["content-type"], "image/png");
}

#[test]
fn sigterm_shuts_down_cleanly_and_keeps_data() {
    let mut server = Server::start();
    server.set("name", json!("Kept across a stop"));
    assert_eq!(server.stop(), Some(0), "castd exits 0 on SIGTERM");
    assert!(server.log_text().contains("stopped"));
    // the WAL was checkpointed: the main file alone holds the data
    let dir = server.data_dir.clone();
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("castd.db"), copy.path().join("castd.db")).unwrap();
    let server = Server::start_in(copy.path(), &[]);
    assert_eq!(server.get_json("/api/config")["name"], json!("Kept across a stop"));
}

#[test]
fn help_documents_every_flag() {
    let out = std::process::Command::new(common::BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--data-dir",
        "--database",
        "--webserverip",
        "--webserverport",
        "--rtmpport",
        "--adminpassword",
        "--streamkey",
        "--log-level",
        "CASTD_DATA_DIR",
        "CASTD_WEBSERVERPORT",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

/// The web UI's files: the precompressed copy the request accepts (brotli, then gzip, else identity),
/// with `Vary`, a strong ETag per representation (304 on revalidation), Range and HEAD.
#[test]
fn web_assets_are_precompressed_and_revalidate() {
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web/dist");
    if !dist.join("index.html").exists() {
        eprintln!("skipped: web/dist is not built (make test builds it first)");
        return;
    }
    let server = Server::start();
    let index = server.get("/").text().unwrap();
    let js = index.split('"').find(|s| s.starts_with("/assets/") && s.ends_with(".js")).expect("a script in the page");
    let on_disk = |suffix: &str| std::fs::read(dist.join(format!("{}{suffix}", &js[1..]))).unwrap();
    let fetch = |accept: &str, extra: &[(&str, &str)]| {
        let mut req = server.client.get(server.url(js)).header("accept-encoding", accept);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        req.send().unwrap()
    };

    let br = fetch("gzip, deflate, br", &[]);
    assert_eq!(br.status(), 200);
    assert_eq!(br.headers()["content-encoding"], "br");
    assert_eq!(br.headers()["vary"], "Accept-Encoding");
    assert!(br.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert!(br.headers()["cache-control"].to_str().unwrap().contains("immutable"));
    let br_etag = br.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(br.bytes().unwrap().as_ref(), on_disk(".br").as_slice());

    let gz = fetch("gzip", &[]);
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    let gz_etag = gz.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(gz.bytes().unwrap().as_ref(), on_disk(".gz").as_slice());

    let plain = fetch("identity", &[]);
    assert!(plain.headers().get("content-encoding").is_none());
    assert_eq!(plain.headers()["vary"], "Accept-Encoding");
    let plain_etag = plain.headers()["etag"].to_str().unwrap().to_string();
    let raw = on_disk("");
    assert_eq!(plain.bytes().unwrap().as_ref(), raw.as_slice());
    assert!(br_etag != gz_etag && gz_etag != plain_etag, "one validator per representation");

    assert_eq!(fetch("br", &[("if-none-match", br_etag.as_str())]).status(), 304);
    assert_eq!(fetch("identity", &[("if-none-match", br_etag.as_str())]).status(), 200);
    let part = fetch("identity", &[("range", "bytes=0-9")]);
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], format!("bytes 0-9/{}", raw.len()));
    assert_eq!(part.bytes().unwrap().as_ref(), &raw[..10]);
    let head = server.client.head(server.url(js)).header("accept-encoding", "br").send().unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["etag"].to_str().unwrap(), br_etag);
    assert!(head.bytes().unwrap().is_empty());

    // Pages revalidate too (no-cache + ETag).
    let page = server.get("/");
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let etag = page.headers()["etag"].to_str().unwrap().to_string();
    let again = server.client.get(server.url("/")).header("if-none-match", etag).send().unwrap();
    assert_eq!(again.status(), 304);
}

/// `GET /api/admin/serverconfig` is assembled from every feature's part: Owncast's keys (with the
/// interface spec's extras), in Owncast's order, each nested object complete, and the OpenAPI schema
/// names exactly those keys.
fn serverconfig_is_every_features_part_in_owncast_order(on: On) {
    let daemon = Server::start();
    let server = on.of(&daemon);
    let root_only = root_only_setters(&daemon, on);
    let top = [
        "instanceDetails",
        "adminPassword",
        "streamKeys",
        "streamKeyOverridden",
        "ffmpegPath",
        "webServerPort",
        "webServerIP",
        "rtmpServerPort",
        "rtmpServerAddress",
        "serverURL",
        "socketHostOverride",
        "videoServingEndpoint",
        "capacity",
        "allowPrivateTargets",
        "srtServerPort",
        "srtPassphrase",
        "s3",
        "videoSettings",
        "videoCodec",
        "supportedCodecs",
        "yp",
        "chatDisabled",
        "chatJoinMessagesEnabled",
        "chatEstablishedUserMode",
        "chatSpamProtectionEnabled",
        "chatSlurFilterEnabled",
        "chatSlurFilterWords",
        "chatRequireAuthentication",
        "forbiddenUsernames",
        "suggestedUsernames",
        "hideViewerCount",
        "disableSearchIndexing",
        "externalActions",
        "federation",
        "notifications",
        "schedule",
        "webrtcEnabled",
        "webrtcMaxViewers",
        "webrtcVariant",
        "webrtcRequireAuthentication",
        "simulcastTargets",
        "replay",
        "access",
    ];
    let nested: &[(&str, &[&str])] = &[
        (
            "instanceDetails",
            &[
                "name",
                "summary",
                "welcomeMessage",
                "offlineMessage",
                "logo",
                "tags",
                "version",
                "nsfw",
                "extraPageContent",
                "streamTitle",
                "socialHandles",
                "customStyles",
                "customJavascript",
                "appearanceVariables",
                "autoplay",
            ],
        ),
        (
            "s3",
            &["enabled", "endpoint", "accessKey", "secret", "bucket", "region", "acl", "pathPrefix", "forcePathStyle"],
        ),
        ("videoSettings", &["videoQualityVariants", "latencyLevel"]),
        ("yp", &["enabled", "instanceUrl", "directoryUrl"]),
        (
            "federation",
            &[
                "enabled",
                "isPrivate",
                "username",
                "goLiveMessage",
                "showEngagement",
                "enableQuotes",
                "hideFollowersTab",
                "blockedDomains",
            ],
        ),
        ("notifications", &["browser", "discord"]),
        ("capacity", &["maxLiveChannels", "overCapacity", "transcodeBudget", "transcodeBudgetInForce"]),
        (
            "schedule",
            &[
                "enabled",
                "showCountdown",
                "chatOpenMinutesBefore",
                "reminderMessage",
                "firstReminderMinutes",
                "secondReminderMinutes",
            ],
        ),
        (
            "replay",
            &[
                "enabled",
                "clipsEnabled",
                "maxClipDurationSeconds",
                "clipPermissions",
                "forcedByCommandLine",
                "maxGigabytes",
                "retentionDays",
                "announceClips",
            ],
        ),
        ("access", &["visibility", "viewerPassSeconds", "privateFederationPosts", "viewerJwt", "admissionHook"]),
    ];
    let keys = |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
    let names = |list: &[&str]| -> BTreeSet<String> { list.iter().map(|s| s.to_string()).collect() };
    // `capacity` and `allowPrivateTargets` (the server's) are the root's alone: a channel's configuration
    // leaves them out.
    let root_keys = ["capacity", "allowPrivateTargets"];
    let here: Vec<&str> = top.iter().copied().filter(|k| !(on.is_channel() && root_keys.contains(k))).collect();
    let text = server.admin_get("/api/admin/serverconfig").text().unwrap();
    let cfg: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&cfg), names(&here));
    for (key, inner) in nested {
        if here.contains(key) {
            assert_eq!(keys(&cfg[*key]), names(inner), "{key}");
        }
    }
    // In Owncast's order: each top-level key is first named after the one before it.
    let at: Vec<usize> = here.iter().map(|k| text.find(&format!("\"{k}\":")).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "serverconfig keys out of order: {text}");
    // The OpenAPI schema is one object with exactly these properties, all required.
    let doc = openapi(&server);
    let schema = &doc["components"]["schemas"]["ServerConfig"];
    assert_eq!(schema["type"], json!("object"));
    assert_eq!(keys(&schema["properties"]), names(&top));
    let required: BTreeSet<String> =
        schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    let always: Vec<&str> = top.iter().copied().filter(|k| !root_keys.contains(k)).collect();
    assert_eq!(required, names(&always));
    // A setter of each feature changes its own part.
    for (setter, value, ptr, expected) in [
        ("chat/disable", json!(true), "/chatDisabled", json!(true)),
        ("federation/username", json!("bob"), "/federation/username", json!("bob")),
        (
            "notifications/browser",
            json!({"enabled": true, "goLiveMessage": "hi"}),
            "/notifications/browser/enabled",
            json!(true),
        ),
        ("directoryurl", json!("https://dir.example.com"), "/yp/directoryUrl", json!("https://dir.example.com")),
        ("video/streamlatencylevel", json!(3), "/videoSettings/latencyLevel", json!(3)),
        ("schedule/enabled", json!(true), "/schedule/enabled", json!(true)),
        ("hideviewercount", json!(true), "/hideViewerCount", json!(true)),
    ] {
        if on.is_channel() && (root_only.contains(setter) || ROOT_ADMINS_ALONE.contains(&setter)) {
            continue;
        }
        server.set(setter, value);
        let cfg = server.admin_json("/api/admin/serverconfig");
        assert_eq!(cfg.pointer(ptr), Some(&expected), "{setter}");
        assert_eq!(keys(&cfg), names(&here), "after {setter}");
    }
}
