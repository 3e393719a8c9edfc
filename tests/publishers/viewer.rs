//! The viewer page played in Debian's Chromium, headless, driven over the DevTools protocol with
//! tungstenite (no Node, no Playwright): load `/`, press the play button as a viewer would, and wait
//! until `video#player` has really played for a few seconds through hls.js (a `blob:` MSE source).
//! Chromium gets the flags of `tests/web/browser.mjs`, which keep it off the network.

use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

use super::procs::{poll, require, Proc};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// What `video#player` reported last.
#[derive(Debug, Clone, Default)]
pub struct VideoState {
    pub current_time: f64,
    pub paused: bool,
    pub ready_state: u64,
    pub error: Option<String>,
    pub src: String,
    pub width: u64,
    pub height: u64,
}

/// A headless Chromium with one page, driven over its DevTools websocket.
pub struct Browser {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    // Dropped last: kills Chromium and its helpers.
    _proc: Proc,
}

impl Browser {
    /// Start Chromium on a fresh profile under `dir`, with remote debugging on a free loopback port.
    pub fn launch(dir: &Path) -> Browser {
        let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| CHROMIUM.to_string());
        if !Path::new(&chromium).exists() {
            require("chromium", "chromium");
        }
        let profile = dir.join("chromium-profile");
        std::fs::create_dir_all(&profile).unwrap();
        let mut cmd = Command::new(&chromium);
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--autoplay-policy=no-user-gesture-required",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--window-size=1280,800",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("about:blank");
        let mut proc = Proc::spawn("chromium", cmd, dir);
        // Chromium writes "<port>\n<browser path>" here once its DevTools server listens.
        let port_file = profile.join("DevToolsActivePort");
        let port: u16 = poll(Duration::from_secs(30), || {
            if let Some(s) = proc.exited() {
                panic!("chromium exited ({s}) at start:\n{}", proc.output_text());
            }
            std::fs::read_to_string(&port_file).ok()?.lines().next()?.trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("chromium did not open its DevTools port within 30 s:\n{}", proc.output_text()));
        // The page target Chromium opened for about:blank.
        let client = reqwest::blocking::Client::new();
        let ws_url = poll(Duration::from_secs(10), || {
            let list: Value = client.get(format!("http://127.0.0.1:{port}/json/list")).send().ok()?.json().ok()?;
            list.as_array()?
                .iter()
                .find(|t| t["type"] == "page")
                .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_string))
        })
        .expect("a page target in /json/list");
        let (ws, _) = tungstenite::connect(ws_url.as_str()).expect("connect to the page's DevTools socket");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        }
        Browser { ws, next_id: 1, _proc: proc }
    }

    /// Send a DevTools command and wait for its result (events in between are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws.send(Message::text(msg.to_string())).expect("send a DevTools command");
        loop {
            let m = self.ws.read().unwrap_or_else(|e| panic!("DevTools {method}: {e}"));
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).expect("DevTools json");
            if v["id"].as_u64() == Some(id) {
                if let Some(err) = v.get("error") {
                    panic!("DevTools {method} failed: {err}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Evaluate `expr` in the page; its value (JSON).
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true, "awaitPromise": true}));
        if let Some(ex) = r.get("exceptionDetails") {
            panic!("page script failed: {ex}");
        }
        r["result"]["value"].clone()
    }

    pub fn navigate(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
    }
}

/// Wait (up to 10 s) until the page's document has loaded far enough to have its own origin's storage.
fn wait_document(browser: &mut Browser) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while browser.eval("document.readyState") == json!("loading") || browser.eval("location.protocol") != json!("http:")
    {
        assert!(Instant::now() < deadline, "the viewer page did not load");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const STATE_JS: &str = r#"(() => {
  const b = document.querySelector('#play-button');
  if (b && b.offsetParent !== null) b.click();
  const v = document.querySelector('video#player');
  if (!v) return null;
  return { t: v.currentTime, paused: v.paused, rs: v.readyState,
           err: v.error ? `${v.error.code} ${v.error.message}` : null,
           src: v.currentSrc || v.src, w: v.videoWidth, h: v.videoHeight };
})()"#;

/// Load the viewer page at `url` and wait until the player has played `seconds` of the live stream
/// through hls.js. Returns where playback started and the last state.
pub fn play_viewer_page(dir: &Path, url: &str, seconds: f64, timeout: Duration) -> (f64, VideoState) {
    let mut browser = Browser::launch(dir);
    // The page plays over WebRTC by default (its Real-time switch); this checks the HLS path, so the switch
    // starts off, as a viewer who turned it off would have it (tests/web/browser.mjs's newContext does the same).
    browser.navigate(url);
    wait_document(&mut browser);
    browser.eval("localStorage.setItem('castd.realtime', 'off')");
    browser.navigate(url);
    let deadline = Instant::now() + timeout;
    let mut started: Option<f64> = None;
    let mut last = VideoState::default();
    loop {
        let v = browser.eval(STATE_JS);
        if !v.is_null() {
            last = VideoState {
                current_time: v["t"].as_f64().unwrap_or(0.0),
                paused: v["paused"].as_bool().unwrap_or(true),
                ready_state: v["rs"].as_u64().unwrap_or(0),
                error: v["err"].as_str().map(str::to_string),
                src: v["src"].as_str().unwrap_or_default().to_string(),
                width: v["w"].as_u64().unwrap_or(0),
                height: v["h"].as_u64().unwrap_or(0),
            };
            assert!(last.error.is_none(), "the player reports a media error: {last:?}");
            if started.is_none() && !last.paused && last.current_time > 0.0 {
                started = Some(last.current_time);
            }
            if let Some(s) = started {
                if last.current_time >= s + seconds {
                    return (s, last);
                }
            }
        }
        if Instant::now() > deadline {
            let overlay = browser
                .eval("Array.from(document.querySelectorAll('.player-overlay')).map(e => e.textContent).join(' | ')");
            panic!(
                "video#player did not play {seconds} s within {timeout:?}: started at {started:?}, last {last:?}, \
                 overlay: {overlay}"
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
