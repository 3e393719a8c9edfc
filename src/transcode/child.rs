//! castd's own executable, which the transcoder re-executes for its child processes (`castd worker`,
//! `castd thumbnail`).

use std::path::{Path, PathBuf};

/// castd's own executable (`/proc/self/exe` still runs this very binary after a package upgrade
/// replaced the file).
pub fn own_exe() -> std::io::Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        Ok(proc_exe.to_path_buf())
    } else {
        std::env::current_exe()
    }
}
