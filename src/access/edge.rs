//! A cluster edge's check of viewing passes: the edge checks a viewer's pass itself, before it proxies a
//! request to the origin, serves an HLS answer from its cache, or holds a chat socket.
//!
//! The origin publishes what that takes ([`Snapshot`]: per channel its visibility, signing key, the
//! grants passes are valid under now, the JWT issuer's grant and whether the admission hook is asked
//! on play; `Access::snapshot`), the edge takes it every few seconds ([`EdgeAccess::apply`]) and checks
//! passes with it as the origin does (`pass::verify`, the grant in the set; `gate::way` says which
//! requests are ways out). A grant that is gone from the origin's snapshot (password or invite
//! deleted, key rotated, JWT issuer changed) cancels the `ViewerPass::revoked` token of the passes the
//! edge admitted under it, so the chat sockets an edge holds end too.
//!
//! What an edge cannot decide it leaves to the origin ([`Verdict::Origin`]): redeeming an invite link
//! or a JWT (`?invite=`, `?jwt=`, a Bearer JWT: the origin issues the pass and its cookie), and a
//! channel it has no snapshot of yet. Where the admission hook is asked on play, a play
//! ([`Verdict::Hook`]) goes to the origin too, uncached (`Access::admit_play` there). An edge whose
//! snapshot is older than [`STALE_AFTER`] (the origin did not answer) refuses the ways out of channels
//! that need a pass: it could no longer see a revocation within the promised minute.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::gate::{bearer, carried, is_page, needs_pass, query_param, way, Way};
use super::{cookie_name_of, jwt_grant, pass, Access};
use crate::config::Visibility;
use crate::http::gate::ViewerPass;
use crate::http::ApiError;
use crate::media::ChannelId;

/// How old an edge's snapshot may be before the ways out of its private channels are refused.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// What an edge needs to check one channel's passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelAccess {
    /// The channel's slug (`default` for the root).
    pub channel: String,
    pub visibility: Visibility,
    /// The signing key, base64url.
    pub key: String,
    /// The grants passes are valid under (`p:<id>`, `i:<id>`).
    pub grants: Vec<String>,
    /// The grant of the JWT issuer configured now (`access::jwt_grant`).
    pub jwt_grant: String,
    /// Whether the admission hook is asked on play.
    pub play_hook: bool,
}

/// Every channel's [`ChannelAccess`] (the origin's `GET /api/cluster/access`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub channels: Vec<ChannelAccess>,
    /// When the origin took it (Unix seconds, the origin's clock, like a pass's `issued_at`).
    #[serde(default)]
    pub at: i64,
}

/// The origin's open channels' access (the composition root's list; `cluster` serves its snapshot).
pub type Directory = Arc<dyn Fn() -> Vec<Arc<Access>> + Send + Sync>;

impl Snapshot {
    pub fn of(accesses: &[Arc<Access>]) -> Snapshot {
        // Taken before the grants are read: a grant added meanwhile is "newer than the snapshot".
        let at = chrono::Utc::now().timestamp();
        Snapshot { channels: accesses.iter().map(|a| a.snapshot()).collect(), at }
    }
}

impl Access {
    /// What an edge needs to check this channel's passes (the signing key included: only for the
    /// cluster's nodes, behind the cluster secret).
    pub fn snapshot(&self) -> ChannelAccess {
        let s = self.settings.get();
        // The admin grant as it is now (an admin password changed since is in force on the edge too).
        self.admin_grant();
        let mut grants: Vec<String> = self.grants.lock().valid.iter().cloned().collect();
        grants.sort();
        let hook = &s.access.admission_hook;
        ChannelAccess {
            channel: self.channel.to_string(),
            visibility: s.access.visibility,
            key: URL_SAFE_NO_PAD.encode(&**self.key.read()),
            grants,
            jwt_grant: jwt_grant(&s.access.viewer_jwt),
            play_hook: !hook.url.is_empty() && hook.on_play,
        }
    }
}

/// One channel as the edge checks it.
struct Channel {
    visibility: Visibility,
    key: Vec<u8>,
    /// The grants and the JWT issuer's grant.
    valid: HashSet<String>,
    play_hook: bool,
}

impl Channel {
    fn from(c: &ChannelAccess) -> Option<Channel> {
        let key = URL_SAFE_NO_PAD.decode(&c.key).ok()?;
        let mut valid: HashSet<String> = c.grants.iter().cloned().collect();
        valid.insert(c.jwt_grant.clone());
        Some(Channel { visibility: c.visibility, key, valid, play_hook: c.play_hook })
    }
}

/// What the edge does with a request.
#[derive(Debug)]
pub enum Verdict {
    /// Serve it (from the cache, locally, or from the origin), with the viewer's pass if it carried one.
    Admit(Option<ViewerPass>),
    /// A play while the admission hook is asked: the origin decides (uncached; a local chat socket
    /// asks the origin first).
    Hook(Option<ViewerPass>),
    /// The edge cannot decide (a secret to redeem, a channel it does not know yet): the origin does,
    /// uncached.
    Origin,
    /// Answer this.
    Deny(Response),
}

/// The edge's copy of the origin's access state (see the module doc).
#[derive(Default)]
pub struct EdgeAccess {
    channels: RwLock<HashMap<String, Arc<Channel>>>,
    /// The revocation token of each (channel, grant) the edge admitted a pass under.
    tokens: Mutex<HashMap<(String, String), CancellationToken>>,
    /// When the last snapshot came, and when the origin took it (its clock).
    fresh_at: Mutex<Option<(Instant, i64)>>,
}

impl EdgeAccess {
    /// Take the origin's `snapshot`: passes of grants that are gone end (their tokens are cancelled).
    pub fn apply(&self, snapshot: &Snapshot) {
        let mut next: HashMap<String, Arc<Channel>> = HashMap::new();
        for c in &snapshot.channels {
            match Channel::from(c) {
                Some(ch) => {
                    next.insert(c.channel.clone(), Arc::new(ch));
                }
                None => tracing::warn!(channel = %c.channel, "cluster: the origin's signing key is not base64url"),
            }
        }
        let mut channels = self.channels.write();
        self.tokens.lock().retain(|(channel, grant), token| {
            let kept = match (channels.get(channel), next.get(channel)) {
                (Some(old), Some(new)) => old.key == new.key && new.valid.contains(grant),
                _ => false,
            };
            if !kept {
                token.cancel();
            }
            kept
        });
        *channels = next;
        *self.fresh_at.lock() = Some((Instant::now(), snapshot.at));
    }

    /// Whether the last snapshot had channel `slug`.
    pub fn knows(&self, slug: &str) -> bool {
        self.channels.read().contains_key(slug)
    }

    /// How old the last snapshot is (none yet: `None`).
    pub fn age(&self) -> Option<Duration> {
        self.fresh_at.lock().map(|(t, _)| t.elapsed())
    }

    fn stale(&self) -> bool {
        self.fresh_at.lock().is_none_or(|(t, _)| t.elapsed() > STALE_AFTER)
    }

    fn token(&self, channel: &str, grant: &str) -> CancellationToken {
        self.tokens.lock().entry((channel.to_string(), grant.to_string())).or_default().clone()
    }

    /// The pass `text` stands for on `channel`, if it is valid now.
    fn check(&self, slug: &str, ch: &Channel, text: &str) -> Checked {
        let Ok(claims) = pass::verify(text, &ch.key, slug, chrono::Utc::now().timestamp()) else {
            return Checked::No;
        };
        if !ch.valid.contains(&claims.grant) {
            // Issued (with the current key) after the snapshot was taken: under a grant the edge has
            // not seen yet (an invite link just made), or one revoked since. The origin knows.
            let at = self.fresh_at.lock().map_or(i64::MAX, |(_, at)| at);
            return if claims.issued_at >= at { Checked::Newer } else { Checked::No };
        }
        Checked::Yes(ViewerPass {
            subject: claims.subject,
            name: claims.name,
            expires_at: claims.expires_at,
            revoked: self.token(slug, &claims.grant),
        })
    }

    /// What to do with a request for channel `slug` (`path`: the channel's own, below `/c/{slug}`).
    pub fn admit(&self, slug: &str, path: &str, parts: &Parts) -> Verdict {
        let way = way(&parts.method, path, false);
        let ch = self.channels.read().get(slug).cloned();
        let Some(ch) = ch else {
            return if way == Way::Open { Verdict::Admit(None) } else { Verdict::Origin };
        };
        // Every pass it carries, as the gate looks at them (an old cookie does not hide a good `?pass=`).
        let mut pass = None;
        for (text, _) in carried(parts, &cookie_name_of(slug)) {
            match self.check(slug, &ch, &text) {
                Checked::Yes(p) => {
                    pass = Some(p);
                    break;
                }
                Checked::Newer => return Verdict::Origin,
                Checked::No => {}
            }
        }
        let private = ch.visibility.needs_pass();
        if private && pass.is_none() && has_secret(parts) {
            return Verdict::Origin;
        }
        match way {
            Way::Open | Way::Status => Verdict::Admit(pass),
            Way::Out { .. } if private && self.stale() => Verdict::Deny(
                ApiError::Unavailable(
                    "this edge cannot reach the origin to check viewing passes; try again soon".into(),
                )
                .into_response(),
            ),
            Way::Out { .. } if private && pass.is_none() => Verdict::Deny(refuse(slug, parts)),
            Way::Out { play: true } if ch.play_hook => Verdict::Hook(pass),
            Way::Out { .. } => Verdict::Admit(pass),
        }
    }
}

/// A pass, as the edge's snapshot sees it.
enum Checked {
    Yes(ViewerPass),
    /// Under a grant the snapshot does not have, issued after it was taken.
    Newer,
    No,
}

/// Whether a request carries an invite link or a JWT to redeem (the origin does that).
fn has_secret(parts: &Parts) -> bool {
    let query = parts.uri.query().unwrap_or_default();
    query_param(query, "invite").is_some()
        || query_param(query, "jwt").is_some()
        || bearer(parts).is_some_and(|b| b.matches('.').count() == 2 && b.starts_with("eyJ"))
}

/// A way out without a pass: 401, or a page navigation sent to the channel's page (as the origin's gate).
fn refuse(slug: &str, parts: &Parts) -> Response {
    if !is_page(parts) {
        return needs_pass();
    }
    let page = if slug == ChannelId::DEFAULT { "/".to_string() } else { format!("/c/{slug}/") };
    let mut resp = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(&page) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = Request::get(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    fn pass_for(channel: &str, grant: &str, key: &[u8], expires_at: i64) -> String {
        pass_at(channel, grant, key, expires_at, 0)
    }

    fn pass_at(channel: &str, grant: &str, key: &[u8], expires_at: i64, issued_at: i64) -> String {
        let claims = pass::Claims {
            channel: channel.into(),
            grant: grant.into(),
            subject: format!("password:{grant}"),
            name: None,
            expires_at,
            issued_at,
        };
        pass::sign(&claims, key)
    }

    fn snapshot(vis: Visibility, key: &[u8], grants: &[&str]) -> Snapshot {
        Snapshot {
            channels: vec![ChannelAccess {
                channel: "music".into(),
                visibility: vis,
                key: URL_SAFE_NO_PAD.encode(key),
                grants: grants.iter().map(|g| g.to_string()).collect(),
                jwt_grant: "j:000000000000".into(),
                play_hook: false,
            }],
            at: 1_000,
        }
    }

    #[test]
    fn the_edge_checks_passes_as_the_origin_does_and_ends_revoked_ones() {
        let key = b"0123456789abcdef0123456789abcdef";
        let edge = EdgeAccess::default();
        let seg = "/hls/0/seg1.ts";
        // Before the first snapshot the origin decides.
        assert!(matches!(edge.admit("music", seg, &parts("/c/music/hls/0/seg1.ts", &[])), Verdict::Origin));
        edge.apply(&snapshot(Visibility::Password, key, &["p:1"]));
        let later = chrono::Utc::now().timestamp() + 600;
        let good = pass_for("music", "p:1", key, later);
        let ok = |v: Verdict| match v {
            Verdict::Admit(Some(p)) => p,
            other => panic!("not admitted: {other:?}"),
        };
        let denied = |v: Verdict| match v {
            Verdict::Deny(r) => r.status(),
            other => panic!("not denied: {other:?}"),
        };
        assert_eq!(denied(edge.admit("music", seg, &parts(seg, &[]))), StatusCode::UNAUTHORIZED);
        let by_cookie = ok(edge.admit("music", seg, &parts(seg, &[("cookie", &format!("castd_pass_music={good}"))])));
        ok(edge.admit("music", seg, &parts(&format!("{seg}?pass={good}"), &[])));
        ok(edge.admit("music", seg, &parts(seg, &[("authorization", &format!("Bearer {good}"))])));
        // The default channel's cookie is not this channel's.
        assert_eq!(denied(edge.admit("music", seg, &parts(seg, &[("cookie", &format!("castd_pass={good}"))]))), 401);
        for bad in [
            pass_for("music", "p:1", b"another key", later),
            pass_for("music", "p:2", key, later),
            pass_for("talk", "p:1", key, later),
            pass_for("music", "p:1", key, 1),
        ] {
            assert_eq!(denied(edge.admit("music", seg, &parts(&format!("{seg}?pass={bad}"), &[]))), 401);
        }
        // Open paths stay open; a page navigation is sent to the channel's page; a secret goes to the origin.
        assert!(matches!(edge.admit("music", "/api/viewer/unlock", &parts("/", &[])), Verdict::Admit(None)));
        let page = edge.admit("music", "/api/chat", &parts("/", &[("accept", "text/html")]));
        assert_eq!(denied(page), StatusCode::SEE_OTHER);
        assert!(matches!(edge.admit("music", seg, &parts(&format!("{seg}?invite=abc"), &[])), Verdict::Origin));
        // The password deleted at the origin: the pass is refused, and the token of the pass admitted fires.
        assert!(!by_cookie.revoked.is_cancelled());
        edge.apply(&snapshot(Visibility::Password, key, &["p:3"]));
        assert!(by_cookie.revoked.is_cancelled(), "the pass's token is cancelled");
        assert_eq!(denied(edge.admit("music", seg, &parts(&format!("{seg}?pass={good}"), &[]))), 401);
        // A rotated key ends every pass, even under a grant still there.
        let p3 =
            ok(edge.admit("music", seg, &parts(&format!("{seg}?pass={}", pass_for("music", "p:3", key, later)), &[])));
        edge.apply(&snapshot(Visibility::Password, b"a new key", &["p:3"]));
        assert!(p3.revoked.is_cancelled());
        // A pass issued after the snapshot under a grant it does not have yet: the origin decides.
        let newer = pass_at("music", "i:9", b"a new key", later, 1_000);
        assert!(matches!(edge.admit("music", seg, &parts(&format!("{seg}?pass={newer}"), &[])), Verdict::Origin));
        let older = pass_at("music", "i:9", b"a new key", later, 999);
        assert_eq!(denied(edge.admit("music", seg, &parts(&format!("{seg}?pass={older}"), &[]))), 401);
        // A public channel lets everything through.
        edge.apply(&snapshot(Visibility::Public, key, &[]));
        assert!(matches!(edge.admit("music", seg, &parts(seg, &[])), Verdict::Admit(None)));
    }
}
