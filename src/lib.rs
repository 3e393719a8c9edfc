//! castd: a self-hosted live-video streaming server with viewer chat and an Owncast-compatible API.
//!
//! `main.rs` parses the command line, opens the database, binds the listeners and calls [`run`]; the
//! tests call the same entry. The modules, bottom layer first; each says in its own doc what it owns.
//! A bottom-layer module may use the ones listed before it; a feature may use the bottom layer and the
//! features its entry says it "uses", and otherwise talks to the others only through bus events and
//! the narrow handles `daemon` gives them at construction (`tests/architecture.rs` reads this map and
//! checks that the module graph has no cycles and that the imports are the ones listed here).
//!
//! **Bottom layer** (imports no feature; each module uses only those of the bullets above its own):
//! - [`password`], [`markdown`]: password hashing (bcrypt, checked on its own small pool), random
//!   tokens, the weak-secret rule and constant-time comparison; Markdown rendering.
//! - [`config`]: the typed settings, their defaults and validation. `Settings` is one section per
//!   feature (`config::chat`, `config::federation`, ...; flattened, so each field is one row of the
//!   settings table under its own key). The section types live here because features read each
//!   other's settings; each section's setters and its part of the admin server configuration belong
//!   to the feature that owns it (listed with each feature below).
//! - [`events`]: the typed events bus (every event name in one enum, typed payloads; chat's wire
//!   types live in `events::chat`, the schedule's, simulcast's and replays' webhook payloads in
//!   `events::{schedule, simulcast, replays}`, the settings store's change announcement in
//!   `events::settings`).
//! - [`store`]: the SQLite database (one file, WAL, per-module migrations) and the settings table,
//!   which announces every change of the settings on the bus (`Event::SettingsChanged`: which
//!   sections changed, before and after; the only source of that event, and no feature names a
//!   setting by a string to learn of a change).
//! - [`throttle`]: limits per client address (backoff after failed guesses of a secret, token-bucket
//!   rates, caps on what one address holds at once).
//! - [`outbound`]: the one guarded HTTP client for fetches made on behalf of anyone but the admin
//!   (public addresses only after resolution, bounded bodies, per-host limits, generic errors).
//! - [`stream`]: the stream's runtime state (one writer, the transcoder; readers get a `watch`) and the
//!   viewer counters (one writer, metrics).
//! - [`health`]: the health aggregator; hardware, transcode and metrics report typed inputs into it.
//! - [`telemetry`]: figures features produce for metrics (encoder speed, CPU, chat clients, ...).
//! - [`http`]: `ApiError`/`StatusResponse`, extractors, admin auth, the route `Registry` and OpenAPI,
//!   and the setters' plumbing (`http::setters`: the `Setter` table type, `SettingsHost`, `register`)
//!   that every feature registers its own setters with.
//! - [`tasks`]: the one task lifecycle: every long-running task is spawned on one tracker and stops
//!   with its shutdown stage (one cancellation token tree; `daemon` stops the stages in order).
//! - [`systemd`]: sd_notify readiness, status, watchdog and journal-friendly logs.
//! - [`logs`]: the admin log view, a bounded ring of recent log events filled by a `tracing` layer
//!   that `main.rs` installs (`/api/admin/logs`, `/api/admin/logs/warnings`).
//! - [`media`]: the media plane, the one owner of the live media between ingest and every output.
//!   Keyed by channel (`ChannelId`: `default` is today's castd, its folders where they always were):
//!   each channel has a publisher slot, retention (live windows, holds, the only deleter of segments)
//!   and a source tap, and while live one **broadcast** (`media::Broadcast`): created when a publisher
//!   goes live (`MediaPlane::go_live`), it holds the source (the ingest's `SourceWriter`, the
//!   transcoder's `SourceReader`), the **running profile** (stream id, the ladder as transcoded,
//!   segment length and list size, latency mode, real-time variant, encoders, start time), the output
//!   feed (`Started`, `SegmentWritten`, `PartWritten`, `InitWritten`, `PlaylistWritten`,
//!   `SegmentRetired`, `StreamEnded`; a bounded queue per reader, lagged readers resync from the
//!   window) and the real-time feed. Every output reads a broadcast the same way: it registers once
//!   (`MediaPlane::reader`) and is handed each new broadcast with its own feed subscription, or asks
//!   for a channel's current one; it reads what runs from the profile, never from the settings. Media
//!   never travels on the control bus; nobody learns what is new by re-reading a playlist.
//!
//!   ```text
//!   OBS --RTMP--> ingest/rtmp  --claim(channel, Source), go_live--> media::Broadcast
//!       --SRT---> ingest/srt     (SourceWriter: FLV tags; MPEG-TS runs;      | source (first reader)
//!       --WHIP--> ingest/whip     WHIP: H.264+Opus muxed by media::tsmux)    v
//!      (webrtc)                                        transcode (worker child process, its container)
//!                                                              | Started{profile}, what the worker wrote
//!                                                              v
//!                                       broadcast: the channel's retention (windows, holds) -> feed
//!                                           |        |         |          |          |          |
//!                                          hls     llhls    storage    replays   simulcast   whep/metrics
//!   ```
//! - [`webrtc`]: the one WebRTC stack (str0m, sans-IO) that WHIP ingest and WHEP playback share: the
//!   single UDP socket (`--webrtc-udp-port`), ICE-lite host candidates (`--webrtc-public-ip`), the
//!   demultiplexing of datagrams to sessions, the session registry and driver (a task per session,
//!   a bounded queue each), and the WHIP/WHEP HTTP resource handling (`webrtc::http`). Knows neither
//!   protocol's media: each session's `Peer` does.
//!
//! **Features** (each owns its state type, its routes and its start function; "uses" lists the
//! modules besides the bottom layer it may import, and the handles it is given):
//! - [`tokens`]: integration access tokens and the Bearer check. Uses nothing else.
//! - [`access`]: who may watch a channel: its visibility (public, unlisted, password, token), viewing
//!   passes (HMAC-signed, expiring, revocable) from viewer passwords, invite links and JWTs of the
//!   operator's site, the admission hook, and the gate in front of every way out of the channel
//!   (`http::gate`: HLS, LL-HLS, WHEP, chat, status, thumbnails, replays, clips). Uses nothing else.
//!   Owns the access settings: `access::api` (`visibility`, `viewer/*` setters, serverconfig part).
//! - [`webhooks`]: outbound webhooks and their reliable delivery (outbox at shutdown). Subscribes to the
//!   bus; reports deliveries through telemetry.
//! - [`hardware`]: encoder discovery (probe in child processes; the encoder list is a `watch` it alone
//!   writes), CPU/memory/disk/GPU statistics (alerts into the health hub, samples into telemetry) and
//!   whether a ladder fits the box (`hardware::fit`: a short measurement per encoder and rung size in a
//!   `castd measure` child, cached per box in the data dir; the admin Video page asks before going live).
//! - [`transcode`]: the transcode worker process, its supervision, the stream's life cycle (the only
//!   writer of the stream state), capacity-aware ladders (x264 presets stepped down when the box cannot
//!   keep up, TRANSCODE_DEGRADED), thumbnails: the media plane's first reader (each broadcast's source
//!   and the writer of its profile and feed). Given: settings, bus, stream writer, viewer counts,
//!   health hub, telemetry, the encoder list, the media plane. Sees no HTTP types and no tokens.
//! - [`ingest`]: what every publishing protocol shares (the stream-key check with its per-address
//!   backoff, the single-publisher slot of the media plane, the hand-off of the media) and one module
//!   per protocol: `ingest::rtmp`; `ingest::srt`, MPEG-TS over SRT cut into runs by `media::ts`;
//!   `ingest::whip`, WebRTC publishing (`POST /whip`) on the `webrtc` stack, H.264 and Opus muxed to
//!   MPEG-TS by `media::tsmux`. A right key names its channel; the protocol claims that channel's slot
//!   and hands the media to the media plane (`MediaPlane::go_live`), never to the transcoder.
//!   Owns the ingest settings section (the SRT port and passphrase) and its setters.
//! - [`metrics`]: viewers (the only writer of the viewer counts), playback reports (CMCD, legacy),
//!   series, playback health (into the health hub), Prometheus (from telemetry).
//! - [`llhls`]: low-latency HLS: the CMAF parts in memory (from the media feed's `PartWritten`), LL-HLS
//!   playlists, blocking reload and preload-hinted parts. Uses nothing else; `hls` hands it requests.
//! - [`hls`]: serving playlists, segments, thumbnail and preview. Uses `metrics` (viewer and CMCD seams),
//!   `transcode` (the image file names) and `llhls` (asked first while a variant is live in LL mode).
//! - [`chat`]: the websocket hub, users, messages, moderation, emoji, chat and integration routes.
//!   Uses `tokens` (bot routes); implements `http::UserTokens` for other features' token routes. Given
//!   the schedule's "chat is open for a scheduled stream" answer as a closure (offline chat rule).
//!   Owns the chat settings: `chat::settings` (`/api/admin/config/chat/*`, its serverconfig part).
//! - [`notifications`]: go-live browser push and Discord messages. Given a `UserTokens` handle. Owns the
//!   notification settings: `notifications::settings` (`notifications/*` setters, serverconfig part).
//! - [`indieauth`]: chat sign-in with IndieAuth (client, with a guarded fetcher for discovery) and
//!   castd as the streamer's IndieAuth server. Given a `UserTokens` handle (token check, sign-in).
//! - [`federation`]: ActivityPub: the actor, discovery, the signed inbox, followers, the persistent
//!   delivery queue, the go-live post, federated servers, Fediverse chat sign-in. Subscribes to the
//!   bus (go-live), publishes engagement as chat events; given a `UserTokens` handle, and by the
//!   composition root the other channels' actors (the root's WebFinger) and the user names taken
//!   (one actor per channel, each name its own). Owns the
//!   federation settings: `federation::settings` (`federation/*` setters, serverconfig part).
//! - [`schedule`]: scheduled streams (one-off events and RRULE series in IANA zones), the public
//!   schedule and its iCalendar feed, the schedule settings, reminders and the SCHEDULED_EVENTS
//!   webhooks. Publishes on the bus (webhook payloads, reminders that federation posts); gives `api` a
//!   `ScheduleWatch` (the next event, whether chat is open for it). Owns the schedule settings: its
//!   setters (`schedule/*`, in `schedule::api`) and its serverconfig part (`schedule::settings`).
//! - [`api`]: public config/status, admin status and server configuration, the security warnings (weak
//!   admin password, short stream keys) and the update-options routes. Owns the instance and server
//!   settings' setters (`api::setters`) and, on behalf of `transcode` (which sees no HTTP types), the
//!   video settings' (`api::video`). `GET /api/admin/serverconfig` is assembled from every feature's
//!   part (`<feature>::settings::server_config`), so `api` uses `chat`, `federation`,
//!   `notifications`, `storage`, `yp`, `schedule`, `simulcast`, `replays`, `ingest`, `whep` and
//!   `access` for those, `tokens`, and `schedule` for the status' `scheduledEvent`; reads the stream, viewers,
//!   health and encoder snapshots it is given.
//! - [`storage`]: object storage (S3-compatible): uploads of segments (held until uploaded) and playlists,
//!   deletes of retired segments and leftovers, the admin "Test connection" route. Follows the media feed
//!   and the bus; uses `hls` (gives it the playlists that point at the bucket through
//!   `hls::PlaylistOverride`); reports into the health hub and telemetry. Owns the storage settings: `storage::settings` (the `s3` setter, serverconfig part).
//! - [`simulcast`]: forwarding the live stream to other platforms (RTMP(S) targets), each target with its
//!   own state (`GET /api/admin/simulcast/status`), backoff, SIMULCAST_STATE_CHANGED and a health notice
//!   for a failed one. A consumer on the media plane: `source` targets read the source tap
//!   (`media::SourceTap`). Owns the simulcast settings: `simulcast::settings` (`simulcast/targets`, the
//!   serverconfig `simulcastTargets`). `variant` targets follow the media feed and remux that variant's
//!   segments with `transcode::remux` (a `castd remux` child; no encode). Uses `transcode` (the child's
//!   executable and the remux); given settings, bus, the media plane, the health hub, the tasks.
//! - [`replays`]: replays and clips: a recorder on the media plane (holds each segment and hard-links it
//!   into `<data-dir>/replays/<streamId>/`, rows written as it goes), replay and clip playlists,
//!   Owncast's clip rules, `download.mp4` remuxes, the disk budget, REPLAY_READY / CLIP_CREATED on the
//!   bus. Uses `tokens` (the bot clip route), `storage` (finished replays in the bucket) and `web`
//!   (the clip page's template); given a `UserTokens` handle (clip permissions, and the broadcast's chat
//!   that a replay's and a clip's chat routes place on its media time) and the admin check.
//!   Owns the replay settings: `replays::settings` (`replay/*` setters, serverconfig part).
//! - [`yp`]: directory (YP) registration: periodic pings to the directory while listing is on. Owns the
//!   directory settings: `yp::settings` (`directoryenabled`, `directoryurl`, the serverconfig `yp`).
//! - [`whep`]: WebRTC playback (WHEP, `POST /whep`): viewers get the media plane's real-time feed
//!   (`media::realtime`: one encoded variant's H.264 access units and Opus audio from the worker)
//!   through the `webrtc` stack. Uses `chat` (chat access tokens when authentication is required),
//!   `ingest` (the H.264 offer check) and `metrics` (a WebRTC viewer's playback reports and counters,
//!   like an HLS viewer's). Owns the WebRTC playback settings' setters (`webrtc/*`).
//! - [`cluster`]: beyond one box: an origin and edges sharing one chat over Redis (`--redis-url`,
//!   `--cluster-secret`; an edge also `--origin`), the edge's HTTP front (the web UI and every
//!   channel's chat socket here, each channel's chat a room over Redis; everything else proxied to the
//!   origin, HLS cached as `Cache-Control` allows), the edges' following of the origin's channels and
//!   presence counts.
//!   Uses `chat` (through `chat::relay`, the seam: the hub's link, the origin's outbound queue, the
//!   handling of a remote client's event), `metrics` (an edge marks the viewers it serves) and
//!   `access` (`access::edge`: an edge checks viewing passes itself with the origin's snapshot). Off
//!   without `--redis-url`.
//! - [`channels`]: many streamers on one castd: the channel table (in the default channel's database),
//!   the server admin's channel routes (`/api/admin/channels`), the public list (`/api/channels`) and the
//!   dispatcher that hands `/c/{slug}/...` to a channel's own router. Each channel is a stack of the
//!   features above, built by the composition root through `channels::ChannelHost`. Uses nothing else.
//! - [`public_files`]: `/public/*`, the files of `<data-dir>/public`.
//! - [`web`]: the embedded web UI (viewer page, admin dashboard, embeds, platform icons).
//!
//! **Tools** (run by `main.rs` as subcommands; not wired by the root, imported by nothing):
//! - [`import`]: `castd import-owncast`, an Owncast data directory into a castd one.
//!
//! **Server-wide** (one per castd, the server's and no channel's; the only modules besides `config`,
//! `store` and the root that may read `config::ServerSettings`): `ingest`, `storage`, `yp`, `hardware`,
//! `cluster`, `channels`, `logs`, `webrtc`, `media`. Every other feature is a channel's, built once per
//! channel.
//!
//! **Composition root**: [`daemon`] builds every feature's state (the server-wide pieces, the default
//! channel's stack and, through `channels`, every other channel's: `daemon::channel`), wires the handles,
//! merges the routers
//! and runs the lifecycle (including the orderly shutdown on SIGTERM).

pub mod access;
pub mod api;
pub mod channels;
pub mod chat;
pub mod cluster;
pub mod config;
pub mod daemon;
pub mod events;
pub mod federation;
pub mod hardware;
pub mod health;
pub mod hls;
pub mod http;
pub mod import;
pub mod indieauth;
pub mod ingest;
pub mod llhls;
pub mod logs;
pub mod markdown;
pub mod media;
pub mod metrics;
pub mod notifications;
pub mod outbound;
pub mod password;
pub mod public_files;
pub mod replays;
pub mod schedule;
pub mod simulcast;
pub mod storage;
pub mod store;
pub mod stream;
pub mod systemd;
pub mod tasks;
pub mod telemetry;
pub mod throttle;
pub mod tokens;
pub mod transcode;
pub mod web;
pub mod webhooks;
pub mod webrtc;
pub mod whep;
pub mod yp;

pub use daemon::run;

/// The version string reported by `/api/config`, `/api/status` and admin status.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
