//! Child processes that cannot outlive the test: each one is started in its own process group, with
//! its output in a file, and killed (the whole group, by its id) when its `Proc` is dropped, also when
//! a test panics. As a second line, the kernel sends it SIGKILL when the test thread that started it
//! ends (`PR_SET_PDEATHSIG`), so not even a test killed mid-way leaves an OBS or an Xvfb behind.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running child process and its process group.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    /// Where its stdout and stderr go (None when the caller took stdout as a pipe).
    pub output: Option<PathBuf>,
}

/// Fails with a clear message when `program` is not installed.
pub fn require(program: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false);
    assert!(found, "`{program}` is not installed (Debian package {package}): run ./packaging/deps.sh");
}

fn prepare(cmd: &mut Command) {
    cmd.stdin(Stdio::null()).process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl Proc {
    /// Start `cmd`, its stdout and stderr going to `<dir>/<name>.log`.
    pub fn spawn(name: &str, mut cmd: Command, dir: &Path) -> Proc {
        let path = dir.join(format!("{name}.log"));
        let out = File::create(&path).expect("output file");
        cmd.stdout(out.try_clone().unwrap()).stderr(out);
        prepare(&mut cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("could not start {name} ({:?}): {e}", cmd.get_program()));
        Proc { name: name.to_string(), child: Some(child), output: Some(path) }
    }

    /// Start `cmd` with stdout as a pipe (taken with `stdout()`), stderr going to `<dir>/<name>.log`.
    pub fn spawn_piped(name: &str, mut cmd: Command, dir: &Path) -> Proc {
        let path = dir.join(format!("{name}.log"));
        cmd.stdout(Stdio::piped()).stderr(File::create(&path).expect("output file"));
        prepare(&mut cmd);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("could not start {name} ({:?}): {e}", cmd.get_program()));
        Proc { name: name.to_string(), child: Some(child), output: Some(path) }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn stdout(&mut self) -> std::process::ChildStdout {
        self.child.as_mut().and_then(|c| c.stdout.take()).expect("piped stdout")
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// What it printed so far.
    pub fn output_text(&self) -> String {
        self.output.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default()
    }

    /// Send `signal` to the process only (not its group).
    pub fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as libc::pid_t, signal) };
        }
    }

    /// Wait at most `timeout` for it to exit by itself.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM to the process, then (after `grace`) the group as `kill_group` does; reaps it.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.child.as_ref()?;
        self.signal(libc::SIGTERM);
        let status = self.wait_timeout(grace);
        self.kill_group();
        status
    }

    /// SIGTERM to the whole process group (the child's pid is its group id), so that Xvfb, say, can
    /// remove its lock file; SIGKILL to the group after 2 s; then reap the child.
    pub fn kill_group(&mut self) {
        if let Some(mut c) = self.child.take() {
            let group = -(c.id() as libc::pid_t);
            // SAFETY: kill(2) on the process group we created for this child.
            unsafe { libc::kill(group, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            // SAFETY: as above; the group's other members, if any, go too.
            unsafe { libc::kill(group, libc::SIGKILL) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Run a short command to completion; its status and combined output.
pub fn run(cmd: &mut Command) -> (ExitStatus, String) {
    let out =
        cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("could not run {:?}: {e}", cmd.get_program()));
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status, text)
}

/// Poll `f` every 100 ms until it returns Some or `timeout` passes.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
