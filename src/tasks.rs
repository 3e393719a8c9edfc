//! The one task lifecycle: every long-running task of every feature is spawned here, on one
//! [`TaskTracker`], and stops on one [`CancellationToken`] tree (a root with one child per shutdown
//! [`Stage`]). `daemon` stops the stages one after another, each within a time limit.
//!
//! Rules (checked by `tests/architecture.rs`: `tokio::spawn`, `JoinSet`, `TaskTracker::new`,
//! `.abort()` and `CancellationToken::new` appear only in this file):
//! - A task that has work to finish (a drain, an upload, a send) is spawned with [`Tasks::spawn`]: it
//!   watches its stage's [`Tasks::token`] and returns when it is done. Shutdown waits for it up to the
//!   stage's limit; one that overruns is logged by name, then dropped at its next `.await`.
//! - A loop with nothing to finish (a timer, a sampler, a poller, a subscriber that only updates memory)
//!   is spawned with [`Tasks::spawn_until_stopped`]: it is dropped at its next `.await` once its stage
//!   stops.
//! - Per-connection tasks (RTMP connections, chat sockets, HTTP connections) are tasks like any other,
//!   in their stage.
//! - Short CPU or blocking work awaited in place (`tokio::task::spawn_blocking(..).await`) is not a
//!   long-running task and does not go through here. OS threads (`std::thread`: the transcode worker's
//!   encoder threads, chat's shards) are owned by the feature that starts them and end when the channels
//!   feeding them close.
//!
//! The task's own future is boxed before it is wrapped (stage token, registry): an async block that
//! captures a future and awaits it can hold it twice, so a large future (a chat socket's, about 3.5 KiB)
//! would cost its size two or three times over per task, unboxed.
//!
//! A task's name is kept while it runs (a small registry) so that a stage that does not stop in time
//! says which tasks it waited for.
//!
//! Scopes: [`Tasks::scope`] gives a part of the daemon (a channel) its own stop tokens, children of the
//! daemon's, on the same tracker and registry: shutdown stops and waits for its tasks like any other,
//! and [`Tasks::close`] stops that scope's alone (a deleted channel), stage by stage.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long [`Tasks::stop`] waits for the tasks it drops after a stage overran its limit.
pub const DROP_GRACE: Duration = Duration::from_millis(200);

/// The shutdown stages, in the order they stop (see `daemon`'s module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// Publishing protocols: the RTMP and SRT listeners and their connections.
    Ingest,
    /// The live stream: transcode supervision, the worker, thumbnails.
    Stream,
    /// Outputs that follow the media feed: object storage uploads, HLS and LL-HLS live windows.
    Outputs,
    /// Outbound delivery: webhooks, go-live notifications, federation.
    Delivery,
    /// Client connections: chat sockets, the web server.
    Connections,
    /// Everything else: timers, samplers, probes, pollers, metrics.
    Background,
}

impl Stage {
    /// Every stage, in drain order.
    pub const ALL: [Stage; 6] =
        [Stage::Ingest, Stage::Stream, Stage::Outputs, Stage::Delivery, Stage::Connections, Stage::Background];

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a [`Task`] has no output.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Dropped: its stage stopped (`spawn_until_stopped`) or it overran its stage's time limit.
    #[error("the task was stopped")]
    Stopped,
    #[error("the task panicked: {0}")]
    Panicked(String),
}

/// A spawned task's output, to await. There is no `abort`: tasks stop through their stage.
pub struct Task<T> {
    handle: JoinHandle<Option<T>>,
}

impl<T> Future for Task<T> {
    type Output = Result<T, TaskError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.handle).poll(cx).map(|r| match r {
            Ok(Some(v)) => Ok(v),
            Ok(None) => Err(TaskError::Stopped),
            Err(e) => Err(TaskError::Panicked(e.to_string())),
        })
    }
}

struct Inner {
    tracker: TaskTracker,
    root: CancellationToken,
    /// Per stage: "out of time", the stragglers are dropped.
    kill: Vec<CancellationToken>,
    /// Running tasks: id → (stage, name).
    running: Mutex<BTreeMap<u64, (Stage, Cow<'static, str>)>>,
    next_id: AtomicU64,
    /// Woken whenever a task ends.
    ended: Notify,
}

/// The daemon's tasks (cheap to clone; every clone is the same set), or a scope of them.
#[derive(Clone)]
pub struct Tasks {
    inner: Arc<Inner>,
    /// Per stage: "stop now" (the daemon's: children of `root`; a scope's: children of its parent's).
    stop: Arc<Vec<CancellationToken>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").field("running", &self.inner.running.lock().len()).finish()
    }
}

/// Removes a task from the registry when it ends (also when it panics or is dropped).
struct Registered {
    inner: Arc<Inner>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.inner.running.lock().remove(&self.id);
        self.inner.ended.notify_waiters();
    }
}

/// `fut` (boxed, see the module doc) until it ends, or `None` once `kill` fires.
fn finish_unless<F: Future>(kill: CancellationToken, fut: F) -> impl Future<Output = Option<F::Output>> {
    let fut = Box::pin(fut);
    async move {
        tokio::select! {
            biased;
            out = fut => Some(out),
            _ = kill.cancelled() => None,
        }
    }
}

/// `fut` (boxed) until it ends, or `None` as soon as `stop` fires.
fn stopped_by<F: Future<Output = ()>>(stop: CancellationToken, fut: F) -> impl Future<Output = Option<()>> {
    let fut = Box::pin(fut);
    async move {
        tokio::select! {
            biased;
            _ = stop.cancelled() => None,
            () = fut => Some(()),
        }
    }
}

/// What [`Tasks::stop`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StageReport {
    /// The tasks that did not finish within the limit (they were dropped).
    pub overran: Vec<String>,
}

impl Tasks {
    pub fn new() -> Self {
        let root = CancellationToken::new();
        let stop = Stage::ALL.iter().map(|_| root.child_token()).collect();
        let kill = Stage::ALL.iter().map(|_| CancellationToken::new()).collect();
        Self {
            stop: Arc::new(stop),
            inner: Arc::new(Inner {
                tracker: TaskTracker::new(),
                root,
                kill,
                running: Mutex::default(),
                next_id: AtomicU64::new(0),
                ended: Notify::new(),
            }),
        }
    }

    /// The token that fires when `stage` stops (for a scope: also when the scope is closed).
    pub fn token(&self, stage: Stage) -> CancellationToken {
        self.stop[stage.index()].clone()
    }

    /// A scope of these tasks: its tasks stop with the daemon's stages, and all of them on
    /// [`Tasks::close`] of the scope.
    pub fn scope(&self) -> Tasks {
        Tasks { inner: self.inner.clone(), stop: Arc::new(self.stop.iter().map(|t| t.child_token()).collect()) }
    }

    /// Stop this scope's tasks, stage by stage in drain order: each stage's token fires, then up to
    /// `limit` per stage for the tasks of the whole daemon in that stage to end (the scope's among them;
    /// it is called for a scope with nothing live, whose loops end at once).
    pub async fn close(&self, limit: Duration) {
        for stage in Stage::ALL {
            self.stop[stage.index()].cancel();
            tokio::task::yield_now().await;
        }
        // The loops end at their next await; give them a moment, but never wait for other scopes' work.
        tokio::time::sleep(limit.min(Duration::from_millis(100))).await;
    }

    /// A new token of the tree (a child of the root) for a feature's own signal, such as "out of
    /// time, hand back what is left"; it fires at the latest when shutdown ends.
    pub fn signal(&self) -> CancellationToken {
        self.inner.root.child_token()
    }

    /// Whether `stage` has been told to stop.
    pub fn is_stopping(&self, stage: Stage) -> bool {
        self.stop[stage.index()].is_cancelled()
    }

    /// Spawn a task that finishes its work by itself: it watches [`Tasks::token`] of its stage and
    /// returns. Dropped (and logged) only when it overruns its stage's time limit at shutdown.
    pub fn spawn<F>(&self, stage: Stage, name: impl Into<Cow<'static, str>>, fut: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let kill = self.inner.kill[stage.index()].clone();
        self.spawn_inner(stage, name.into(), finish_unless(kill, fut))
    }

    /// Spawn a loop with nothing to finish: it is dropped at its next `.await` once `stage` stops.
    pub fn spawn_until_stopped<F>(&self, stage: Stage, name: impl Into<Cow<'static, str>>, fut: F) -> Task<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.token(stage);
        self.spawn_inner(stage, name.into(), stopped_by(stop, fut))
    }

    /// Like [`Tasks::spawn_until_stopped`], and also dropped when the returned token (a child of the
    /// stage's) is cancelled: a timer or a loop that can be called off on its own.
    pub fn spawn_cancellable<F>(&self, stage: Stage, name: impl Into<Cow<'static, str>>, fut: F) -> CancellationToken
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let token = self.token(stage).child_token();
        self.spawn_inner(stage, name.into(), stopped_by(token.clone(), fut));
        token
    }

    fn spawn_inner<F, T>(&self, stage: Stage, name: Cow<'static, str>, fut: F) -> Task<T>
    where
        F: Future<Output = Option<T>> + Send + 'static,
        T: Send + 'static,
    {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner.running.lock().insert(id, (stage, name));
        let registered = Registered { inner: self.inner.clone(), id };
        let handle = self.inner.tracker.spawn(async move {
            let _registered = registered;
            fut.await
        });
        Task { handle }
    }

    /// The names of the running tasks of `stage`.
    pub fn running(&self, stage: Stage) -> Vec<String> {
        self.inner.running.lock().values().filter(|(s, _)| *s == stage).map(|(_, n)| n.to_string()).collect()
    }

    /// Wait until no task of `stage` runs; false when `limit` passed first. Stops nothing.
    pub async fn wait(&self, stage: Stage, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.inner.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.running(stage).is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return self.running(stage).is_empty();
            }
        }
    }

    /// Stop `stage`: fire its token and wait up to `limit` for its tasks; the ones still running then
    /// are logged by name and dropped.
    pub async fn stop(&self, stage: Stage, limit: Duration) -> StageReport {
        self.stop[stage.index()].cancel();
        if self.wait(stage, limit).await {
            tracing::debug!(?stage, "tasks stopped");
            return StageReport::default();
        }
        let overran = self.running(stage);
        tracing::warn!(?stage, tasks = ?overran, "tasks did not stop within {limit:?}; dropping them");
        self.inner.kill[stage.index()].cancel();
        // Dropped at their next await; a task stuck in blocking code is left to the runtime's end.
        let _ = self.wait(stage, DROP_GRACE).await;
        StageReport { overran }
    }

    /// Stop every stage in order, each within its limit (stages not in `plan` get `default`), then
    /// close the tracker.
    pub async fn shutdown(&self, plan: &[(Stage, Duration)], default: Duration) -> Vec<(Stage, StageReport)> {
        let mut reports = Vec::new();
        for stage in Stage::ALL {
            let limit = plan.iter().find(|(s, _)| *s == stage).map_or(default, |(_, l)| *l);
            reports.push((stage, self.stop(stage, limit).await));
        }
        self.inner.root.cancel();
        self.inner.tracker.close();
        reports
    }

    /// Whether shutdown has finished and no task runs.
    pub fn is_idle(&self) -> bool {
        self.inner.tracker.is_closed() && self.inner.running.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A task costs its own future's size and a few words, not a multiple of it (chat spawns one per
    /// connection).
    #[test]
    fn wrapping_a_large_future_adds_only_a_few_words() {
        let large = || async {
            let buf = [7u8; 4096];
            tokio::task::yield_now().await;
            buf.iter().map(|b| u64::from(*b)).sum::<u64>()
        };
        assert!(std::mem::size_of_val(&large()) >= 4096);
        let token = CancellationToken::new();
        assert!(std::mem::size_of_val(&finish_unless(token.clone(), large())) < 256);
        assert!(
            std::mem::size_of_val(&stopped_by(token, async {
                large().await;
            })) < 256
        );
    }

    #[tokio::test]
    async fn stages_stop_in_order_and_finishing_tasks_finish() {
        let tasks = Tasks::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        for stage in [Stage::Background, Stage::Ingest, Stage::Delivery] {
            let (token, order) = (tasks.token(stage), order.clone());
            tasks.spawn(stage, format!("{stage:?}"), async move {
                token.cancelled().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                order.lock().push(stage);
            });
        }
        let looped = Arc::new(AtomicBool::new(false));
        let l = looped.clone();
        tasks.spawn_until_stopped(Stage::Outputs, "timer", async move {
            loop {
                l.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(looped.load(Ordering::SeqCst));
        let reports = tasks.shutdown(&[], Duration::from_secs(5)).await;
        assert!(reports.iter().all(|(_, r)| r.overran.is_empty()), "{reports:?}");
        assert_eq!(*order.lock(), [Stage::Ingest, Stage::Delivery, Stage::Background]);
        assert!(tasks.is_idle());
    }

    #[tokio::test]
    async fn a_task_that_ignores_its_stage_is_reported_and_shutdown_keeps_its_limit() {
        let tasks = Tasks::new();
        let later_stage_stopped = Arc::new(AtomicBool::new(false));
        let handle = tasks.spawn(Stage::Outputs, "stubborn upload", async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            7
        });
        let (token, flag) = (tasks.token(Stage::Delivery), later_stage_stopped.clone());
        tasks.spawn(Stage::Delivery, "delivery", async move {
            token.cancelled().await;
            flag.store(true, Ordering::SeqCst);
        });
        let started = std::time::Instant::now();
        let reports = tasks.shutdown(&[(Stage::Outputs, Duration::from_millis(100))], Duration::from_secs(5)).await;
        assert!(started.elapsed() < Duration::from_secs(2), "shutdown took {:?}", started.elapsed());
        let outputs = &reports.iter().find(|(s, _)| *s == Stage::Outputs).expect("outputs report").1;
        assert_eq!(outputs.overran, ["stubborn upload"]);
        assert!(later_stage_stopped.load(Ordering::SeqCst), "the next stage still stopped");
        assert!(matches!(handle.await, Err(TaskError::Stopped)));
        assert!(tasks.is_idle());
    }

    #[tokio::test]
    async fn a_task_spawned_after_its_stage_stopped_sees_the_token() {
        let tasks = Tasks::new();
        tasks.stop(Stage::Connections, Duration::from_millis(10)).await;
        let token = tasks.token(Stage::Connections);
        let out = tasks.spawn(Stage::Connections, "late", async move { token.is_cancelled() });
        assert!(out.await.expect("finished"));
        let dropped = tasks.spawn_until_stopped(Stage::Connections, "late loop", std::future::pending());
        assert!(matches!(dropped.await, Err(TaskError::Stopped)));
    }
}
