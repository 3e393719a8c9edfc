//! Viewer access: who may watch a channel. Owns the channel's visibility (`config::access`), its
//! viewing passes (`pass`: HMAC-signed, expiring, issued for one of the channel's passwords, invite
//! links or a JWT of the operator's site), the tables behind them (`db`), the JWT verifier (`jwt`),
//! the keyed prefix that lets an unlock verify one password's hash rather than every one (`prefix`),
//! the admission hook (`hook`), the gate in front of every way out of the channel (`gate`, the
//! `http::gate::Gate` the composition root puts in front of the channel's router and lanes) and the
//! routes (`api`: the viewer's unlock, the admin's passwords, invites and settings).
//!
//! Revocation is immediate for new requests: a pass names the grant it was issued under, and a grant
//! that is revoked (password or invite deleted, JWT issuer changed, signing key rotated) is gone from
//! the set [`Access`] keeps in memory. Connections that stay open (chat sockets, WHEP sessions) hold
//! the grant's cancellation token in their `ViewerPass` and end when it fires.
//!
//! Uses nothing else; given the channel's store, settings, bus and stream state.

pub mod api;
pub mod db;
// A cluster edge's check of the passes (the origin's snapshot of this feature's state).
pub mod edge;
pub mod gate;
pub mod hook;
pub mod jwt;
pub mod pass;
pub mod prefix;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use axum::http::HeaderValue;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::{JwtSettings, Visibility};
use crate::events::{Bus, Event};
use crate::http::gate::ViewerPass;
use crate::http::setters::SettingsHost as _;
use crate::http::ApiError;
use crate::media::ChannelId;
use crate::store::settings::SettingsStore;
use crate::store::{Store, StoreError};
use crate::stream::StreamWatch;
use crate::tasks::{Stage, Tasks};
use crate::throttle::{Backoff, BackoffConfig};

/// Most viewer passwords a channel keeps (an unlock checks the bcrypt hash of those whose keyed prefix
/// is the given password's: see `prefix`).
pub const MAX_PASSWORDS: usize = 20;
/// The prefix of the grant of the passes the channel's admin takes (`POST /api/admin/viewer/pass`: the
/// dashboard's player): `a:` and a digest of the signing key and the admin credentials
/// ([`Access::admin_grant`]), so they end with the signing key and whenever an admin password (the
/// channel admin's or the server admin's) is changed: a removed channel admin keeps no pass.
pub const ADMIN_GRANT: &str = "a";
/// Longest an admin's pass lasts (the dashboard takes a new one when it is opened).
pub const ADMIN_PASS_SECONDS: i64 = 12 * 3600;
/// Longest viewing pass a channel's admin may set (`viewer/passlifetime` on `/c/{slug}`): the server's
/// limit on what a tenant may hand out; the server admin may set up to `config::access::PASS_SECONDS`'s
/// 30 days on the default channel.
pub const CHANNEL_PASS_SECONDS_MAX: u32 = 7 * 24 * 3600;
/// Most passes whose signature [`Access`] remembers (beyond it, it starts afresh).
const MAX_VERIFIED: usize = 8192;
/// Most invite links a channel keeps.
pub const MAX_INVITES: usize = 1000;

/// Errors of the access feature's setup.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for AccessError {
    fn from(e: rusqlite::Error) -> Self {
        AccessError::Store(StoreError::Sqlite(e))
    }
}

/// A pass just issued: what the viewer is told, and the cookie that carries it.
#[derive(Debug, Clone)]
pub struct Issued {
    pub pass: String,
    pub expires_at: i64,
    pub cookie: HeaderValue,
    pub viewer: ViewerPass,
}

/// The grants passes may be issued under, and the revocation token of each.
#[derive(Default)]
struct Grants {
    valid: HashSet<String>,
    tokens: HashMap<String, CancellationToken>,
}

/// A channel's viewer access (see the module doc).
pub struct Access {
    pub channel: ChannelId,
    /// Where the channel's JWKS and hook URLs may lead (their setters refuse a literal address it refuses).
    pub reach: crate::outbound::Reach,
    /// The channel's path prefix (`""` for the default channel, `/c/{slug}` for the others).
    pub base: String,
    pub settings: SettingsStore,
    store: Store,
    stream: StreamWatch,
    key: RwLock<Arc<[u8]>>,
    grants: Mutex<Grants>,
    /// Wrong passwords, invites and tokens per address.
    backoff: Backoff,
    jwt: jwt::JwtVerifier,
    hook: hook::AdmissionHook,
    /// The name of the cookie that carries this channel's pass.
    cookie_name: String,
    /// Passes whose signature was checked, by their text (the signature, the JSON and the base64 of a
    /// pass are checked once, not on every segment request); cleared when the key changes, bounded.
    verified: RwLock<HashMap<Arc<str>, Arc<pass::Claims>>>,
    /// The JWT issuer's settings and their grant (`jwt_grant`), kept so a member's pass is not hashed on
    /// every request.
    jwt_grant: RwLock<Option<(JwtSettings, String)>>,
    /// The channel's admin check: the admin's Basic credentials open every way out too (the
    /// dashboard's preview, replays before they are public).
    pub(crate) admin: crate::http::AdminAuth,
    /// The admin grant in force (see [`ADMIN_GRANT`]), refreshed by [`Access::admin_grant`].
    admin_grant: Mutex<String>,
    /// The key of the viewer passwords' prefixes (a file in the channel's data folder: see `prefix`).
    prefix_key: Arc<prefix::PrefixKey>,
}

/// What checking a password against the channel's found: the row it is, and how many bcrypt
/// hashes were verified to find out (1 for a right password whose row has its prefix; 0 for a wrong
/// one, unless its prefix happens to be a row's, or rows from before prefixes are left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    pub id: Option<i64>,
    pub verified: usize,
}

/// Which of the channel's passwords `password` is: only the rows with its keyed prefix, and those
/// stored before prefixes, are verified; such a row given right gets its prefix written (so it
/// converges). `Err(Busy)`: the hash pool is full.
pub async fn check_password(
    store: &Store,
    key: &prefix::PrefixKey,
    password: &str,
) -> Result<Result<Checked, crate::password::Busy>, StoreError> {
    let p = key.prefix(password);
    let rows = store.call(move |c| db::password_candidates(c, p)).await?;
    let mut verified = 0;
    for row in rows {
        verified += 1;
        match crate::password::verify_pooled(password, &row.hash).await {
            Ok(true) => {
                if row.prefix.is_none() {
                    let id = row.id;
                    store.call(move |c| db::set_password_prefix(c, id, p)).await?;
                }
                return Ok(Ok(Checked { id: Some(row.id), verified }));
            }
            Ok(false) => {}
            Err(busy) => return Ok(Err(busy)),
        }
    }
    Ok(Ok(Checked { id: None, verified }))
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The name of the cookie that carries channel `slug`'s pass (the edge's check uses it too).
pub fn cookie_name_of(slug: &str) -> String {
    if slug == ChannelId::DEFAULT {
        "castd_pass".into()
    } else {
        format!("castd_pass_{slug}")
    }
}

/// The grant of the JWT issuer configured now (`j:` and a digest of the issuer's settings): passes
/// issued for a token end when the issuer is changed.
pub fn jwt_grant(cfg: &JwtSettings) -> String {
    let json = serde_json::to_vec(cfg).unwrap_or_default();
    format!("j:{}", &hex::encode(Sha256::digest(&json))[..12])
}

impl Access {
    /// The channel's access; `data_dir`: the channel's data folder (the viewer passwords' prefix key
    /// is kept there, outside the database).
    pub fn open(
        channel: ChannelId,
        store: Store,
        settings: SettingsStore,
        stream: StreamWatch,
        admin: crate::http::AdminAuth,
        reach: crate::outbound::Reach,
        data_dir: &Path,
    ) -> Result<Arc<Access>, AccessError> {
        store.migrate("access", db::MIGRATIONS)?;
        let prefix_key = Arc::new(prefix::PrefixKey::load_or_create(data_dir).unwrap_or_else(|e| {
            tracing::warn!(channel = %channel, "{e}; the viewer passwords' prefixes last until castd stops");
            prefix::PrefixKey::ephemeral()
        }));
        let t = now();
        let (key, valid) = store.with(|c| {
            if db::adopt_prefix_key(c, &prefix_key.fingerprint())? {
                tracing::warn!(channel = %channel, "the viewer password key changed: each password's hash is checked until it is given again");
            }
            let key = db::signing_key(c, t)?;
            let mut valid = HashSet::new();
            for p in db::passwords(c)? {
                valid.insert(format!("p:{}", p.id));
            }
            for i in db::invites(c)? {
                valid.insert(format!("i:{}", i.id));
            }
            Ok((key, valid))
        })?;
        let base = channel.base_path();
        let cookie_name = cookie_name_of(channel.as_str());
        let access = Arc::new(Access {
            cookie_name,
            verified: RwLock::default(),
            jwt_grant: RwLock::default(),
            channel,
            base,
            settings,
            store,
            stream,
            key: RwLock::new(key.into()),
            grants: Mutex::new(Grants { valid, tokens: HashMap::new() }),
            backoff: Backoff::new(BackoffConfig::SECRETS),
            // The channel's JWKS and hook URLs go where its reach lets them (`outbound::Reach`).
            jwt: jwt::JwtVerifier::for_reach(reach.clone()),
            hook: hook::AdmissionHook::reaching(reach.clone()),
            reach,
            admin,
            admin_grant: Mutex::new(String::new()),
            prefix_key,
        });
        access.admin_grant();
        Ok(access)
    }

    /// The grant of the admin's passes now: `a:` and 48 bits of the SHA-256 of the signing key and
    /// the admin credentials' digest. When it differs from the one in force (a password or the key
    /// changed), the old one is revoked (its passes end, open connections too) and this one is valid.
    pub fn admin_grant(&self) -> String {
        let mut d = Sha256::new();
        d.update(&**self.key.read());
        d.update(self.admin.credential_digest());
        let grant = format!("{ADMIN_GRANT}:{}", &hex::encode(d.finalize())[..12]);
        let mut current = self.admin_grant.lock();
        if *current != grant {
            let old = std::mem::replace(&mut *current, grant.clone());
            let mut g = self.grants.lock();
            if !old.is_empty() {
                g.valid.remove(&old);
                if let Some(t) = g.tokens.remove(&old) {
                    t.cancel();
                }
            }
            g.valid.insert(grant.clone());
        }
        grant
    }

    /// The cookie that carries this channel's pass.
    pub fn cookie_name(&self) -> &str {
        &self.cookie_name
    }

    fn cookie_path(&self) -> String {
        if self.base.is_empty() {
            "/".into()
        } else {
            format!("{}/", self.base)
        }
    }

    pub fn visibility(&self) -> Visibility {
        self.settings.get().access.visibility
    }

    /// Whether the channel is live (a private channel's status says this and nothing else).
    pub fn online(&self) -> bool {
        self.stream.borrow().online
    }

    /// The cookie for `pass`, kept until `expires_at` (an empty pass clears it).
    pub fn cookie(&self, pass: &str, expires_at: i64) -> HeaderValue {
        let secure = self.settings.get().server.server_url.starts_with("https://");
        let max_age = if pass.is_empty() { 0 } else { (expires_at - now()).max(0) };
        let value = format!(
            "{}={pass}; Path={}; Max-Age={max_age}; HttpOnly; SameSite=Lax{}",
            self.cookie_name(),
            self.cookie_path(),
            if secure { "; Secure" } else { "" }
        );
        // A pass is base64url and dots; the path a slug: always a valid header value.
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    fn grant_token(&self, grant: &str) -> CancellationToken {
        self.grants.lock().tokens.entry(grant.to_string()).or_default().clone()
    }

    /// Issue a pass under `grant`, ending at the pass lifetime or `until`, whichever is sooner.
    pub fn issue(&self, grant: String, subject: String, name: Option<String>, until: Option<i64>) -> Issued {
        let t = now();
        let mut seconds = self.settings.get().access.viewer_pass_seconds.max(crate::config::access::PASS_SECONDS.0);
        if self.is_channel() {
            // A lifetime stored before the channel limit existed is held to it too.
            seconds = seconds.min(CHANNEL_PASS_SECONDS_MAX);
        }
        let lifetime = i64::from(seconds);
        let expires_at = until.map_or(t + lifetime, |u| u.min(t + lifetime));
        let claims = pass::Claims {
            channel: self.channel.to_string(),
            grant: grant.clone(),
            subject: subject.clone(),
            name: name.clone(),
            expires_at,
            issued_at: t,
        };
        let p = pass::sign(&claims, &self.key.read());
        let viewer = ViewerPass { subject, name, expires_at, revoked: self.grant_token(&grant) };
        Issued { cookie: self.cookie(&p, expires_at), pass: p, expires_at, viewer }
    }

    /// The pass `text` stands for, if it is valid now.
    pub fn check(&self, text: &str) -> Option<ViewerPass> {
        let claims = self.check_claims(text)?;
        Some(self.viewer(&claims))
    }

    /// The claims of the pass `text` stands for, if it is valid now (its signature checked once, then
    /// remembered; its expiry and grant checked every time).
    pub fn check_claims(&self, text: &str) -> Option<Arc<pass::Claims>> {
        let t = now();
        let cached = self.verified.read().get(text).cloned();
        let claims = match cached {
            Some(c) => c,
            None => {
                let key = self.key.read().clone();
                let c = Arc::new(pass::verify(text, &key, self.channel.as_str(), t).ok()?);
                let mut v = self.verified.write();
                if v.len() >= MAX_VERIFIED {
                    v.clear();
                }
                v.insert(Arc::from(text), c.clone());
                c
            }
        };
        if claims.expires_at <= t || !self.grant_valid(&claims.grant) {
            return None;
        }
        Some(claims)
    }

    fn grant_valid(&self, grant: &str) -> bool {
        if grant.starts_with("a:") {
            // Worked out each time: a changed admin password ends the admin's passes at once.
            grant == self.admin_grant()
        } else if grant.starts_with("j:") {
            let s = self.settings.get();
            let cfg = &s.access.viewer_jwt;
            if let Some((c, g)) = self.jwt_grant.read().as_ref() {
                if c == cfg {
                    return grant == g;
                }
            }
            let g = jwt_grant(cfg);
            let ok = grant == g;
            *self.jwt_grant.write() = Some((cfg.clone(), g));
            ok
        } else {
            self.grants.lock().valid.contains(grant)
        }
    }

    /// The viewer a valid pass stands for, with its grant's revocation token.
    pub fn viewer(&self, claims: &pass::Claims) -> ViewerPass {
        ViewerPass {
            subject: claims.subject.clone(),
            name: claims.name.clone(),
            expires_at: claims.expires_at,
            revoked: self.grant_token(&claims.grant),
        }
    }

    /// End every pass issued under `grant` (and issue no more under it).
    fn revoke(&self, grant: &str) {
        let mut g = self.grants.lock();
        g.valid.remove(grant);
        if let Some(t) = g.tokens.remove(grant) {
            t.cancel();
        }
    }

    /// End the passes of every JWT issuer but the one configured now.
    fn revoke_old_issuers(&self) {
        let current = jwt_grant(&self.settings.get().access.viewer_jwt);
        let mut g = self.grants.lock();
        let old: Vec<String> = g.tokens.keys().filter(|k| k.starts_with("j:") && **k != current).cloned().collect();
        for k in old {
            if let Some(t) = g.tokens.remove(&k) {
                t.cancel();
            }
        }
    }

    /// A new signing key: every pass issued so far ends.
    pub async fn rotate_key(&self) -> Result<(), ApiError> {
        let key = self.store.call(|c| db::rotate_key(c, now())).await?;
        *self.key.write() = key.into();
        self.verified.write().clear();
        let mut g = self.grants.lock();
        for (_, t) in g.tokens.drain() {
            t.cancel();
        }
        Ok(())
    }

    /// Ask the admission hook whether `subject` at `ip` may play (when a hook asks about viewers).
    /// A hook that cannot be reached denies on a channel that needs a pass and allows on the others.
    pub async fn admit_play(
        &self,
        subject: Option<&str>,
        ip: Option<IpAddr>,
        user_agent: Option<&str>,
    ) -> Result<(), ApiError> {
        self.admit(subject, ip, user_agent, false).await
    }

    /// The hook's say on a way out after the start of watching (a variant playlist, a segment, a
    /// part...): the last verdict for the same viewer and address (`hook::RECENT_VERDICT`), else asked.
    pub async fn admit_way(
        &self,
        subject: Option<&str>,
        ip: Option<IpAddr>,
        user_agent: Option<&str>,
    ) -> Result<(), ApiError> {
        self.admit(subject, ip, user_agent, true).await
    }

    async fn admit(
        &self,
        subject: Option<&str>,
        ip: Option<IpAddr>,
        user_agent: Option<&str>,
        recent: bool,
    ) -> Result<(), ApiError> {
        let s = self.settings.get();
        let cfg = &s.access.admission_hook;
        if cfg.url.is_empty() || !cfg.on_play {
            return Ok(());
        }
        let req = hook::AdmissionRequest {
            channel: self.channel.to_string(),
            action: hook::Action::Play,
            subject: subject.map(str::to_string),
            address: ip,
            user_agent: user_agent.map(str::to_string),
        };
        let verdict = if recent { self.hook.ask_recent(cfg, &req).await } else { self.hook.ask(cfg, &req).await };
        match verdict {
            hook::Verdict::Allow => Ok(()),
            hook::Verdict::Deny(reason) => Err(ApiError::Forbidden(reason)),
            hook::Verdict::Unreachable(why) if s.access.visibility.needs_pass() => {
                tracing::warn!(channel = %self.channel, "admission hook unreachable, viewer refused: {why}");
                Err(ApiError::Unavailable("admission is not available at the moment; try again soon".into()))
            }
            hook::Verdict::Unreachable(why) => {
                tracing::warn!(channel = %self.channel, "admission hook unreachable, viewer allowed (public): {why}");
                Ok(())
            }
        }
    }

    fn limited(&self, ip: Option<IpAddr>) -> Result<(), ApiError> {
        match ip {
            Some(ip) => self.backoff.attempt(ip).map_err(ApiError::from),
            None => Ok(()),
        }
    }

    fn succeeded(&self, ip: Option<IpAddr>) {
        if let Some(ip) = ip {
            self.backoff.succeeded(ip);
        }
    }

    /// A viewer's password: a pass when it is one of the channel's.
    pub async fn unlock(&self, password: &str, ip: Option<IpAddr>, ua: Option<&str>) -> Result<Issued, ApiError> {
        if self.visibility() != Visibility::Password {
            return Err(ApiError::Conflict("this channel does not take a password".into()));
        }
        self.limited(ip)?;
        let Ok(checked) = check_password(&self.store, &self.prefix_key, password).await? else {
            return Err(ApiError::Unavailable("too many sign-ins at once; try again".into()));
        };
        tracing::debug!(channel = %self.channel, verified = checked.verified, found = checked.id.is_some(), "viewer password checked");
        let Some(id) = checked.id else { return Err(ApiError::NeedsPass("wrong password".into())) };
        self.succeeded(ip);
        let subject = format!("password:{id}");
        self.admit_play(Some(&subject), ip, ua).await?;
        Ok(self.issue(format!("p:{id}"), subject, None, None))
    }

    /// An invite link's secret: a pass when the link is valid (one use counted).
    pub async fn redeem(&self, secret: &str, ip: Option<IpAddr>, ua: Option<&str>) -> Result<Issued, ApiError> {
        self.limited(ip)?;
        let s = secret.to_string();
        let t = now();
        let Some((id, until)) = self.store.call(move |c| db::redeem_invite(c, &s, t)).await? else {
            return Err(ApiError::NeedsPass("this invite link is not valid (expired, used up or revoked)".into()));
        };
        self.succeeded(ip);
        let subject = format!("invite:{id}");
        self.admit_play(Some(&subject), ip, ua).await?;
        Ok(self.issue(format!("i:{id}"), subject, None, Some(until)))
    }

    /// A token (JWT) of the operator's site: a pass for the member it names.
    pub async fn exchange(&self, token: &str, ip: Option<IpAddr>, ua: Option<&str>) -> Result<Issued, ApiError> {
        let s = self.settings.get();
        let cfg = &s.access.viewer_jwt;
        if !cfg.configured() {
            return Err(ApiError::Conflict("this channel does not take tokens".into()));
        }
        self.limited(ip)?;
        let member = match self.jwt.verify(cfg, token, now()).await {
            Ok(m) => m,
            Err(e @ jwt::JwtError::KeysUnavailable { .. }) => {
                tracing::warn!(channel = %self.channel, "JWT issuer's keys unavailable: {}", e.log_detail().unwrap_or_default());
                return Err(ApiError::Unavailable(e.to_string()));
            }
            Err(e) => return Err(ApiError::NeedsPass(format!("the token is not accepted: {e}"))),
        };
        self.succeeded(ip);
        let subject = format!("jwt:{}", member.subject);
        self.admit_play(Some(&subject), ip, ua).await?;
        Ok(self.issue(jwt_grant(cfg), subject, member.name, Some(member.expires_at)))
    }

    pub async fn add_password(&self, password: String, comment: String) -> Result<i64, ApiError> {
        let hash = match crate::password::hash_pooled(&password).await {
            Ok(Ok(h)) => h,
            Ok(Err(e)) => return Err(ApiError::bad(e.to_string())),
            Err(_) => return Err(ApiError::Unavailable("too busy hashing passwords; try again".into())),
        };
        let t = now();
        let p = self.prefix_key.prefix(&password);
        let id = self
            .store
            .call(move |c| {
                if db::passwords(c)?.len() >= MAX_PASSWORDS {
                    return Ok(None);
                }
                db::add_password(c, &hash, p, &comment, t).map(Some)
            })
            .await?
            .ok_or_else(|| ApiError::Conflict(format!("a channel keeps at most {MAX_PASSWORDS} viewer passwords")))?;
        self.grants.lock().valid.insert(format!("p:{id}"));
        Ok(id)
    }

    pub async fn delete_password(&self, id: i64) -> Result<bool, ApiError> {
        let gone = self.store.call(move |c| db::delete_password(c, id)).await?;
        self.revoke(&format!("p:{id}"));
        Ok(gone)
    }

    /// A new invite link: its id and secret.
    pub async fn add_invite(&self, comment: String, expires_at: i64, max_uses: i64) -> Result<(i64, String), ApiError> {
        let secret = crate::password::random_token(32);
        let s = secret.clone();
        let t = now();
        let id = self
            .store
            .call(move |c| {
                let live: Vec<_> = db::invites(c)?;
                if live.len() >= MAX_INVITES {
                    return Ok(None);
                }
                db::add_invite(c, &s, &comment, t, expires_at, max_uses).map(Some)
            })
            .await?
            .ok_or_else(|| ApiError::Conflict(format!("a channel keeps at most {MAX_INVITES} invite links")))?;
        self.grants.lock().valid.insert(format!("i:{id}"));
        Ok((id, secret))
    }

    pub async fn delete_invite(&self, id: i64) -> Result<bool, ApiError> {
        let gone = self.store.call(move |c| db::delete_invite(c, id)).await?;
        self.revoke(&format!("i:{id}"));
        Ok(gone)
    }

    pub async fn passwords(&self) -> Result<Vec<db::PasswordRow>, ApiError> {
        Ok(self.store.call(|c| db::passwords(c)).await?)
    }

    pub async fn invites(&self) -> Result<Vec<db::InviteRow>, ApiError> {
        Ok(self.store.call(|c| db::invites(c)).await?)
    }
}

/// Follow the settings: passes of a JWT issuer that is no longer configured end.
pub fn start(access: Arc<Access>, bus: &Bus, tasks: &Tasks) {
    let mut sub = bus.subscribe("access: settings");
    tasks.spawn_until_stopped(Stage::Background, "access: settings", async move {
        while let Some(ev) = sub.recv().await {
            let Event::SettingsChanged(change) = &*ev else { continue };
            if change.changed(|s| &s.access.viewer_jwt) {
                access.revoke_old_issuers();
            }
        }
    });
}
