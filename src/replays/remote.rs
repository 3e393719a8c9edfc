//! Object storage for finished replays: with S3 on, a finished replay's files (segments and init
//! segments) are uploaded under the channel's folder, `<pathPrefix>/replays/<streamId>/<variant>/` for
//! the default channel and `<pathPrefix>/c/<slug>/replays/<streamId>/<variant>/` for any other (replay
//! ids are a channel's own database's, so two channels may have the same: `storage::Target::channel_key`
//! keeps them apart), its playlists then name the bucket (or the `videoServingEndpoint`), and the
//! local copies go. Deleting a replay deletes its objects (Owncast leaves them behind). A failed upload leaves the replay local (logged); nothing is
//! deleted locally before every file is in the bucket.
//!
//! A channel whose visibility needs a viewing pass (password, token) uploads no replay: public bucket
//! URLs carry no pass, so its replays stay local and are served by castd behind the gate. Replays
//! uploaded while the channel was public stay in the bucket; while the channel is gated (a pass, or
//! the admission hook on play) their playlists name castd's own URLs and castd reads the files from
//! the bucket behind the gate (`serve`), so the channel's privacy holds for them too.

use std::sync::Arc;

use axum::body::Bytes;
use tracing::{info, warn};

use super::db::{self, ReplayRow};
use super::serve::content_type;
use super::Replays;
use crate::storage::client::PutMeta;
use crate::storage::uploader::REPLAYS_FOLDER;

const CACHE: &str = "public, max-age=31536000, immutable";

/// Upload a finished replay and switch its playlists to the bucket.
pub async fn upload(r: &Arc<Replays>, id: &str) {
    let Some(target) = r.storage.bucket() else { return };
    if r.settings.get().access.visibility.needs_pass() {
        info!(replay = %id, "replay kept local: the channel needs a viewing pass (bucket URLs carry none)");
        return;
    }
    let rid = id.to_string();
    let files = r
        .store
        .call(move |c| {
            let mut out = Vec::new();
            for v in db::variants(c, &rid)? {
                for s in db::segments(c, &rid, v)? {
                    out.push((v, s.file));
                    if let Some(init) = s.init {
                        if !out.contains(&(v, init.clone())) {
                            out.push((v, init));
                        }
                    }
                }
            }
            Ok(out)
        })
        .await;
    let files = match files {
        Ok(f) if !f.is_empty() => f,
        Ok(_) => return,
        Err(e) => {
            warn!(replay = %id, "replay upload: {e}");
            return;
        }
    };
    for (v, file) in &files {
        let path = r.variant_dir(id, *v as usize).join(file);
        let bytes = match tokio::fs::read(&path).await {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                warn!(replay = %id, "replay upload: cannot read {}: {e}", path.display());
                return;
            }
        };
        let key = target.channel_key(&r.channel, &format!("{REPLAYS_FOLDER}{id}/{v}/{file}"));
        let meta = PutMeta { content_type: content_type(file), cache_control: CACHE };
        let mut tries = 0;
        loop {
            tries += 1;
            match target.client().put(&key, bytes.clone(), &meta).await {
                Ok(()) => break,
                Err(e) if tries < 4 && e.retryable() => {
                    tokio::time::sleep(std::time::Duration::from_millis(250 * (1 << tries))).await;
                }
                Err(e) => {
                    warn!(replay = %id, "replay upload failed, the replay stays local: {e}");
                    return;
                }
            }
        }
    }
    let base = target.public_url(&target.channel_key(&r.channel, &format!("{REPLAYS_FOLDER}{id}/")));
    let (store, rid, b) = (r.store.clone(), id.to_string(), base.clone());
    if let Err(e) = store.call(move |c| db::set_remote_base(c, &rid, Some(&b))).await {
        warn!(replay = %id, "replay upload: {e}");
        return;
    }
    for (v, file) in &files {
        let _ = tokio::fs::remove_file(r.variant_dir(id, *v as usize).join(file)).await;
    }
    info!(replay = %id, objects = files.len(), "replay moved to object storage at {base}");
}

/// Delete a replay's objects (every key under its folder, in its channel's).
pub async fn remove(r: &Replays, row: &ReplayRow) {
    if row.remote_base.is_none() {
        return;
    }
    let Some(target) = r.storage.bucket() else {
        warn!(replay = %row.id, "the replay's objects stay in the bucket: object storage is off now");
        return;
    };
    let under = target.channel_key(&r.channel, &format!("{REPLAYS_FOLDER}{}/", row.id));
    let result = async {
        let keys = target.client().list(&under).await?;
        if keys.is_empty() {
            return Ok(0);
        }
        target.client().delete_batch(&keys).await
    }
    .await;
    match result {
        Ok(n) => info!(replay = %row.id, "deleted {n} objects under {under}"),
        Err(e) => warn!(replay = %row.id, "cannot delete the objects under {under}: {e}"),
    }
}
