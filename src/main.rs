//! castd's entry point: the command line, start-up and graceful shutdown.
//!
//! Start-up opens the database in the data dir, persists the flags that Owncast persists (ports, bind
//! address, admin password), creates a random admin password and stream key on first start (never a
//! well-known default), binds the listeners and serves until SIGTERM or SIGINT. Shutdown lets open
//! requests finish and checkpoints SQLite so the database file is complete on its own.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use tracing::{info, warn};

use castd::config::StreamKey;
use castd::daemon::{Config, Daemon, Listeners};
use castd::events::Bus;
use castd::federation::FederationConfig;
use castd::logs::LogRing;
use castd::metrics::MetricsConfig;
use castd::store::settings::SettingsStore;
use castd::store::Store;
use castd::yp::YpConfig;
use castd::{password, systemd};

/// castd: self-hosted live-video streaming with chat, compatible with Owncast's API.
///
/// Every flag can also be given as an environment variable CASTD_<NAME> (shown below). Ports, the
/// web bind address and the admin password are saved in the database, as Owncast does.
#[derive(Parser, Debug)]
#[command(name = "castd", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Directory for the database, HLS output and uploads.
    #[arg(long = "data-dir", env = "CASTD_DATA_DIR", default_value = "./data", value_name = "DIR")]
    data_dir: PathBuf,

    /// Database file [default: <data-dir>/castd.db].
    #[arg(long, env = "CASTD_DATABASE", value_name = "FILE")]
    database: Option<PathBuf>,

    /// IP address the web server listens on (saved) [default: 0.0.0.0].
    #[arg(long, env = "CASTD_WEBSERVERIP", value_name = "IP")]
    webserverip: Option<std::net::IpAddr>,

    /// Port of the web server, 0 for any free port (saved) [default: 8080].
    #[arg(long, env = "CASTD_WEBSERVERPORT", value_name = "PORT")]
    webserverport: Option<u16>,

    /// Port of the RTMP server, 0 for any free port (saved) [default: 1935].
    #[arg(long, env = "CASTD_RTMPPORT", value_name = "PORT")]
    rtmpport: Option<u16>,

    /// Port of the SRT server (UDP, on the RTMP address), 0 for no SRT (saved) [default: 8890].
    #[arg(long, env = "CASTD_SRTPORT", value_name = "PORT")]
    srtport: Option<u16>,

    /// UDP port of every WebRTC (WHIP) session, on the RTMP address; 0 for an ephemeral port (logged)
    /// [default: 8189]. A port that cannot be bound turns WebRTC off.
    #[arg(long = "webrtc-udp-port", env = "CASTD_WEBRTC_UDP_PORT", value_name = "PORT")]
    webrtc_udp_port: Option<u16>,

    /// Public IP address offered as an extra ICE candidate (on the WebRTC UDP port), for a server
    /// behind NAT.
    #[arg(long = "webrtc-public-ip", env = "CASTD_WEBRTC_PUBLIC_IP", value_name = "IP")]
    webrtc_public_ip: Option<std::net::IpAddr>,

    /// Set the admin password (saved, as a hash).
    #[arg(long, env = "CASTD_ADMINPASSWORD", value_name = "PASSWORD", hide_env_values = true)]
    adminpassword: Option<String>,

    /// A stream key valid for this run only (not saved).
    #[arg(long, env = "CASTD_STREAMKEY", value_name = "KEY", hide_env_values = true)]
    streamkey: Option<String>,

    /// Log level: error, warn, info, debug or trace (or a tracing filter such as castd=debug).
    #[arg(long = "log-level", env = "CASTD_LOG_LEVEL", default_value = "info", value_name = "LEVEL")]
    log_level: String,

    /// Development switch: let federation use plain `http://` URLs on loopback hosts (127.0.0.1,
    /// ::1, localhost), e.g. two local servers federating without TLS. Everything else needs https.
    #[arg(long = "federation-allow-http-loopback", env = "CASTD_FEDERATION_ALLOW_HTTP_LOOPBACK")]
    federation_allow_http_loopback: bool,

    /// How many reverse proxies stand in front of castd: the client address is the X-Forwarded-For
    /// entry the outermost of them wrote (they append: nginx `$proxy_add_x_forwarded_for`, Caddy,
    /// Traefik); entries left of it are the client's and never read. 0: never read X-Forwarded-For.
    /// [default: 1 when the connection comes from loopback (a proxy on this machine), else 0]
    #[arg(long = "trusted-proxies", env = "CASTD_TRUSTED_PROXIES", value_name = "N",
          value_parser = clap::value_parser!(u8).range(0..=castd::http::headers::MAX_TRUSTED_HOPS as i64))]
    trusted_proxies: Option<u8>,

    /// Test/debug switch, hidden: make the transcode worker's encoder fail SECONDS into each stream, as a
    /// hardware encoder failure, so the fallback to libx264 can be exercised without a GPU.
    #[arg(long = "debug-encoder-fault", env = "CASTD_DEBUG_ENCODER_FAULT", value_name = "SECONDS", hide = true)]
    debug_encoder_fault: Option<f64>,

    /// Test/debug switch, hidden: report the GPU readings in FILE (what `castd gpus` prints, or a JSON
    /// array of its `gpus`) instead of NVML's, in the hardware stats, the metrics and `castd gpus`, so GPU
    /// health can be exercised without a GPU.
    #[arg(long = "debug-gpu-sample", env = "CASTD_DEBUG_GPU_SAMPLE", value_name = "FILE", hide = true, global = true)]
    debug_gpu_sample: Option<PathBuf>,

    /// Length of an LL-HLS part in milliseconds (200-500), at latency level 0 (low-latency HLS).
    #[arg(long = "llhls-part-ms", env = "CASTD_LLHLS_PART_MS", value_name = "MS", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(200..=500))]
    llhls_part_ms: u32,

    /// Cluster: the Redis server the origin and its edges share chat through (redis://HOST:6379/0).
    /// Without it castd is a single box.
    #[arg(long = "redis-url", env = "CASTD_REDIS_URL", value_name = "URL")]
    redis_url: Option<String>,

    /// Cluster: a file holding the secret shared by the origin and its edges (authenticates their calls).
    #[arg(long = "cluster-secret", env = "CASTD_CLUSTER_SECRET", value_name = "FILE")]
    cluster_secret: Option<PathBuf>,

    /// Cluster: run as an edge of this origin (http://ORIGIN:8080): serve the web UI, chat and cached
    /// HLS here, send everything else to the origin. Needs --redis-url and --cluster-secret.
    #[arg(long, env = "CASTD_ORIGIN", value_name = "URL")]
    origin: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the server (the default).
    Serve,
    /// Print the OpenAPI document of the HTTP API (as a fresh server serves it at /api/openapi.json) and
    /// exit; no data dir is read or written. The web UI's types are generated from it (web/scripts/gen-api.sh).
    Openapi,
    /// Probe the video encoders on this machine (opening each one on its device) and print the result.
    Encoders {
        /// Print a JSON array of {name, kind, available, device, reason} instead of a table.
        #[arg(long)]
        json: bool,
        /// Probe only this encoder (libx264, h264_nvenc, h264_vaapi or h264_qsv) or decode path
        /// (decode:cuda, decode:vaapi: libx264 on pictures decoded and scaled on the GPU).
        #[arg(long, value_name = "ENCODER")]
        only: Option<String>,
    },
    /// Print the NVIDIA GPUs' health as castd samples it (NVML), as JSON.
    ///
    /// The driver version and, per GPU, utilization, memory, encoder and decoder utilization (percent),
    /// memory used/total (MiB), temperature (°C) and power draw (W); a figure the GPU does not report is
    /// null. Without an NVIDIA driver it prints one line "no NVIDIA driver: ..." and exits 0.
    Gpus,
    /// Import an Owncast data directory into a new castd data directory (--data-dir), then exit.
    ///
    /// Brings over settings, the admin password, stream keys, chat users with their tokens, chat
    /// history, bans, followers with the same ActivityPub key pair, webhooks, access tokens,
    /// notifications, emoji, the logo and public files; reports what it imported and what not.
    /// The Owncast directory is only read. With `--channel SLUG`, the Owncast server becomes a new
    /// channel of the castd data directory (`/c/SLUG/`: its own database and files under
    /// `channels/SLUG/`); castd opens it when it (re)starts.
    #[command(name = "import-owncast")]
    ImportOwncast {
        /// The Owncast directory (its `data` directory, or the one that holds `data/`).
        #[arg(long, value_name = "DIR", required_unless_present = "dir", conflicts_with = "dir")]
        from: Option<PathBuf>,
        /// The Owncast directory, as `--from` gives it.
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Import as a new channel with this slug (`[a-z0-9-]{1,32}`, not `default`) of the castd data
        /// directory; with `--force`, an existing channel of that slug is replaced.
        #[arg(long, value_name = "SLUG")]
        channel: Option<String>,
        /// Report what would be imported; write nothing.
        #[arg(long = "dry-run")]
        dry_run: bool,
        /// Replace a castd data directory that is not empty (with `--channel`: that channel's).
        #[arg(long)]
        force: bool,
    },
    /// Internal: the transcode worker (reads FLV on stdin, writes HLS, reports JSON lines on stdout).
    #[command(hide = true)]
    Worker {
        /// The worker configuration as JSON.
        #[arg(long)]
        config: String,
    },
    /// Internal: measure what encoding each rung of a ladder (and decoding a 1080p30 source) costs on
    /// this box; JSON lines on stdout (the admin's "does this ladder fit", `hardware::fit`).
    #[command(hide = true)]
    Measure {
        /// Answer in JSON lines (the only format).
        #[arg(long)]
        json: bool,
        /// What to measure, as JSON (`hardware::fit::measure::MeasureSpec`).
        spec: String,
    },
    /// Internal: HLS segments on stdin remuxed to FLV on stdout (simulcast's variant targets).
    #[command(hide = true)]
    Remux,
    /// Internal: make the thumbnail and preview from the newest segment of a variant, once.
    #[command(hide = true)]
    Thumbnail {
        #[arg(long = "variant-dir")]
        variant_dir: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
}

/// Time limit of each encoder's probe in `castd encoders`.
const PROBE_LIMIT_PER_ENCODER: std::time::Duration = std::time::Duration::from_secs(10);

/// `castd encoders [--json] [--only NAME]`: no database, no data dir; just the probe's table.
fn encoders_command(json: bool, only: Option<&str>) -> Result<()> {
    let found = match only {
        Some(name) => {
            hwaccel::probe::init()?;
            hwaccel::probe::probe_named(name)
        }
        None => hwaccel::probe::probe_bounded(PROBE_LIMIT_PER_ENCODER)?,
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&found)?)?;
    } else {
        writeln!(out, "{:<12} {:<15} {:<10} {:<20} REASON", "ENCODER", "KIND", "AVAILABLE", "DEVICE")?;
        for e in &found {
            let kind = match e.decode {
                // A decode path: libx264 on pictures decoded and scaled on the device.
                Some(d) => format!("decode+{}", d.av_name()),
                None => serde_json::to_value(e.kind)?.as_str().unwrap_or_default().to_string(),
            };
            let device = if e.device.is_empty() { "-" } else { e.device.as_str() };
            let available = if e.available { "yes" } else { "no" };
            writeln!(out, "{:<12} {kind:<15} {available:<10} {device:<20} {}", e.name, e.reason)?;
        }
        if only.is_none() {
            let auto = hwaccel::select("auto", &found).map_or("none".to_string(), |e| e.label());
            writeln!(out, "\nvideo codec 'auto' would use: {auto}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The readings of `--debug-gpu-sample FILE`: `castd gpus`' output (`{driverVersion, gpus}`) or its
/// `gpus` array alone.
fn read_gpu_sample(path: &Path) -> Result<hwaccel::gpu::GpuReport> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--debug-gpu-sample {}", path.display()))?;
    let report = match serde_json::from_str::<hwaccel::gpu::GpuReport>(&text) {
        Ok(report) => report,
        Err(_) => hwaccel::gpu::GpuReport {
            driver_version: None,
            gpus: serde_json::from_str(&text)
                .with_context(|| format!("--debug-gpu-sample {}: not castd gpus' JSON", path.display()))?,
        },
    };
    Ok(report)
}

/// `castd gpus`: the NVML report as JSON, or one line saying there is no NVIDIA driver (exit 0).
fn gpus_command(debug_sample: Option<&Path>) -> Result<()> {
    let report = match debug_sample {
        Some(path) => read_gpu_sample(path)?,
        None => match hwaccel::gpu::GpuMonitor::init().and_then(|m| m.report()) {
            Ok(report) => report,
            Err(hwaccel::gpu::GpuError::NoDriver(e)) => {
                println!("no NVIDIA driver: {e}");
                return Ok(());
            }
            Err(e) => bail!("castd gpus: {e}"),
        },
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    out.flush()?;
    Ok(())
}

/// Log to stderr at `level`, and keep the same events in the admin log ring it returns.
fn init_logging(level: &str) -> Result<LogRing> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter =
        tracing_subscriber::EnvFilter::try_new(level).with_context(|| format!("invalid --log-level '{level}'"))?;
    let ring = LogRing::default();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter).with(ring.layer());
    // Under systemd the journal adds its own timestamps and reads the `<N>` priority prefix.
    if systemd::stderr_is_journal() {
        let format = tracing_subscriber::fmt::format().without_time().with_ansi(false).with_target(false);
        registry.with(stderr.event_format(systemd::JournalPrefix(format))).init();
    } else {
        registry.with(stderr).init();
    }
    Ok(ring)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let logs = init_logging(&cli.log_level)?;
    if let Some(Command::Encoders { json, only }) = &cli.command {
        encoders_command(*json, only.as_deref())?;
        // A probe that hung is left on its thread; end the process regardless.
        std::process::exit(0);
    }
    if let Some(Command::Gpus) = &cli.command {
        return gpus_command(cli.debug_gpu_sample.as_deref());
    }
    if let Some(Command::ImportOwncast { from, dir, channel, dry_run, force }) = &cli.command {
        let channel = match channel.as_deref().map(castd::media::ChannelId::new).transpose() {
            Ok(channel) => channel,
            Err(e) => {
                eprintln!("castd import-owncast: --channel: {e} (nothing was written)");
                std::process::exit(1);
            }
        };
        let Some(from) = from.clone().or_else(|| dir.clone()) else {
            eprintln!("castd import-owncast: give the Owncast directory (nothing was written)");
            std::process::exit(1);
        };
        let opts =
            castd::import::Options { from, data_dir: cli.data_dir.clone(), dry_run: *dry_run, force: *force, channel };
        // A plain message (no backtrace): what went wrong is the input, not castd.
        let report = match castd::import::run(&opts) {
            Ok(report) => report,
            Err(e) => {
                eprintln!("castd import-owncast: {e} (nothing was written)");
                std::process::exit(1);
            }
        };
        print!("{report}");
        if !dry_run {
            println!("castd data directory ready: {}", cli.data_dir.display());
        }
        return Ok(());
    }
    if let Some(Command::Worker { config }) = &cli.command {
        std::process::exit(castd::transcode::worker::main(config));
    }
    if let Some(Command::Measure { json: _, spec }) = &cli.command {
        std::process::exit(castd::hardware::fit::measure::main(spec));
    }
    if let Some(Command::Remux) = &cli.command {
        std::process::exit(castd::transcode::remux::main());
    }
    if let Some(Command::Thumbnail { variant_dir, out }) = &cli.command {
        std::process::exit(castd::transcode::thumbnail::main(variant_dir, out));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run(cli, logs))
}

/// Write the generated admin password where only the owner can read it.
fn write_secret_file(path: &Path, contents: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Open the store and settings, apply the saved flags and first-start secrets. A cluster edge
/// (`edge`) keeps no database: its store is in memory, its settings the defaults plus the flags until
/// the origin's arrive (`cluster`), and it writes no admin password file (its admin API is the origin's).
fn prepare(cli: &Cli, edge: bool, bus: Bus) -> Result<(Store, SettingsStore)> {
    std::fs::create_dir_all(&cli.data_dir)
        .with_context(|| format!("creating the data dir {}", cli.data_dir.display()))?;
    let store = if edge {
        if cli.database.is_some() {
            bail!("--database: an edge (--origin) keeps no database of its own");
        }
        Store::open_in_memory().context("opening the edge's in-memory database")?
    } else {
        let db_path = cli.database.clone().unwrap_or_else(|| cli.data_dir.join("castd.db"));
        Store::open(&db_path).with_context(|| format!("opening the database {}", db_path.display()))?
    };
    let settings = SettingsStore::open(store.clone(), bus).context("loading settings")?;

    if let Some(pw) = &cli.adminpassword {
        if pw.is_empty() {
            bail!("--adminpassword must not be empty");
        }
        let hash = password::hash(pw).context("--adminpassword")?;
        let weak = password::is_weak(pw);
        settings.update_blocking(|s| {
            s.server.admin_password_hash = hash;
            s.server.admin_password_weak = weak;
        })?;
    }
    if settings.get().server.admin_password_hash.is_empty() && edge {
        // Nobody signs in to an edge: its /api/admin/* goes to the origin.
        let hash = password::hash(&password::random_token(20))?;
        settings.update_blocking(|s| s.server.admin_password_hash = hash)?;
    }
    if settings.get().server.admin_password_hash.is_empty() {
        let pw = password::random_token(20);
        let hash = password::hash(&pw)?;
        let file = cli.data_dir.join("initial-admin-password");
        write_secret_file(&file, &format!("{pw}\n"))?;
        settings.update_blocking(|s| {
            s.server.admin_password_hash = hash;
            s.server.admin_password_weak = false;
        })?;
        // The password itself is never logged (the journal and the admin log view keep logs): only
        // where the file that holds it is, readable by castd's user alone.
        warn!(
            "generated an admin password (user: admin); read it from {} (readable by castd's user only) and \
             change it in the admin page",
            file.display()
        );
    }
    if settings.get().server.stream_keys.is_empty() && !edge {
        let key = password::random_token(24);
        settings.update_blocking(|s| {
            s.server.stream_keys = vec![StreamKey { key: key.clone(), comment: "Default stream key".into() }]
        })?;
        info!("generated a stream key; see it in the admin page under stream keys");
    }
    settings.update_blocking(|s| {
        if let Some(ip) = cli.webserverip {
            s.server.web_server_ip = ip.to_string();
        }
        if let Some(p) = cli.webserverport {
            s.server.web_server_port = p;
        }
        if let Some(p) = cli.rtmpport {
            s.server.rtmp_server_port = p;
        }
        if let Some(p) = cli.srtport {
            s.ingest.srt_server_port = p;
        }
    })?;
    Ok((store, settings))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            warn!("cannot listen for SIGTERM: {e}");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received; shutting down"),
        _ = tokio::signal::ctrl_c() => info!("SIGINT received; shutting down"),
    }
    systemd::stopping();
}

async fn run(cli: Cli, logs: LogRing) -> Result<()> {
    castd::http::headers::set_trusted_proxies(match cli.trusted_proxies {
        Some(n) => castd::http::headers::TrustedProxies::Hops(n),
        None => castd::http::headers::TrustedProxies::Loopback,
    });
    let cluster = castd::cluster::ClusterConfig::from_flags(
        cli.origin.as_deref(),
        cli.redis_url.as_deref(),
        cli.cluster_secret.as_deref(),
    )?;
    // The control bus: the settings store announces changes on it from the start.
    let bus = Bus::default();
    let openapi = matches!(cli.command, Some(Command::Openapi));
    // `castd openapi` reads and writes no data dir: the document of a fresh daemon, built on an
    // in-memory database and a temporary directory (removed when it is printed).
    let openapi_dir = if openapi { Some(tempfile::tempdir().context("creating a temporary directory")?) } else { None };
    let (store, settings) = match &openapi_dir {
        Some(_) => {
            let store = Store::open_in_memory().context("opening an in-memory database")?;
            let settings = SettingsStore::open(store.clone(), bus.clone()).context("loading settings")?;
            (store, settings)
        }
        None => prepare(&cli, cluster.as_ref().is_some_and(|c| c.is_edge()), bus.clone())?,
    };
    // Any non-empty key without control characters, as Owncast takes it; a short one is warned about.
    let temp_stream_key = match &cli.streamkey {
        Some(key) => {
            let key = castd::config::validate::stream_key(key).context("--streamkey")?;
            if password::is_weak(&key) {
                warn!("the --streamkey is short (fewer than 8 characters): anyone who guesses it can broadcast here");
            }
            Some(key)
        }
        None => None,
    };
    let debug_encoder_fault = cli.debug_encoder_fault.filter(|s| s.is_finite() && *s >= 0.0);
    if let Some(secs) = debug_encoder_fault {
        warn!(
            "--debug-encoder-fault {secs}: the transcoder's encoder will fail {secs} s into each stream (test switch)"
        );
    }
    let debug_gpu_sample = match &cli.debug_gpu_sample {
        Some(path) => Some(read_gpu_sample(path)?.gpus),
        None => None,
    };
    let s = settings.get();
    let config = Config {
        data_dir: openapi_dir.as_ref().map_or_else(|| cli.data_dir.clone(), |d| d.path().to_path_buf()),
        store,
        settings,
        bus,
        temp_stream_key,
        debug_encoder_fault,
        debug_gpu_sample,
        llhls_part_ms: cli.llhls_part_ms,
        metrics: MetricsConfig::from_env(),
        yp: YpConfig::from_env(),
        logs,
        federation: FederationConfig::from_env(cli.federation_allow_http_loopback),
        cluster,
    };

    if openapi {
        let reg = Daemon::build(config, None)?.registry();
        println!("{}", serde_json::to_string_pretty(&reg.document())?);
        drop(openapi_dir);
        return Ok(());
    }

    let web_addr =
        SocketAddr::new(s.server.web_server_ip.parse().context("saved web server IP")?, s.server.web_server_port);
    let web = tokio::net::TcpListener::bind(web_addr)
        .await
        .with_context(|| format!("binding the web server to {web_addr}"))?;
    let rtmp_ip = castd::ingest::bind_address(&s).context("saved RTMP bind address")?;
    let rtmp_addr = SocketAddr::new(rtmp_ip, s.server.rtmp_server_port);
    let rtmp = tokio::net::TcpListener::bind(rtmp_addr)
        .await
        .with_context(|| format!("binding the RTMP server to {rtmp_addr}"))?;
    // SRT is optional: a port that cannot be bound leaves the server running without it.
    let srt = match s.ingest.srt_server_port {
        0 => None,
        port => {
            let srt_addr = SocketAddr::new(rtmp_ip, port);
            match tokio::net::UdpSocket::bind(srt_addr).await {
                Ok(sock) => Some(sock),
                Err(e) => {
                    tracing::error!("cannot bind the SRT server to {srt_addr}: {e}; SRT ingest is off");
                    None
                }
            }
        }
    };
    // WebRTC is optional too: one UDP port for every session.
    let webrtc_addr = SocketAddr::new(rtmp_ip, cli.webrtc_udp_port.unwrap_or(castd::webrtc::DEFAULT_UDP_PORT));
    let webrtc = match tokio::net::UdpSocket::bind(webrtc_addr).await {
        Ok(sock) => Some(sock),
        Err(e) => {
            tracing::error!("cannot bind the WebRTC UDP port {webrtc_addr}: {e}; WHIP ingest is off");
            None
        }
    };
    let listeners = Listeners { web, rtmp, srt, webrtc, webrtc_public_ip: cli.webrtc_public_ip };
    castd::run(config, listeners, shutdown_signal()).await.context("castd")?;
    Ok(())
}
