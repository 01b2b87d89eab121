//! Reads of single objects a watch does not hold yet, and their answers, shared by the
//! namespace cache and the parameter watches.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::authorization::ResultLabels;
use crate::engine::ReadFailure;

/// How long a namespace got from the API ([`NamespaceLookup::fetch`]), or the answer that it
/// does not exist, is used before it is asked for again. The watch delivers a new namespace
/// within milliseconds; its store is read first.
///
/// [`NamespaceLookup::fetch`]: crate::engine::NamespaceLookup::fetch
pub const FETCHED_TTL: Duration = Duration::from_secs(10);

/// How long the failure of a read is used before the object is asked for again: requests meanwhile
/// are answered with the failure (as the apiserver answers when its own read fails) without
/// each waiting for an API that is down.
pub const FAILED_TTL: Duration = Duration::from_secs(1);

/// The longest a read of one object may take, whatever the request's deadline, as the
/// apiserver allows its own reads on a cache miss.
pub const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// The most answers a [`ReadAnswers`] keeps at once; past it, expired ones are dropped, and all
/// when none has expired.
const READ_ANSWERS_MAX: usize = 1024;

/// What a read of one object gave: the object, `None` when there is none, or why it could not
/// be had.
pub(crate) type ReadAnswer<T> = Result<Option<T>, ReadFailure>;

/// The answers of reads of single objects that a watch did not hold yet, by key: the object or
/// that there is none, each used for [`FETCHED_TTL`], or the failure of the read, used for
/// [`FAILED_TTL`]. One read per key is in flight at a time: requests that need the same object
/// meanwhile wait for its answer.
pub(crate) struct ReadAnswers<K, T> {
    answers: Mutex<HashMap<K, (Instant, ReadAnswer<T>)>>,
    /// The reads in flight, by key: locked by the request that reads, until its answer is kept.
    in_flight: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
    /// Reads by result: `found`, `not_found`, `error` or `timeout`.
    results: Family<ResultLabels, Counter>,
}

/// A read in flight, taken out of [`ReadAnswers::in_flight`] when it ends, answered or not
/// (its request may be dropped while it waits).
struct Reading<'a, K: Hash + Eq, T> {
    answers: &'a ReadAnswers<K, T>,
    key: K,
    _gate: tokio::sync::OwnedMutexGuard<()>,
}

impl<K: Hash + Eq, T> Drop for Reading<'_, K, T> {
    fn drop(&mut self) {
        let mut in_flight = self
            .answers
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        in_flight.remove(&self.key);
    }
}

impl<K: Hash + Eq + Clone, T: Clone> ReadAnswers<K, T> {
    /// No answers yet; reads are counted in `results`.
    pub(crate) fn new(results: Family<ResultLabels, Counter>) -> Self {
        ReadAnswers {
            answers: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            results,
        }
    }

    /// The fresh answer for `key`: `Some(Ok(None))` when the read found nothing,
    /// `Some(Err(_))` when it failed.
    pub(crate) fn fresh(&self, key: &K) -> Option<ReadAnswer<T>> {
        let answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let (at, answer) = answers.get(key)?;
        (at.elapsed() < time_to_keep(answer)).then(|| answer.clone())
    }

    /// Awaits `read` for at most `timeout`, keeps what it gave under `key` (made into the
    /// kept form by `keep`), and counts it. Failures are logged with `what` and `name`, and
    /// kept worded as the apiserver's client words them for `path`, the object's API path.
    /// When a read of `key` is in flight already, waits (at most `timeout`) for its answer
    /// instead, and reads only if it ended without one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn read<O>(
        &self,
        key: K,
        what: &str,
        name: &str,
        path: &str,
        timeout: Duration,
        read: impl Future<Output = Result<Option<O>, kube::Error>>,
        keep: impl FnOnce(O) -> Option<T>,
    ) {
        let deadline = tokio::time::Instant::now() + timeout;
        let _reading = loop {
            let gate = {
                let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                match in_flight.get(&key) {
                    Some(gate) => gate.clone(),
                    None => {
                        let gate = Arc::new(tokio::sync::Mutex::new(()));
                        // A new gate is never locked yet.
                        let Ok(locked) = gate.clone().try_lock_owned() else {
                            return;
                        };
                        in_flight.insert(key.clone(), gate);
                        break Reading {
                            answers: self,
                            key: key.clone(),
                            _gate: locked,
                        };
                    }
                }
            };
            if tokio::time::timeout_at(deadline, gate.lock())
                .await
                .is_err()
                || self.fresh(&key).is_some()
            {
                return;
            }
        };
        let (answer, result) = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(Some(object))) => (Ok(keep(object)), "found"),
            Ok(Ok(None)) => (Ok(None), "not_found"),
            Ok(Err(error)) => {
                tracing::warn!(%error, what, name, "reading an object the watch does not hold yet failed");
                (Err(read_failure(&error, path)), "error")
            }
            Err(_) => {
                tracing::warn!(
                    what,
                    name,
                    ?timeout,
                    "reading an object the watch does not hold yet timed out"
                );
                let failure = ReadFailure {
                    status: None,
                    message: format!("Get {path:?}: context deadline exceeded"),
                };
                (Err(failure), "timeout")
            }
        };
        self.results.get_or_create(&ResultLabels { result }).inc();
        let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        if answers.len() >= READ_ANSWERS_MAX {
            answers.retain(|_, (at, answer)| at.elapsed() < time_to_keep(answer));
            if answers.len() >= READ_ANSWERS_MAX {
                answers.clear();
            }
        }
        answers.insert(key, (Instant::now(), answer));
    }
}

/// How long `answer` is used.
fn time_to_keep<T>(answer: &ReadAnswer<T>) -> Duration {
    if answer.is_ok() {
        FETCHED_TTL
    } else {
        FAILED_TTL
    }
}

/// A failed read of `path` as the apiserver's client reports it: the API's Status (its code,
/// reason and message) when it answered with one, else the request and what went wrong (the
/// client's words are kube-rs's, not client-go's).
pub(crate) fn read_failure(error: &kube::Error, path: &str) -> ReadFailure {
    match error {
        kube::Error::Api(status) => ReadFailure {
            status: Some((status.code, status.reason.clone())),
            message: status.message.clone(),
        },
        other => {
            let mut message = format!("Get {path:?}: {other}");
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                let text = cause.to_string();
                if !message.ends_with(&text) {
                    message.push_str(": ");
                    message.push_str(&text);
                }
                source = cause.source();
            }
            ReadFailure {
                status: None,
                message,
            }
        }
    }
}
