//! The server's RSA key pair (2048 bits): generated once, the first time federation needs it, and
//! kept in the `federation_keys` table as PKCS#8 PEM. The actor document publishes the public half;
//! every outbound request is signed with the private half.

use std::sync::Arc;

use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::{RsaPrivateKey, RsaPublicKey};
use tokio::sync::OnceCell;

use super::FedError;
use crate::store::Store;

/// Size of the generated key.
pub const KEY_BITS: usize = 2048;

/// The loaded key pair.
pub struct KeyPair {
    pub private: RsaPrivateKey,
    pub public_pem: String,
}

/// Loads or creates the key pair on first use.
pub struct Keys {
    store: Store,
    cell: OnceCell<Arc<KeyPair>>,
}

impl Keys {
    pub fn new(store: Store) -> Self {
        Self { store, cell: OnceCell::new() }
    }

    /// The key pair (generated and saved the first time; generation runs off the async threads).
    pub async fn get(&self) -> Result<Arc<KeyPair>, FedError> {
        self.cell.get_or_try_init(|| self.load_or_create()).await.cloned()
    }

    async fn load_or_create(&self) -> Result<Arc<KeyPair>, FedError> {
        let stored: Option<String> = self
            .store
            .call(|c| {
                use rusqlite::OptionalExtension;
                Ok(c.query_row("SELECT value FROM federation_keys WHERE name = 'rsa'", [], |r| r.get(0)).optional()?)
            })
            .await?;
        let private = match stored {
            Some(pem) => RsaPrivateKey::from_pkcs8_pem(&pem).map_err(|e| FedError::Key(e.to_string()))?,
            None => {
                let key = tokio::task::spawn_blocking(|| RsaPrivateKey::new(&mut rand::thread_rng(), KEY_BITS))
                    .await
                    .map_err(|e| FedError::Key(e.to_string()))?
                    .map_err(|e| FedError::Key(e.to_string()))?;
                let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| FedError::Key(e.to_string()))?.to_string();
                // Another task may have raced us; the first saved key wins.
                let saved: String = self
                    .store
                    .call(move |c| {
                        c.execute("INSERT OR IGNORE INTO federation_keys (name, value) VALUES ('rsa', ?1)", [&pem])?;
                        Ok(c.query_row("SELECT value FROM federation_keys WHERE name = 'rsa'", [], |r| r.get(0))?)
                    })
                    .await?;
                RsaPrivateKey::from_pkcs8_pem(&saved).map_err(|e| FedError::Key(e.to_string()))?
            }
        };
        let public_pem =
            RsaPublicKey::from(&private).to_public_key_pem(LineEnding::LF).map_err(|e| FedError::Key(e.to_string()))?;
        Ok(Arc::new(KeyPair { private, public_pem }))
    }
}
