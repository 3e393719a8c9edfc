//! OBS Studio as a real broadcaster, under Xvfb, cut off from every network.
//!
//! - `Obs::new` starts Xvfb (a display number it picks itself), writes an OBS profile and scene
//!   collection into a temporary `HOME` (a colour source and a looping 440 Hz tone; custom RTMP
//!   service; advanced output with x264 CBR 2500 kbps, keyframe interval 2 s, 1280x720 at 30 fps;
//!   first-run wizard and update checks off; obs-websocket on, without auth) and makes a network
//!   namespace that has only a loopback device.
//! - The namespace reaches castd's RTMP port through a Unix socket: socat listens on
//!   `127.0.0.1:1935` (RTMP's port, free in a fresh namespace) inside the namespace and forwards to
//!   `rtmp.sock`; a second socat, outside, forwards `rtmp.sock` to castd's real RTMP port on the
//!   host's loopback. So OBS is set up exactly as the README tells a streamer on the castd box. obs-websocket (port 4455 inside)
//!   is reached the same way through `obs-websocket.sock`. Nothing else leaves the namespace.
//! - `start` runs OBS in the namespace (`nsenter --net`), optionally with `--startstreaming`.
//! - `Obs::new_srt` streams over SRT instead: the custom service's server is
//!   `srt://127.0.0.1:8890?streamid=live/KEY` (OBS then uses its MPEG-TS/SRT output), bridged as UDP
//!   datagrams: socat in the namespace (`UDP4-LISTEN`) to `srt.sock` (a SOCK_SEQPACKET Unix socket,
//!   which keeps datagram boundaries) to socat outside, which sends them to castd's SRT port.
//!
//! Every process is a `Proc`: killed by its process-group id on drop, also when the test fails.
//! `diag()` gives OBS's own log (`$HOME/.config/obs-studio/logs/`) for failure messages.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

use super::procs::{poll, require, run, Proc};

/// The scene collection's and the profile's name.
const NAME: &str = "castd";
/// obs-websocket's port inside the namespace.
const WEBSOCKET_PORT: u16 = 4455;
/// The RTMP port OBS streams to, inside the namespace (bridged to castd's real port).
pub const RTMP_PORT_IN_NAMESPACE: u16 = 1935;
/// The SRT port OBS streams to with `new_srt`, inside the namespace (bridged to castd's real port).
pub const SRT_PORT_IN_NAMESPACE: u16 = 8890;
/// The virtual screen (big enough for OBS's main window and its settings dialog).
const SCREEN: &str = "1600x1000x24";

/// OBS Studio, its display, its network namespace and the bridges to castd.
pub struct Obs {
    // Fields drop in this order: OBS first, then the bridges, the namespace, the display.
    obs: Option<Proc>,
    /// The UDP bridge of `new_srt` (inside, outside).
    srt_bridge: Vec<Proc>,
    ws_bridge: Proc,
    rtmp_inner: Proc,
    rtmp_outer: Proc,
    netns: Proc,
    _xvfb: Proc,
    pub display: String,
    pub home: PathBuf,
    dir: PathBuf,
    starts: u32,
}

/// The `net:[inode]` of a process's network namespace.
fn netns_of(pid: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).map(|p| p.display().to_string()).unwrap_or_default()
}

/// A command run inside the namespace held by `holder`.
fn in_netns(holder: u32, program: &str) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net=/proc/{holder}/ns/net")).arg("--").arg(program);
    cmd
}

/// Wait for `nsenter ... ss` to show a TCP listener on 127.0.0.1:`port` inside the namespace.
fn wait_listening(holder: u32, port: u16, what: &Proc) {
    let ok = poll(Duration::from_secs(10), || {
        let (_, out) = run(in_netns(holder, "ss").args(["-Hltn", &format!("sport = :{port}")]));
        out.contains(&format!("127.0.0.1:{port}")).then_some(())
    });
    assert!(
        ok.is_some(),
        "{} does not listen on 127.0.0.1:{port} in the namespace:\n{}",
        what.name,
        what.output_text()
    );
}

/// 1 s of a 440 Hz tone, 48 kHz stereo 16-bit PCM (exactly 440 periods, so it loops without a click).
fn tone_wav() -> Vec<u8> {
    let rate = 48_000u32;
    let mut pcm = Vec::with_capacity(rate as usize * 4);
    for i in 0..rate {
        let s = (f64::from(i) * 440.0 * std::f64::consts::TAU / f64::from(rate)).sin() * 0.3 * f64::from(i16::MAX);
        let s = (s as i16).to_le_bytes();
        pcm.extend_from_slice(&s);
        pcm.extend_from_slice(&s);
    }
    let mut wav = Vec::with_capacity(44 + pcm.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + pcm.len() as u32).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&2u16.to_le_bytes()); // channels
    wav.extend_from_slice(&rate.to_le_bytes());
    wav.extend_from_slice(&(rate * 4).to_le_bytes()); // bytes per second
    wav.extend_from_slice(&4u16.to_le_bytes()); // block align
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&(pcm.len() as u32).to_le_bytes());
    wav.extend_from_slice(&pcm);
    wav
}

/// A scene item placed at the origin, unscaled.
fn scene_item(name: &str, id: u32) -> Value {
    json!({
        "name": name, "id": id, "visible": true, "locked": false, "rot": 0.0,
        "pos": {"x": 0.0, "y": 0.0}, "scale": {"x": 1.0, "y": 1.0}, "align": 5,
        "bounds_type": 0, "bounds_align": 0, "bounds": {"x": 0.0, "y": 0.0},
        "crop_left": 0, "crop_top": 0, "crop_right": 0, "crop_bottom": 0,
        "scale_filter": "disable", "blend_method": "default", "blend_type": "normal",
        "show_in_multiview": true, "private_settings": {}
    })
}

fn source(id: &str, versioned_id: &str, name: &str, mixers: u32, settings: Value) -> Value {
    json!({
        "id": id, "versioned_id": versioned_id, "name": name, "enabled": true, "muted": false,
        "volume": 1.0, "mixers": mixers, "flags": 0, "sync": 0, "monitoring_type": 0,
        "private_settings": {}, "settings": settings
    })
}

/// Write OBS's global settings, the `castd` profile and the `castd` scene collection under `home`.
pub fn write_config(home: &Path, server: &str, key: &str, tone: &Path) {
    let cfg = home.join(".config/obs-studio");
    let profile = cfg.join("basic/profiles").join(NAME);
    let scenes = cfg.join("basic/scenes");
    std::fs::create_dir_all(&profile).unwrap();
    std::fs::create_dir_all(&scenes).unwrap();

    // FirstRun + LastVersion (29.0.2 as OBS encodes it) keep the auto-configuration wizard and the
    // "what's new" notes away; the Pre*Defaults keys stop the migrations of old configs.
    std::fs::write(
        cfg.join("global.ini"),
        format!(
            "[General]\nPre19Defaults=false\nPre21Defaults=false\nPre23Defaults=false\nPre24.1Defaults=false\n\
             FirstRun=true\nLastVersion={last_version}\nEnableAutoUpdates=false\nConfirmOnExit=false\n\
             WarnBeforeStartingStream=false\nWarnBeforeStoppingStream=false\nLanguage=en-US\n\n\
             [Basic]\nProfile={NAME}\nProfileDir={NAME}\nSceneCollection={NAME}\nSceneCollectionFile={NAME}\n\
             ConfigOnNewProfile=false\n\n\
             [BasicWindow]\nSysTrayEnabled=true\nSysTrayWhenStarted=false\nShowTransitions=true\n\n\
             [OBSWebSocket]\nFirstLoad=false\nServerEnabled=true\nServerPort={WEBSOCKET_PORT}\nAlertsEnabled=false\n\
             AuthRequired=false\n",
            last_version = (29u32 << 24) | 2,
        ),
    )
    .unwrap();

    std::fs::write(
        profile.join("basic.ini"),
        format!(
            "[General]\nName={NAME}\n\n\
             [Output]\nMode=Advanced\n\n\
             [AdvOut]\nEncoder=obs_x264\nTrackIndex=1\nApplyServiceSettings=true\nUseRescale=false\n\
             AudioEncoder=ffmpeg_aac\nTrack1Bitrate=128\n\n\
             [Video]\nBaseCX=1280\nBaseCY=720\nOutputCX=1280\nOutputCY=720\nFPSType=0\nFPSCommon=30\n\
             ScaleType=bicubic\nColorFormat=NV12\nColorSpace=709\nColorRange=Partial\n\n\
             [Audio]\nSampleRate=48000\nChannelSetup=Stereo\n"
        ),
    )
    .unwrap();
    // The advanced-mode stream encoder: what the README's "OBS settings" section recommends.
    std::fs::write(
        profile.join("streamEncoder.json"),
        json!({"rate_control": "CBR", "bitrate": 2500, "keyint_sec": 2, "preset": "veryfast",
               "profile": "main", "tune": "", "x264opts": ""})
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        profile.join("service.json"),
        json!({"type": "rtmp_custom",
               "settings": {"server": server, "key": key, "use_auth": false, "bwtest": false}})
        .to_string(),
    )
    .unwrap();

    let collection = json!({
        "name": NAME,
        "current_scene": "Scene", "current_program_scene": "Scene",
        "scene_order": [{"name": "Scene"}],
        "current_transition": "Fade", "transition_duration": 300, "transitions": [],
        "groups": [], "quick_transitions": [], "saved_projectors": [], "modules": {},
        "preview_locked": false, "scaling_enabled": false,
        "sources": [
            source("scene", "scene", "Scene", 0, json!({
                "custom_size": false, "id_counter": 2,
                "items": [scene_item("Colour", 1), scene_item("Tone", 2)]
            })),
            // A full-canvas colour (ABGR 0xFFB07000: a mid blue).
            source("color_source", "color_source_v3", "Colour", 0,
                   json!({"color": 0xFFB0_7000u32, "width": 1280, "height": 720})),
            // A media source looping the tone, mixed into every audio track.
            source("ffmpeg_source", "ffmpeg_source", "Tone", 0xFF, json!({
                "is_local_file": true, "local_file": tone.display().to_string(), "looping": true,
                "restart_on_activate": false, "close_when_inactive": false, "hw_decode": false
            })),
        ]
    });
    std::fs::write(scenes.join(format!("{NAME}.json")), collection.to_string()).unwrap();
}

impl Obs {
    /// Xvfb, the OBS configuration for `rtmp://127.0.0.1:1935/live` with `key`, the network namespace
    /// and the bridges to castd's `rtmp_port`. Nothing of OBS runs yet.
    pub fn new(dir: &Path, rtmp_port: u16, key: &str) -> Obs {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "the OBS test runs OBS in its own network namespace (unshare -n), which needs root");
        for (program, package) in [
            ("obs", "obs-studio"),
            ("Xvfb", "xvfb"),
            ("socat", "socat"),
            ("unshare", "util-linux"),
            ("nsenter", "util-linux"),
            ("ip", "iproute2"),
            ("ss", "iproute2"),
        ] {
            require(program, package);
        }

        // Xvfb picks a free display and writes its number on the given fd (here its stdout).
        let mut xvfb_cmd = Command::new("Xvfb");
        xvfb_cmd.args(["-displayfd", "1", "-screen", "0", SCREEN, "-nolisten", "tcp", "-noreset"]);
        let mut xvfb = Proc::spawn_piped("xvfb", xvfb_cmd, dir);
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = xvfb.stdout();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let display = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(n) if n.trim().parse::<u32>().is_ok() => format!(":{}", n.trim()),
            _ => panic!("Xvfb did not report a display within 20 s:\n{}", xvfb.output_text()),
        };

        // A network namespace with only a loopback device, held by a sleeping process.
        let mut holder_cmd = Command::new("unshare");
        holder_cmd.args(["--net", "--", "sleep", "infinity"]);
        let mut netns = Proc::spawn("netns", holder_cmd, dir);
        let holder = netns.pid();
        let ours = netns_of("self");
        let theirs = poll(Duration::from_secs(10), || {
            if let Some(s) = netns.exited() {
                panic!("unshare --net failed ({s}):\n{}", netns.output_text());
            }
            let ns = netns_of(&holder.to_string());
            // Until unshare has exec'd sleep, the pid still shows our namespace.
            (!ns.is_empty()
                && ns != ours
                && std::fs::read_to_string(format!("/proc/{holder}/comm")).ok()?.trim() == "sleep")
                .then_some(ns)
        })
        .unwrap_or_else(|| panic!("no new network namespace from unshare --net:\n{}", netns.output_text()));
        let (st, out) = run(in_netns(holder, "ip").args(["link", "set", "lo", "up"]));
        assert!(st.success(), "ip link set lo up in the namespace: {out}");
        let (_, links) = run(in_netns(holder, "ip").args(["-o", "link", "show"]));
        let names: Vec<&str> = links.lines().filter_map(|l| l.split(": ").nth(1)).collect();
        assert_eq!(names, ["lo"], "the namespace must have only a loopback device: {links}");
        eprintln!("obs: display {display}, network namespace {theirs} (ours {ours}), devices {names:?}");

        // RTMP: 127.0.0.1:1935 in the namespace -> rtmp.sock -> castd on the host's loopback.
        let rtmp_sock = dir.join("rtmp.sock");
        let mut outer = Command::new("socat");
        outer
            .arg(format!("UNIX-LISTEN:{},fork,unlink-early", rtmp_sock.display()))
            .arg(format!("TCP:127.0.0.1:{rtmp_port}"));
        let rtmp_outer = Proc::spawn("socat-rtmp-host", outer, dir);
        poll(Duration::from_secs(10), || rtmp_sock.exists().then_some(()))
            .unwrap_or_else(|| panic!("socat did not create {}:\n{}", rtmp_sock.display(), rtmp_outer.output_text()));
        let mut inner = in_netns(holder, "socat");
        inner
            .arg(format!("TCP-LISTEN:{RTMP_PORT_IN_NAMESPACE},bind=127.0.0.1,reuseaddr,fork"))
            .arg(format!("UNIX-CONNECT:{}", rtmp_sock.display()));
        let rtmp_inner = Proc::spawn("socat-rtmp-netns", inner, dir);
        wait_listening(holder, RTMP_PORT_IN_NAMESPACE, &rtmp_inner);

        // obs-websocket: obs-websocket.sock -> 127.0.0.1:4455 in the namespace.
        let ws_sock = dir.join("obs-websocket.sock");
        let mut ws = in_netns(holder, "socat");
        ws.arg(format!("UNIX-LISTEN:{},fork,unlink-early", ws_sock.display()))
            .arg(format!("TCP:127.0.0.1:{WEBSOCKET_PORT}"));
        let ws_bridge = Proc::spawn("socat-websocket-netns", ws, dir);
        poll(Duration::from_secs(10), || ws_sock.exists().then_some(()))
            .unwrap_or_else(|| panic!("socat did not create {}:\n{}", ws_sock.display(), ws_bridge.output_text()));

        let home = dir.join("home");
        let tone = dir.join("tone.wav");
        std::fs::write(&tone, tone_wav()).unwrap();
        write_config(&home, &format!("rtmp://127.0.0.1:{RTMP_PORT_IN_NAMESPACE}/live"), key, &tone);

        Obs {
            obs: None,
            srt_bridge: Vec::new(),
            ws_bridge,
            rtmp_inner,
            rtmp_outer,
            netns,
            _xvfb: xvfb,
            display,
            home,
            dir: dir.to_path_buf(),
            starts: 0,
        }
    }

    /// As `new`, but OBS streams to `srt://127.0.0.1:8890?streamid=live/<key>` (its Stream Key empty),
    /// bridged to castd's `srt_port` as the module doc says.
    pub fn new_srt(dir: &Path, rtmp_port: u16, srt_port: u16, key: &str) -> Obs {
        let mut obs = Obs::new(dir, rtmp_port, key);
        let holder = obs.netns.pid();
        let srt_sock = dir.join("srt.sock");
        let mut outer = Command::new("socat");
        outer
            .arg(format!("UNIX-LISTEN:{},type=5,fork,unlink-early", srt_sock.display()))
            .arg(format!("UDP4-CONNECT:127.0.0.1:{srt_port}"));
        let srt_outer = Proc::spawn("socat-srt-host", outer, dir);
        poll(Duration::from_secs(10), || srt_sock.exists().then_some(()))
            .unwrap_or_else(|| panic!("socat did not create {}:\n{}", srt_sock.display(), srt_outer.output_text()));
        let mut inner = in_netns(holder, "socat");
        inner
            .arg(format!("UDP4-LISTEN:{SRT_PORT_IN_NAMESPACE},bind=127.0.0.1"))
            .arg(format!("UNIX-CONNECT:{},type=5", srt_sock.display()));
        let srt_inner = Proc::spawn("socat-srt-netns", inner, dir);
        obs.srt_bridge = vec![srt_inner, srt_outer];
        let tone = dir.join("tone.wav");
        let server = format!("srt://127.0.0.1:{SRT_PORT_IN_NAMESPACE}?streamid=live/{key}");
        write_config(&obs.home, &server, "", &tone);
        obs
    }

    /// Start OBS in the namespace (streaming at once with `stream`).
    pub fn start(&mut self, stream: bool) {
        assert!(self.obs.is_none(), "OBS is already running");
        self.starts += 1;
        let runtime = self.dir.join("xdg-runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let mut cmd = in_netns(self.netns.pid(), "obs");
        if stream {
            cmd.arg("--startstreaming");
        }
        cmd.args(["--minimize-to-tray", "--disable-missing-files-check", "--profile", NAME, "--collection", NAME])
            .current_dir(&self.home)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("DISPLAY", &self.display)
            .env("LANG", "C.UTF-8")
            .env("QT_QPA_PLATFORM", "xcb")
            // Mesa's software OpenGL (llvmpipe): the same picture on every machine.
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            // No session bus: nothing of the host's desktop session is reachable.
            .env("DBUS_SESSION_BUS_ADDRESS", format!("unix:path={}", self.dir.join("no-session-bus").display()));
        let proc = Proc::spawn(&format!("obs-{}", self.starts), cmd, &self.dir);
        let pid = proc.pid().to_string();
        self.obs = Some(proc);
        // nsenter execs OBS: once the pid is OBS, it must be in the namespace, never in ours.
        let ns = poll(Duration::from_secs(10), || {
            if let Some(s) = self.obs.as_mut().unwrap().exited() {
                panic!("OBS exited at once ({s})\n{}", self.diag());
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim() == "obs").then(|| netns_of(&pid))
        })
        .unwrap_or_else(|| panic!("OBS did not start\n{}", self.diag()));
        assert_eq!(ns, netns_of(&self.netns.pid().to_string()), "OBS must run in the loopback-only namespace");
    }

    pub fn running(&mut self) -> bool {
        self.obs.as_mut().is_some_and(|p| p.exited().is_none())
    }

    /// Fails the test with OBS's log if OBS has exited, or has logged that it cannot work (it then
    /// shows a modal message box and waits for a click that never comes).
    pub fn assert_running(&mut self) {
        if let Some(s) = self.obs.as_mut().and_then(|p| p.exited()) {
            panic!("OBS exited ({s})\n{}", self.diag());
        }
        let log = self.log();
        if let Some(line) =
            log.lines().find(|l| l.contains("Failed to initialize video") || l.contains("Failed to initialize audio"))
        {
            panic!("OBS cannot run on this machine: {line}\n{}", self.diag());
        }
    }

    /// Stop OBS as a session logout or `kill` would (SIGTERM; OBS 29 has no handler for it and ends
    /// at once, dropping its RTMP connection).
    pub fn stop_process(&mut self) {
        if let Some(mut p) = self.obs.take() {
            p.stop(Duration::from_secs(10));
        }
    }

    /// OBS's own log files (newest last, each cut to its last 150 lines) and what it printed.
    pub fn diag(&self) -> String {
        let mut s = String::new();
        let logs = self.home.join(".config/obs-studio/logs");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&logs).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        files.sort();
        if files.is_empty() {
            s.push_str(&format!("(no OBS log in {})\n", logs.display()));
        }
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            s.push_str(&format!("--- OBS log {} (last 150 of {} lines)\n", f.display(), lines.len()));
            s.push_str(&lines[lines.len().saturating_sub(150)..].join("\n"));
            s.push('\n');
        }
        if let Some(p) = &self.obs {
            let out = p.output_text();
            let lines: Vec<&str> = out.lines().collect();
            s.push_str(&format!(
                "--- OBS stdout/stderr (last 40 lines)\n{}\n",
                lines[lines.len().saturating_sub(40)..].join("\n")
            ));
        }
        for p in [&self.rtmp_outer, &self.rtmp_inner, &self.ws_bridge].into_iter().chain(&self.srt_bridge) {
            let out = p.output_text();
            if !out.trim().is_empty() {
                s.push_str(&format!("--- {}\n{}\n", p.name, out.trim()));
            }
        }
        s
    }

    /// The newest OBS log.
    pub fn log(&self) -> String {
        let logs = self.home.join(".config/obs-studio/logs");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&logs).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        files.sort();
        files.last().and_then(|f| std::fs::read_to_string(f).ok()).unwrap_or_default()
    }

    /// Connect to obs-websocket (protocol 5, no auth) through the bridge, retrying while OBS loads.
    pub fn websocket(&mut self) -> ObsWebSocket {
        let sock = self.dir.join("obs-websocket.sock");
        let mut last = String::new();
        let ws = poll(Duration::from_secs(30), || {
            self.assert_running();
            let stream = UnixStream::connect(&sock).map_err(|e| last = e.to_string()).ok()?;
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let (mut ws, _) = tungstenite::client(format!("ws://127.0.0.1:{WEBSOCKET_PORT}/"), stream)
                .map_err(|e| last = e.to_string())
                .ok()?;
            // Hello (op 0), Identify (op 1), Identified (op 2).
            let hello = read_json(&mut ws).map_err(|e| last = e).ok()?;
            assert_eq!(hello["op"], 0, "obs-websocket Hello: {hello}");
            assert!(hello["d"].get("authentication").is_none(), "obs-websocket asks for a password: {hello}");
            let identify = json!({"op": 1, "d": {"rpcVersion": 1, "eventSubscriptions": 0}});
            ws.send(Message::text(identify.to_string())).ok()?;
            let identified = read_json(&mut ws).map_err(|e| last = e).ok()?;
            assert_eq!(identified["op"], 2, "obs-websocket Identified: {identified}");
            Some(ws)
        })
        .unwrap_or_else(|| panic!("could not reach obs-websocket within 30 s ({last})\n{}", self.diag()));
        ObsWebSocket { ws, next: 0 }
    }

    /// Screenshot of OBS's Settings, the Stream page and the Output page side by side, as a PNG at
    /// `path`. OBS must be running and idle (settings are greyed out while streaming). Uses the
    /// keyboard only: File > Settings (Alt+F, S), then Down to the next page.
    pub fn screenshot_settings(&mut self, path: &Path) {
        require("xdotool", "xdotool");
        require("xwd", "x11-apps");
        require("convert", "imagemagick");
        self.assert_running();
        let xdo = |args: &[&str]| {
            let (st, out) = run(Command::new("xdotool").args(args).env("DISPLAY", &self.display));
            (st.success(), out)
        };
        let find = |title: &str| {
            poll(Duration::from_secs(15), || {
                let (ok, out) = xdo(&["search", "--name", title]);
                ok.then(|| out.lines().next().map(str::to_string)).flatten()
            })
        };
        let main = find("^OBS [0-9]").unwrap_or_else(|| panic!("no OBS main window\n{}", self.diag()));
        xdo(&["windowfocus", "--sync", &main]);
        xdo(&["key", "alt+f"]);
        std::thread::sleep(Duration::from_millis(500));
        xdo(&["key", "s"]);
        let settings =
            find("^Settings$").unwrap_or_else(|| panic!("OBS's Settings window did not open\n{}", self.diag()));
        xdo(&["windowfocus", "--sync", &settings]);
        let mut pages = Vec::new();
        for page in ["stream", "output"] {
            xdo(&["key", "Down"]);
            std::thread::sleep(Duration::from_millis(1500));
            let file = self.dir.join(format!("settings-{page}.xwd"));
            let (st, out) = run(Command::new("xwd")
                .args(["-silent", "-id", &settings, "-out"])
                .arg(&file)
                .env("DISPLAY", &self.display));
            assert!(st.success(), "xwd: {out}");
            pages.push(file);
        }
        let (st, out) = run(Command::new("convert")
            .arg(format!("xwd:{}", pages[0].display()))
            .arg(format!("xwd:{}", pages[1].display()))
            .arg("+append")
            .arg(format!("png:{}", path.display())));
        assert!(st.success(), "convert: {out}");
        xdo(&["key", "Escape"]);
        assert!(
            poll(Duration::from_secs(10), || xdo(&["search", "--name", "^Settings$"])
                .1
                .trim()
                .is_empty()
                .then_some(()))
            .is_some(),
            "the Settings window did not close"
        );
    }
}

fn read_json(ws: &mut WebSocket<UnixStream>) -> Result<Value, String> {
    loop {
        match ws.read().map_err(|e| e.to_string())? {
            Message::Text(t) => return serde_json::from_str(t.as_str()).map_err(|e| e.to_string()),
            Message::Close(c) => return Err(format!("closed: {c:?}")),
            _ => {}
        }
    }
}

/// An identified obs-websocket session.
pub struct ObsWebSocket {
    ws: WebSocket<UnixStream>,
    next: u64,
}

impl ObsWebSocket {
    /// Send a request (op 6) and return its response data; fails the test when OBS says it failed.
    pub fn request(&mut self, kind: &str, data: Value) -> Value {
        self.next += 1;
        let id = self.next.to_string();
        let req = json!({"op": 6, "d": {"requestType": kind, "requestId": id, "requestData": data}});
        self.ws.send(Message::text(req.to_string())).unwrap_or_else(|e| panic!("obs-websocket {kind}: {e}"));
        loop {
            let v = read_json(&mut self.ws).unwrap_or_else(|e| panic!("obs-websocket {kind}: {e}"));
            if v["op"] == 7 && v["d"]["requestId"] == id.as_str() {
                assert_eq!(v["d"]["requestStatus"]["result"], true, "obs-websocket {kind} failed: {v}");
                return v["d"]["responseData"].clone();
            }
        }
    }
}
