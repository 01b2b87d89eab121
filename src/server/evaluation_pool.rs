//! The threads that decide requests off the async workers. Like tokio's blocking pool, it
//! starts a thread when none is idle and lets one go after a while idle; unlike it, the
//! thread idle for the shortest time takes the next request (last in, first out). Under a
//! steady load the same few threads do the work and the rest stay idle until they exit: each
//! thread keeps allocator pages for what it decoded, so work spread over every thread of a
//! large pool (tokio wakes an arbitrary idle one) would hold those pages many times over.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// How long a thread waits idle for work before it exits.
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// Threads for evaluations, started on demand; the most recently idle one runs the next job.
#[derive(Default)]
pub struct EvaluationPool {
    idle: Mutex<Vec<Arc<IdleThread>>>,
}

/// A thread waiting for a job, handed to it through `job`.
#[derive(Default)]
struct IdleThread {
    job: Mutex<Option<Job>>,
    handed: Condvar,
}

impl EvaluationPool {
    /// Runs `work` on one of the pool's threads, in the runtime of the caller (so it may
    /// `block_on` the runtime's futures); `None` when it panicked or its thread could not
    /// start.
    pub async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (done, answer) = oneshot::channel();
        let runtime = Handle::try_current().ok();
        let job: Job = Box::new(move || {
            let _entered = runtime.as_ref().map(Handle::enter);
            if let Ok(value) = std::panic::catch_unwind(AssertUnwindSafe(work)) {
                let _ = done.send(value);
            }
        });
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(thread) => {
                *thread.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(job);
                thread.handed.notify_one();
            }
            None => {
                let pool = Arc::clone(self);
                let started = std::thread::Builder::new()
                    .name("portcullis-eval".into())
                    .spawn(move || pool.work(job));
                if let Err(error) = started {
                    tracing::error!(%error, "could not start an evaluation thread");
                    return None;
                }
            }
        }
        answer.await.ok()
    }

    /// A thread's life: its first job, then each job handed to it while it waits idle, until
    /// it has waited [`IDLE_TIMEOUT`] for one.
    fn work(&self, first: Job) {
        first();
        let me = Arc::new(IdleThread::default());
        loop {
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::clone(&me));
            let slot = me.job.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut slot, _) = me
                .handed
                .wait_timeout_while(slot, IDLE_TIMEOUT, |job| job.is_none())
                .unwrap_or_else(PoisonError::into_inner);
            let job = match slot.take() {
                Some(job) => job,
                None => {
                    drop(slot);
                    let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                    match idle.iter().position(|thread| Arc::ptr_eq(thread, &me)) {
                        Some(at) => {
                            idle.remove(at);
                            return;
                        }
                        // Taken from the idle list just now: its job is on the way.
                        None => {
                            drop(idle);
                            let slot = me.job.lock().unwrap_or_else(PoisonError::into_inner);
                            let mut slot = me
                                .handed
                                .wait_while(slot, |job| job.is_none())
                                .unwrap_or_else(PoisonError::into_inner);
                            slot.take().expect("waited until a job was handed")
                        }
                    }
                }
            };
            job();
        }
    }

    /// Threads idle now.
    #[cfg(test)]
    fn idle_threads(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_thread_idle_for_the_shortest_time_runs_the_next_job() {
        let pool = Arc::new(EvaluationPool::default());
        let name = || std::thread::current().id();
        // Three jobs at once start three threads.
        let barrier = Arc::new(std::sync::Barrier::new(3));
        let jobs: Vec<_> = (0..3)
            .map(|_| {
                let pool = Arc::clone(&pool);
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move {
                    pool.run(move || {
                        barrier.wait();
                        name()
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        let mut threads = Vec::new();
        for job in jobs {
            threads.push(job.await.unwrap());
        }
        threads.sort_by_key(|id| format!("{id:?}"));
        threads.dedup();
        assert_eq!(threads.len(), 3);
        // Jobs one at a time then all run on one thread: the last to go idle.
        let mut ran_on = Vec::new();
        for _ in 0..20 {
            // Wait for the previous job's thread to be idle again before the next one.
            while pool.idle_threads() < 3 {
                std::thread::yield_now();
            }
            ran_on.push(pool.run(name).await.unwrap());
        }
        ran_on.dedup();
        assert_eq!(ran_on.len(), 1, "{ran_on:?}");
    }

    #[tokio::test]
    async fn a_panicking_job_answers_none_and_its_thread_stays() {
        let pool = Arc::new(EvaluationPool::default());
        let panicked_on = Arc::new(Mutex::new(None));
        let record = Arc::clone(&panicked_on);
        let answer = pool
            .run(move || {
                *record.lock().unwrap() = Some(std::thread::current().id());
                panic!("rule bug")
            })
            .await;
        assert_eq!(answer, None::<()>);
        while pool.idle_threads() < 1 {
            std::thread::yield_now();
        }
        let next_on = pool.run(|| std::thread::current().id()).await;
        assert_eq!(next_on, *panicked_on.lock().unwrap());
    }

    #[tokio::test]
    async fn a_job_may_wait_on_the_runtime() {
        let pool = Arc::new(EvaluationPool::default());
        let answer = pool
            .run(|| {
                Handle::current().block_on(async {
                    tokio::task::yield_now().await;
                    5
                })
            })
            .await;
        assert_eq!(answer, Some(5));
    }
}
