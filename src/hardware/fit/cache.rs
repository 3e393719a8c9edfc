//! The measurements of this box, kept in `<data-dir>/ladder-fit.json` so each is made once.
//!
//! The file holds one box's figures: its fingerprint ([`BoxId`]: CPU model, logical cores, castd's
//! version) and, per rung key (`verdict::Rung::key`: encoder, preset, size, frame rate), the measured
//! cost, plus the decode's. A file of another box (the data dir moved, the CPU or core count changed,
//! castd upgraded) or one that cannot be read is as good as none: everything is measured again, and the
//! file is rewritten for this box. At most `MAX_RUNGS` rungs are kept: the one used longest ago goes
//! first (a rung's last use is kept to the hour, `used`, so a ladder asked for now and then stays while
//! rungs tried once go; a channel cannot grow the file for good). The file is
//! written whole to a temporary name and renamed, so a crash leaves the old file or the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::verdict::Cost;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "ladder-fit.json";
/// The most rungs kept.
pub const MAX_RUNGS: usize = 64;
/// A rung's last use is written again once it is older than this (not on every answer).
const USE_RESOLUTION: chrono::Duration = chrono::Duration::hours(1);

/// What makes a box's figures its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BoxId {
    pub cpu_model: String,
    pub cores: usize,
    pub version: String,
}

impl BoxId {
    /// This box: `/proc/cpuinfo`'s model name, the logical cores this process may use, castd's version.
    pub fn here() -> BoxId {
        BoxId {
            cpu_model: cpu_model(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            version: crate::VERSION.to_string(),
        }
    }
}

/// The CPU's model from `/proc/cpuinfo` (`model name` on x86, `Model`/`CPU part` elsewhere).
pub fn cpu_model(cpuinfo: &str) -> String {
    for field in ["model name", "Model", "cpu model", "uarch", "CPU part"] {
        let found = cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == field && !v.trim().is_empty()).then(|| v.trim().to_string())
        });
        if let Some(model) = found {
            return model;
        }
    }
    "unknown CPU".into()
}

/// One box's measurements (the file's contents).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cache {
    #[serde(rename = "box")]
    pub id: BoxId,
    #[serde(default)]
    pub rungs: BTreeMap<String, Cost>,
    #[serde(default)]
    pub decode: Option<Cost>,
    /// When each rung was last used for an answer (to the hour; its measurement time if absent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub used: BTreeMap<String, chrono::DateTime<chrono::Utc>>,
}

impl Cache {
    /// An empty cache of box `id`.
    pub fn new(id: BoxId) -> Cache {
        Cache { id, rungs: BTreeMap::new(), decode: None, used: BTreeMap::new() }
    }

    /// The cache file of `data_dir`.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE_NAME)
    }

    /// The figures in `path` if they are box `id`'s, else an empty cache of `id`.
    pub fn load(path: &Path, id: &BoxId) -> Cache {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Cache>(&bytes).ok())
            .filter(|c| c.id == *id)
            .unwrap_or_else(|| Cache::new(id.clone()))
    }

    /// A rung's cost, if measured on this box.
    pub fn rung(&self, key: &str) -> Option<Cost> {
        self.rungs.get(key).copied()
    }

    /// When a rung was last used (its measurement time if never since).
    fn last_use(&self, key: &str, cost: &Cost) -> chrono::DateTime<chrono::Utc> {
        self.used.get(key).copied().unwrap_or(cost.measured_at).max(cost.measured_at)
    }

    /// A cached rung was used for an answer at `now`; true when that is news worth writing (its last
    /// use was more than an hour before).
    pub fn touch(&mut self, key: &str, now: chrono::DateTime<chrono::Utc>) -> bool {
        let Some(cost) = self.rungs.get(key).copied() else { return false };
        if now - self.last_use(key, &cost) < USE_RESOLUTION {
            return false;
        }
        self.used.insert(key.to_string(), now);
        true
    }

    /// Keep a rung's cost (the least recently used go once more than `MAX_RUNGS` are kept).
    pub fn insert(&mut self, key: String, cost: Cost) {
        self.used.remove(&key);
        self.rungs.insert(key, cost);
        while self.rungs.len() > MAX_RUNGS {
            let Some(oldest) = self.rungs.iter().min_by_key(|(k, c)| self.last_use(k, c)).map(|(k, _)| k.clone())
            else {
                break;
            };
            self.rungs.remove(&oldest);
            self.used.remove(&oldest);
        }
    }

    /// Write the cache to `path` (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn id(model: &str, cores: usize) -> BoxId {
        BoxId { cpu_model: model.into(), cores, version: "1.0.0".into() }
    }

    fn cost(cpu: f64) -> Cost {
        Cost { cpu_per_frame: cpu, wall_per_frame: cpu, frames: 10, measured_at: Utc::now() }
    }

    #[test]
    fn a_box_reads_its_own_figures_and_no_other_boxs() {
        let dir = tempfile::tempdir().unwrap();
        let path = Cache::path(dir.path());
        let here = id("AMD EPYC 7B13", 2);
        assert_eq!(Cache::load(&path, &here), Cache::new(here.clone()), "no file: nothing cached");
        let mut c = Cache::new(here.clone());
        c.insert("libx264|veryfast|1280x720@30".into(), cost(0.01));
        c.decode = Some(cost(0.002));
        c.save(&path).unwrap();
        let back = Cache::load(&path, &here);
        assert_eq!(back.rung("libx264|veryfast|1280x720@30"), c.rung("libx264|veryfast|1280x720@30"));
        assert_eq!(back.rung("libx264|veryfast|1280x720@60"), None);
        assert_eq!(back.decode, c.decode);
        for other in [id("Intel Xeon", 2), id("AMD EPYC 7B13", 4), BoxId { version: "1.0.1".into(), ..here.clone() }] {
            let theirs = Cache::load(&path, &other);
            assert!(theirs.rungs.is_empty() && theirs.decode.is_none(), "{other:?} measures again");
            assert_eq!(theirs.id, other);
        }
        std::fs::write(&path, b"not json").unwrap();
        assert_eq!(Cache::load(&path, &here), Cache::new(here), "an unreadable file is no cache");
    }

    #[test]
    fn the_oldest_rungs_go_first() {
        let mut c = Cache::new(id("cpu", 1));
        let t0 = Utc::now();
        for i in 0..MAX_RUNGS + 3 {
            let at = t0 + chrono::Duration::seconds(i as i64);
            c.insert(format!("k{i}"), Cost { measured_at: at, ..cost(0.1) });
        }
        assert_eq!(c.rungs.len(), MAX_RUNGS);
        assert!(c.rung("k0").is_none() && c.rung("k2").is_none() && c.rung("k3").is_some());
        // A rung used lately stays while newer ones tried once go.
        let later = t0 + chrono::Duration::hours(2);
        assert!(c.touch("k3", later), "used two hours after it was measured: worth writing");
        assert!(!c.touch("k3", later + chrono::Duration::minutes(5)), "used again within the hour");
        let n = MAX_RUNGS + 3;
        c.insert(format!("k{n}"), Cost { measured_at: t0 + chrono::Duration::seconds(n as i64), ..cost(0.1) });
        assert!(c.rung("k3").is_some() && c.rung("k4").is_none(), "the least recently used went");
        assert_eq!(c.rungs.len(), MAX_RUNGS);
    }

    #[test]
    fn the_cpu_model_from_cpuinfo() {
        assert_eq!(
            cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"),
            "AMD EPYC 7B13 64-Core Processor"
        );
        assert_eq!(cpu_model("processor : 0\nCPU part : 0xd0c\n"), "0xd0c");
        assert_eq!(cpu_model(""), "unknown CPU");
        assert!(!BoxId::here().cpu_model.is_empty() && BoxId::here().cores >= 1);
    }
}
