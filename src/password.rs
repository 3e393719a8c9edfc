//! Admin password hashing (bcrypt, as Owncast stores it), random secrets, comparing secrets in constant time,
//! and the `sha256=` HMAC signature castd puts on the requests it sends with a shared secret (webhooks, the
//! admission hook).
//!
//! The slow hash never runs on tokio's blocking pool (which every SQLite call shares): [`verify_pooled`]
//! and [`hash_pooled`] hand it to the hash's own small pool of threads ([`POOL_THREADS`], at most half the
//! cores) with a bounded queue ([`POOL_QUEUE`]); when the queue is full the caller is told [`Busy`] at
//! once, so a flood of wrong passwords costs the flood its answers, not everyone else theirs.
//!
//! New hashes are bcrypt (`$2a$`, cost [`BCRYPT_COST`]), the format Owncast keeps and tools check
//! with `bcrypt.compare`. Databases from earlier castd versions hold argon2id PHC strings: `verify`
//! still accepts those, and `needs_rehash` tells the caller to replace them with bcrypt after the
//! next successful check. bcrypt uses at most 72 bytes of a password; longer ones are refused
//! (`hash` fails, `verify` is false) instead of being silently cut, as Go's bcrypt does (a password
//! of exactly 72 bytes hashes as Go's does, without the C implementations' trailing NUL).

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use argon2::Argon2;
use rand::distributions::Alphanumeric;
use rand::Rng;

/// bcrypt cost of new hashes (2^10 rounds: a few tens of milliseconds optimised).
pub const BCRYPT_COST: u32 = 10;
/// The longest password bcrypt takes, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 72;
/// Passwords shorter than this (in characters) are reported as weak.
pub const MIN_STRONG_CHARS: usize = 8;
/// Owncast's well-known default admin password and stream key.
pub const OWNCAST_DEFAULT: &str = "abc123";

/// Threads of the slow hash's pool at most (fewer on a small machine: half its cores, at least one).
pub const POOL_THREADS: usize = 2;
/// Hashes waiting for a thread at most; beyond that a caller gets [`Busy`].
pub const POOL_QUEUE: usize = 16;

/// The slow hash's pool is full: try again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the server is busy checking passwords; try again shortly")]
pub struct Busy;

type Job = Box<dyn FnOnce() + Send>;

/// The pool's queue (threads start on first use).
fn pool() -> &'static std::sync::mpsc::SyncSender<Job> {
    static POOL: std::sync::OnceLock<std::sync::mpsc::SyncSender<Job>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(POOL_QUEUE);
        let rx = std::sync::Arc::new(parking_lot::Mutex::new(rx));
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        for i in 0..(cores / 2).clamp(1, POOL_THREADS) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("castd-hash-{i}")).spawn(move || loop {
                let job = rx.lock().recv();
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            });
            if let Err(e) = spawned {
                tracing::error!("could not start a password-hash thread: {e}");
            }
        }
        tx
    })
}

/// Run `f` on the hash pool; `Busy` when its queue is full.
async fn on_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Busy> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    pool().try_send(job).map_err(|_| Busy)?;
    rx.await.map_err(|_| Busy)
}

/// [`verify`] on the hash's own pool.
pub async fn verify_pooled(password: &str, stored: &str) -> Result<bool, Busy> {
    let (p, h) = (password.to_string(), stored.to_string());
    on_pool(move || verify(&p, &h)).await
}

/// [`hash`] on the hash's own pool.
pub async fn hash_pooled(password: &str) -> Result<Result<String, HashError>, Busy> {
    let p = password.to_string();
    on_pool(move || hash(&p)).await
}

/// Errors from hashing.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("the password is longer than {MAX_PASSWORD_BYTES} bytes, the most bcrypt uses")]
    TooLong,
    #[error("password hashing failed: {0}")]
    Failed(String),
}

/// Hash a password with bcrypt (`$2a$10$...`).
pub fn hash(password: &str) -> Result<String, HashError> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(HashError::TooLong);
    }
    // Within 72 bytes, the crate's "truncation" only drops the trailing NUL of a 72-byte password.
    bcrypt::hash_with_result(password, BCRYPT_COST)
        .map(|parts| parts.format_for_version(bcrypt::Version::TwoA))
        .map_err(|e| HashError::Failed(e.to_string()))
}

/// Whether `password` matches `stored`: a bcrypt hash, or an argon2 PHC string from an earlier
/// version (false for anything malformed).
pub fn verify(password: &str, stored: &str) -> bool {
    if is_bcrypt(stored) {
        return password.len() <= MAX_PASSWORD_BYTES && bcrypt::verify(password, stored).unwrap_or(false);
    }
    PasswordHash::new(stored).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// Whether a stored hash should be replaced by a bcrypt hash once the password is known.
pub fn needs_rehash(stored: &str) -> bool {
    !is_bcrypt(stored)
}

fn is_bcrypt(stored: &str) -> bool {
    ["$2a$", "$2b$", "$2x$", "$2y$"].iter().any(|p| stored.starts_with(p))
}

/// Whether a password (or stream key) is weak: shorter than [`MIN_STRONG_CHARS`] or Owncast's
/// well-known default.
pub fn is_weak(secret: &str) -> bool {
    secret.chars().count() < MIN_STRONG_CHARS || secret == OWNCAST_DEFAULT
}

/// Whether `given` equals `want`, in time that depends only on the lengths (for secrets a client sends).
pub fn same_secret(given: &[u8], want: &[u8]) -> bool {
    given.len() == want.len() && given.iter().zip(want).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// `sha256=<hex HMAC-SHA256 of body keyed with secret>`: the `X-Castd-Signature` of a webhook delivery
/// and of an admission hook request.
pub fn request_signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A random alphanumeric string of `len` characters from the OS-seeded thread RNG.
pub fn random_token(len: usize) -> String {
    rand::thread_rng().sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::rand_core::OsRng;
    use argon2::password_hash::{PasswordHasher, SaltString};

    #[test]
    fn same_secret_needs_the_same_bytes_and_length() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"), "a prefix is not the secret");
        assert!(!same_secret(b"", b"abc"));
    }

    #[tokio::test]
    async fn the_pool_verifies_and_says_busy_when_its_queue_is_full() {
        let h = hash("correct horse").unwrap();
        assert_eq!(verify_pooled("correct horse", &h).await, Ok(true));
        assert_eq!(verify_pooled("wrong", &h).await, Ok(false));
        assert!(hash_pooled("x").await.unwrap().is_ok());
        let many: Vec<_> = (0..POOL_QUEUE * 4).map(|_| verify_pooled("wrong", &h)).collect();
        let results = futures_util::future::join_all(many).await;
        assert!(results.contains(&Err(Busy)), "a full queue refuses at once");
        assert!(results.contains(&Ok(false)));
        assert_eq!(verify_pooled("correct horse", &h).await, Ok(true), "the pool still works afterwards");
    }

    #[test]
    fn hash_and_verify() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$2a$10$"), "{h}");
        assert!(verify("correct horse", &h));
        assert!(!verify("wrong", &h));
        assert!(!verify("x", "not a hash"));
        assert!(!needs_rehash(&h));
        assert_eq!(random_token(24).len(), 24);
        assert_ne!(random_token(24), random_token(24));
    }

    #[test]
    fn argon2_hashes_of_earlier_versions_still_verify() {
        let salt = SaltString::generate(&mut OsRng);
        let old = Argon2::default().hash_password(b"old password", &salt).unwrap().to_string();
        assert!(verify("old password", &old));
        assert!(!verify("other", &old));
        assert!(needs_rehash(&old));
    }

    #[test]
    fn long_passwords_are_refused_not_cut() {
        let long = "x".repeat(73);
        assert!(matches!(hash(&long), Err(HashError::TooLong)));
        let h = hash(&"x".repeat(72)).unwrap();
        assert!(verify(&"x".repeat(72), &h));
        assert!(!verify(&long, &h));
    }

    #[test]
    fn weak_secrets() {
        assert!(is_weak("abc123"));
        assert!(is_weak("1234567"));
        assert!(!is_weak("12345678"));
    }

    #[test]
    fn request_signature_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
        assert_eq!(
            super::request_signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
