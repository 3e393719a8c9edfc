//! The keyed prefix of a viewer password: the first 16 bits of HMAC-SHA256(key, password), stored with
//! the password's bcrypt hash so an unlock bcrypt-verifies only the rows whose prefix is the given
//! password's (usually one, a false candidate at most once in 65536 per row) instead of every row.
//!
//! The key never enters the database: it is a file in the channel's data folder
//! ([`KEY_FILE`], mode 0600, made on first use; a new channel or a re-created slug starts a new folder,
//! so a new key). A copy of the database alone therefore gives no faster way to test guesses than
//! bcrypt. The database keeps a fingerprint of the key the prefixes were made with: when the key file
//! is lost or replaced, every stored prefix is dropped (`db::adopt_prefix_key`) and the rows are
//! treated as rows from before prefixes existed (verified on every unlock, their prefix written back
//! after the next right password), so a changed key never locks anyone out.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The key's file in the channel's data folder.
pub const KEY_FILE: &str = "viewer-passwords.key";

/// Errors reading or making the key file.
#[derive(Debug, thiserror::Error)]
pub enum PrefixKeyError {
    #[error("viewer password key {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// The secret behind the prefixes of one channel's viewer passwords.
pub struct PrefixKey([u8; 32]);

impl std::fmt::Debug for PrefixKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrefixKey(..)")
    }
}

impl PrefixKey {
    /// A key that lives as long as the process (a folder that cannot be written: every restart then
    /// drops the prefixes, which costs speed, not access).
    pub fn ephemeral() -> PrefixKey {
        PrefixKey(rand::random())
    }

    /// A key of the caller's choosing (tests: deterministic prefixes).
    #[cfg(test)]
    pub fn fixed(key: [u8; 32]) -> PrefixKey {
        PrefixKey(key)
    }

    /// The key in `dir`'s [`KEY_FILE`], made (32 random bytes as hex, mode 0600) when there is none or
    /// what is there is not a key.
    pub fn load_or_create(dir: &Path) -> Result<PrefixKey, PrefixKeyError> {
        let path = dir.join(KEY_FILE);
        let io = |source| PrefixKeyError::Io { path: path.clone(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Some(key) = parse(&text) {
                    // Owner only, whatever it was made with.
                    let meta = std::fs::metadata(&path).map_err(io)?;
                    if meta.permissions().mode() & 0o077 != 0 {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
                    }
                    return Ok(key);
                }
                tracing::warn!("{} does not hold a key: a new one is made", path.display());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let key = PrefixKey::ephemeral();
        // Written aside and renamed: a crash leaves the old file or the whole new one.
        let tmp = dir.join(format!(".{KEY_FILE}.{}", crate::password::random_token(8)));
        let written = (|| {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            f.write_all(format!("{}\n", hex::encode(key.0)).as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(e));
        }
        Ok(key)
    }

    /// The prefix of `password`: the first 16 bits of HMAC-SHA256(key, password).
    pub fn prefix(&self, password: &str) -> u16 {
        // HMAC takes a key of any length: this cannot fail.
        let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&self.0) else { return 0 };
        mac.update(password.as_bytes());
        let out = mac.finalize().into_bytes();
        u16::from_be_bytes([out[0], out[1]])
    }

    /// What the database keeps to know which key its prefixes were made with (a digest of the key,
    /// which tells nothing about it).
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut d = Sha256::new();
        d.update(b"castd viewer password prefix key\0");
        d.update(self.0);
        d.finalize()[..16].to_vec()
    }
}

fn parse(text: &str) -> Option<PrefixKey> {
    let bytes = hex::decode(text.trim()).ok()?;
    Some(PrefixKey(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_once_owner_only_and_a_bad_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let a = PrefixKey::load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let b = PrefixKey::load_or_create(dir.path()).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.prefix("open sesame"), b.prefix("open sesame"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        PrefixKey::load_or_create(dir.path()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "tightened");
        std::fs::write(&path, "not a key").unwrap();
        let c = PrefixKey::load_or_create(dir.path()).unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint());
        let other = tempfile::tempdir().unwrap();
        assert_ne!(PrefixKey::load_or_create(other.path()).unwrap().fingerprint(), a.fingerprint(), "a key per folder");
        assert!(format!("{a:?}").contains(".."), "the key is not shown");
    }

    fn check(store: &crate::store::Store, key: &PrefixKey, password: &str) -> super::super::Checked {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(super::super::check_password(store, key, password)).unwrap().unwrap()
    }

    #[test]
    fn a_wrong_password_costs_at_most_one_bcrypt_and_rows_without_a_prefix_converge() {
        use super::super::db;
        let store = crate::store::Store::open_in_memory().unwrap();
        store.migrate("access", db::MIGRATIONS).unwrap();
        let key = PrefixKey::fixed([7; 32]);
        let passwords: Vec<String> = (0..20).map(|i| format!("viewer password {i}")).collect();
        let mut ids = Vec::new();
        store
            .with(|c| {
                assert!(!db::adopt_prefix_key(c, &key.fingerprint())?);
                for p in &passwords {
                    let hash = crate::password::hash(p).unwrap();
                    ids.push(db::add_password(c, &hash, key.prefix(p), "", 1)?);
                }
                Ok(())
            })
            .unwrap();
        let mut prefixes: Vec<u16> = passwords.iter().map(|p| key.prefix(p)).collect();
        prefixes.sort();
        prefixes.dedup();
        assert_eq!(prefixes.len(), 20, "the fixed key gives 20 different prefixes");
        // Wrong passwords: one verify at most (none unless a prefix happens to match).
        let mut verified = 0;
        for i in 0..40 {
            let got = check(&store, &key, &format!("a wrong guess {i}"));
            assert_eq!(got.id, None);
            assert!(got.verified <= 1, "{got:?}");
            verified += got.verified;
        }
        assert!(verified <= 2, "{verified} verifies for 40 wrong passwords");
        // Each right one unlocks its own row with one verify.
        for (p, id) in passwords.iter().zip(&ids) {
            assert_eq!(check(&store, &key, p), super::super::Checked { id: Some(*id), verified: 1 }, "{p}");
        }

        // Rows from before prefixes: verified on every unlock until their password is given, then
        // their prefix is written.
        store
            .with(|c| {
                c.execute(
                    "UPDATE viewer_passwords SET prefix = NULL WHERE id IN (?1, ?2, ?3)",
                    [ids[3], ids[9], ids[17]],
                )?;
                Ok(())
            })
            .unwrap();
        let got = check(&store, &key, "a wrong guess 0");
        assert_eq!((got.id, got.verified), (None, 3), "the three legacy rows");
        let got = check(&store, &key, &passwords[9]);
        assert_eq!(got.id, Some(ids[9]));
        let row = |id: i64| store.with(|c| Ok(db::passwords(c)?.into_iter().find(|r| r.id == id))).unwrap().unwrap();
        assert_eq!(row(ids[9]).prefix, Some(key.prefix(&passwords[9])), "backfilled");
        assert_eq!(row(ids[3]).prefix, None);
        assert_eq!(check(&store, &key, "a wrong guess 0").verified, 2);
        assert_eq!(check(&store, &key, &passwords[3]).id, Some(ids[3]));
        assert_eq!(check(&store, &key, &passwords[17]).id, Some(ids[17]));
        assert_eq!(check(&store, &key, "a wrong guess 0").verified, 0, "converged");

        // A lost or replaced key file: the prefixes are dropped, every password still unlocks.
        let other = PrefixKey::fixed([9; 32]);
        assert!(store.with(|c| db::adopt_prefix_key(c, &other.fingerprint())).unwrap());
        assert!(!store.with(|c| db::adopt_prefix_key(c, &other.fingerprint())).unwrap(), "once");
        assert_eq!(check(&store, &other, &passwords[0]).id, Some(ids[0]));
        assert_eq!(row(ids[0]).prefix, Some(other.prefix(&passwords[0])));
        assert_eq!(check(&store, &other, &passwords[19]).id, Some(ids[19]));
    }
}
