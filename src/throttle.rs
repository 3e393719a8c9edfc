//! Limits per client address: backoff after failed guesses of a secret, token-bucket rates, and caps on
//! how many things (sockets, offers, downloads) one address may hold at once.
//!
//! Every guessable secret castd checks (the admin password, stream keys, sign-in codes, viewer
//! passwords) goes through a [`Backoff`]: a few free failures per address, then each further failure
//! doubles the wait before the next attempt is even looked at (up to [`BackoffConfig::max`]). A
//! success clears the address. [`Rate`] is a token bucket per address (chat registrations, sign-in
//! requests); [`Caps`] counts what an address holds, released when the [`CapPermit`] is dropped.
//!
//! Addresses are grouped: an IPv6 client is one /64 (one host usually owns the whole prefix, and
//! counting single addresses there would be no limit at all); IPv4 addresses count one by one.
//! Every table is bounded ([`MAX_TRACKED`] addresses): when full, entries that no longer limit anyone
//! are dropped first, and if none can be, the oldest go. A forgotten address starts afresh, which only
//! ever errs towards letting a client try again, never towards locking one out.
//!
//! These are in-process, per node: behind a load balancer each castd limits on its own.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Most addresses one table tracks.
pub const MAX_TRACKED: usize = 65_536;

/// The key of a client address: IPv4 as is, IPv6 by its /64 (IPv4-mapped IPv6 as IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrKey(IpAddr);

impl AddrKey {
    pub fn of(ip: IpAddr) -> AddrKey {
        match ip.to_canonical() {
            IpAddr::V4(v4) => AddrKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => {
                let s = v6.segments();
                AddrKey(IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
            }
        }
    }
}

/// A refusal: wait this long before trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many attempts; try again in {} s", retry_secs(*.0))]
pub struct Limited(pub Duration);

impl Limited {
    /// Whole seconds to put in a `Retry-After` header (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        retry_secs(self.0)
    }
}

fn retry_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0).max(u64::from(d.is_zero()))
}

/// How a [`Backoff`] grows.
#[derive(Debug, Clone, Copy)]
pub struct BackoffConfig {
    /// Failures an address may make before it has to wait at all.
    pub free: u32,
    /// The wait after the first failure beyond `free`; each further one doubles it.
    pub base: Duration,
    /// The longest wait.
    pub max: Duration,
    /// After this long without a failure, an address starts afresh.
    pub forget_after: Duration,
}

impl BackoffConfig {
    /// For secrets a person types (passwords, keys): 5 free tries, then 1 s, 2 s, 4 s … up to 5 min.
    pub const SECRETS: BackoffConfig = BackoffConfig {
        free: 5,
        base: Duration::from_secs(1),
        max: Duration::from_secs(300),
        forget_after: Duration::from_secs(3600),
    };
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    until: Instant,
    last: Instant,
}

/// Backoff per address after failed attempts at a secret (see the module doc).
#[derive(Clone)]
pub struct Backoff {
    config: BackoffConfig,
    table: Arc<Mutex<HashMap<AddrKey, Failures>>>,
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Backoff {
        Backoff { config, table: Arc::default() }
    }

    /// Whether `ip` may make an attempt now.
    pub fn check(&self, ip: IpAddr) -> Result<(), Limited> {
        self.check_at(ip, Instant::now())
    }

    fn check_at(&self, ip: IpAddr, now: Instant) -> Result<(), Limited> {
        match self.table.lock().get(&AddrKey::of(ip)) {
            Some(f) if f.until > now => Err(Limited(f.until - now)),
            _ => Ok(()),
        }
    }

    /// Record a failed attempt of `ip`; returns the wait it now faces, if any.
    pub fn failed(&self, ip: IpAddr) -> Option<Limited> {
        self.failed_at(ip, Instant::now())
    }

    fn failed_at(&self, ip: IpAddr, now: Instant) -> Option<Limited> {
        let mut table = self.table.lock();
        self.fail_locked(&mut table, ip, now)
    }

    fn fail_locked(&self, table: &mut HashMap<AddrKey, Failures>, ip: IpAddr, now: Instant) -> Option<Limited> {
        let cfg = self.config;
        if table.len() >= MAX_TRACKED {
            table.retain(|_, f| f.until > now && now.duration_since(f.last) < cfg.forget_after);
            if table.len() >= MAX_TRACKED {
                evict_oldest(table, |f| f.last);
            }
        }
        let f = table.entry(AddrKey::of(ip)).or_insert(Failures { count: 0, until: now, last: now });
        if now.duration_since(f.last) >= cfg.forget_after {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if f.count <= cfg.free {
            return None;
        }
        let doublings = (f.count - cfg.free - 1).min(30);
        let wait = cfg.base.saturating_mul(1u32 << doublings).min(cfg.max);
        f.until = now + wait;
        Some(Limited(wait))
    }

    /// Check and count an attempt in one step, for a secret whose check takes time (the admin
    /// password's bcrypt): refused while `ip` waits; otherwise the attempt is counted as a failure
    /// before it is checked (call [`Backoff::succeeded`] if it turns out right), so concurrent guesses
    /// cannot all slip past the backoff before the first of them is found wrong.
    pub fn attempt(&self, ip: IpAddr) -> Result<(), Limited> {
        self.attempt_at(ip, Instant::now())
    }

    fn attempt_at(&self, ip: IpAddr, now: Instant) -> Result<(), Limited> {
        let mut table = self.table.lock();
        if let Some(f) = table.get(&AddrKey::of(ip)) {
            if f.until > now {
                return Err(Limited(f.until - now));
            }
        }
        self.fail_locked(&mut table, ip, now);
        Ok(())
    }

    /// A correct attempt: `ip` starts afresh.
    pub fn succeeded(&self, ip: IpAddr) {
        self.table.lock().remove(&AddrKey::of(ip));
    }

    /// Failures recorded for `ip` (for tests and diagnostics).
    pub fn failures(&self, ip: IpAddr) -> u32 {
        self.table.lock().get(&AddrKey::of(ip)).map_or(0, |f| f.count)
    }
}

/// A token bucket per address: `burst` at once, then one more every `every`.
#[derive(Clone)]
pub struct Rate {
    burst: u32,
    every: Duration,
    table: Arc<Mutex<HashMap<AddrKey, (f64, Instant)>>>,
}

impl Rate {
    pub fn new(burst: u32, every: Duration) -> Rate {
        Rate { burst: burst.max(1), every: every.max(Duration::from_millis(1)), table: Arc::default() }
    }

    /// Take one token for `ip`, or say how long until one is there.
    pub fn take(&self, ip: IpAddr) -> Result<(), Limited> {
        self.take_at(ip, Instant::now())
    }

    fn take_at(&self, ip: IpAddr, now: Instant) -> Result<(), Limited> {
        let burst = f64::from(self.burst);
        let per_sec = 1.0 / self.every.as_secs_f64();
        let mut table = self.table.lock();
        if table.len() >= MAX_TRACKED {
            // Full buckets limit nobody.
            table.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * per_sec < burst);
            if table.len() >= MAX_TRACKED {
                evict_oldest(&mut table, |(_, at)| *at);
            }
        }
        let (tokens, at) = table.entry(AddrKey::of(ip)).or_insert((burst, now));
        let refilled = (*tokens + now.duration_since(*at).as_secs_f64() * per_sec).min(burst);
        *at = now;
        if refilled >= 1.0 {
            *tokens = refilled - 1.0;
            Ok(())
        } else {
            *tokens = refilled;
            Err(Limited(Duration::from_secs_f64((1.0 - refilled) / per_sec)))
        }
    }
}

/// Caps on what one address holds at once, and on the total (see [`CapPermit`]).
#[derive(Clone)]
pub struct Caps {
    per_address: usize,
    total: usize,
    inner: Arc<Mutex<CapsInner>>,
}

#[derive(Default)]
struct CapsInner {
    held: HashMap<AddrKey, usize>,
    total: usize,
}

/// Why a [`Caps`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CapRefused {
    #[error("this address already holds {0}, the most allowed")]
    PerAddress(usize),
    #[error("the server already holds {0}, the most allowed")]
    Total(usize),
}

/// One thing an address holds; dropping it gives the place back.
pub struct CapPermit {
    key: AddrKey,
    inner: Arc<Mutex<CapsInner>>,
}

impl Drop for CapPermit {
    fn drop(&mut self) {
        let mut inner = self.inner.lock();
        inner.total = inner.total.saturating_sub(1);
        if let Some(n) = inner.held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                inner.held.remove(&self.key);
            }
        }
    }
}

impl std::fmt::Debug for CapPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapPermit").field("key", &self.key).finish()
    }
}

impl Caps {
    /// At most `per_address` per address and `total` in all (`usize::MAX`: no total cap).
    pub fn new(per_address: usize, total: usize) -> Caps {
        Caps { per_address: per_address.max(1), total: total.max(1), inner: Arc::default() }
    }

    /// Take a place for `ip`.
    pub fn try_acquire(&self, ip: IpAddr) -> Result<CapPermit, CapRefused> {
        let key = AddrKey::of(ip);
        let mut inner = self.inner.lock();
        if inner.total >= self.total {
            return Err(CapRefused::Total(self.total));
        }
        let held = inner.held.get(&key).copied().unwrap_or(0);
        if held >= self.per_address {
            return Err(CapRefused::PerAddress(self.per_address));
        }
        inner.held.insert(key, held + 1);
        inner.total += 1;
        Ok(CapPermit { key, inner: self.inner.clone() })
    }

    /// Places `ip` holds now.
    pub fn held(&self, ip: IpAddr) -> usize {
        self.inner.lock().held.get(&AddrKey::of(ip)).copied().unwrap_or(0)
    }

    /// Places held in all.
    pub fn total(&self) -> usize {
        self.inner.lock().total
    }
}

/// Drop the oldest tenth of a full table.
fn evict_oldest<V>(table: &mut HashMap<AddrKey, V>, age: impl Fn(&V) -> Instant) {
    let mut ages: Vec<(Instant, AddrKey)> = table.iter().map(|(k, v)| (age(v), *k)).collect();
    ages.sort_unstable_by_key(|(at, _)| *at);
    for (_, k) in ages.into_iter().take(MAX_TRACKED / 10 + 1) {
        table.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn backoff_allows_the_free_failures_then_doubles() {
        let b = Backoff::new(BackoffConfig::SECRETS);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..5 {
            assert!(b.check_at(a, t0).is_ok());
            assert_eq!(b.failed_at(a, t0), None);
        }
        assert_eq!(b.failed_at(a, t0), Some(Limited(Duration::from_secs(1))));
        assert!(b.check_at(a, t0).is_err());
        assert!(b.check_at(a, t0 + Duration::from_millis(1001)).is_ok());
        assert_eq!(b.failed_at(a, t0), Some(Limited(Duration::from_secs(2))));
        assert_eq!(b.failed_at(a, t0), Some(Limited(Duration::from_secs(4))));
        for _ in 0..40 {
            b.failed_at(a, t0);
        }
        assert_eq!(b.check_at(a, t0), Err(Limited(Duration::from_secs(300))), "capped at the maximum");
        assert!(b.check_at(ip("192.0.2.2"), t0).is_ok(), "another address is not affected");
        b.succeeded(a);
        assert!(b.check_at(a, t0).is_ok());
        assert_eq!(b.failures(a), 0);
    }

    #[test]
    fn attempt_counts_up_front_and_refuses_while_waiting() {
        let b = Backoff::new(BackoffConfig::SECRETS);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        // Six attempts in flight at once: the sixth is still let through (as a sixth sequential
        // failure would be), the seventh waits, whatever the outcome of the six.
        for _ in 0..6 {
            assert!(b.attempt_at(a, t0).is_ok());
        }
        assert_eq!(b.attempt_at(a, t0), Err(Limited(Duration::from_secs(1))));
        assert_eq!(b.failures(a), 6, "a refused attempt is not counted");
        b.succeeded(a);
        assert!(b.attempt_at(a, t0).is_ok(), "a right answer clears the address");
        assert_eq!(b.failures(a), 1);
    }

    #[test]
    fn backoff_forgets_after_a_quiet_hour() {
        let b = Backoff::new(BackoffConfig::SECRETS);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..6 {
            b.failed_at(a, t0);
        }
        let later = t0 + Duration::from_secs(3601);
        assert!(b.check_at(a, later).is_ok());
        assert_eq!(b.failed_at(a, later), None, "the count started again");
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let b = Backoff::new(BackoffConfig { free: 0, ..BackoffConfig::SECRETS });
        b.failed(ip("2001:db8:1:2::1"));
        assert!(b.check(ip("2001:db8:1:2:ffff::9")).is_err(), "same /64");
        assert!(b.check(ip("2001:db8:1:3::1")).is_ok(), "another /64");
        b.failed(ip("::ffff:192.0.2.7"));
        assert!(b.check(ip("192.0.2.7")).is_err());
    }

    #[test]
    fn the_tables_stay_bounded() {
        let b = Backoff::new(BackoffConfig { free: 0, ..BackoffConfig::SECRETS });
        let r = Rate::new(1, Duration::from_secs(60));
        for i in 0..(MAX_TRACKED as u32 + 10) {
            let a = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            b.failed(a);
            let _ = r.take(a);
        }
        assert!(b.table.lock().len() <= MAX_TRACKED);
        assert!(r.table.lock().len() <= MAX_TRACKED);
    }

    #[test]
    fn rate_refills_over_time() {
        let r = Rate::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..3 {
            assert!(r.take_at(a, t0).is_ok());
        }
        let wait = r.take_at(a, t0).unwrap_err();
        assert!(wait.0 > Duration::from_secs(9) && wait.0 <= Duration::from_secs(10), "{wait:?}");
        assert!(r.take_at(a, t0 + Duration::from_secs(10)).is_ok());
        assert!(r.take_at(a, t0 + Duration::from_secs(10)).is_err());
        assert!(r.take_at(ip("192.0.2.2"), t0).is_ok());
    }

    #[test]
    fn caps_count_per_address_and_in_all_and_release_on_drop() {
        let c = Caps::new(2, 3);
        let a = ip("192.0.2.1");
        let p1 = c.try_acquire(a).unwrap();
        let _p2 = c.try_acquire(a).unwrap();
        assert_eq!(c.try_acquire(a).unwrap_err(), CapRefused::PerAddress(2));
        let _p3 = c.try_acquire(ip("192.0.2.2")).unwrap();
        assert_eq!(c.try_acquire(ip("192.0.2.3")).unwrap_err(), CapRefused::Total(3));
        drop(p1);
        assert_eq!(c.held(a), 1);
        assert!(c.try_acquire(a).is_ok());
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(Limited(Duration::from_millis(1)).retry_after_secs(), 1);
        assert_eq!(Limited(Duration::from_secs(2)).retry_after_secs(), 2);
        assert_eq!(Limited(Duration::from_millis(2500)).retry_after_secs(), 3);
    }
}
