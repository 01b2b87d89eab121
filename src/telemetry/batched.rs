//! Log lines written to standard error in batches: a busy server writes its `info` lines
//! (one per admission decision) with one `write` per batch instead of one per line, as klog
//! does for the apiserver. A line waits at most [`FLUSH_INTERVAL`]; `warn` and `error` lines
//! are written at once with everything before them, and [`flush`] writes what is left at exit.

use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// The longest a line waits in the batch.
const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// A batch this large is written by the thread that filled it.
const BATCH_BYTES: usize = 64 * 1024;

/// The lines not written yet, where they go, and the flushing thread's wake-up.
struct Batch {
    lines: Mutex<Vec<u8>>,
    started: Condvar,
    sink: fn(&[u8]),
}

static BATCH: OnceLock<Batch> = OnceLock::new();

impl Batch {
    fn new(sink: fn(&[u8])) -> Self {
        Batch {
            lines: Mutex::new(Vec::with_capacity(BATCH_BYTES)),
            started: Condvar::new(),
            sink,
        }
    }

    fn lines(&self) -> MutexGuard<'_, Vec<u8>> {
        // A thread that panicked while appending left whole lines or a partial one: write on.
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `lines` (the batch, locked) out and empties it.
    fn write_out(&self, lines: &mut Vec<u8>) {
        if !lines.is_empty() {
            (self.sink)(lines);
            lines.clear();
        }
    }
}

fn to_stderr(lines: &[u8]) {
    // As an unbatched writer, a line that cannot be written is lost, not retried.
    let _ = std::io::stderr().lock().write_all(lines);
}

/// The [`MakeWriter`] of log lines to standard error, batched or not (one per process, made
/// by [`stderr_lines`]).
#[derive(Clone, Copy)]
pub struct StderrLines {
    batch: &'static Batch,
    batching: bool,
}

/// The log lines' writer; with `batching`, the thread that writes a batch [`FLUSH_INTERVAL`]
/// after its first line is started (once).
pub fn stderr_lines(batching: bool) -> StderrLines {
    let mut first = false;
    let batch = BATCH.get_or_init(|| {
        first = true;
        Batch::new(to_stderr)
    });
    if first && batching {
        let spawned = std::thread::Builder::new()
            .name("log-flush".into())
            .spawn(move || flush_batches(batch));
        if spawned.is_err() {
            eprintln!("error: cannot start the log flushing thread; log lines are not batched");
            return StderrLines {
                batch,
                batching: false,
            };
        }
    }
    StderrLines { batch, batching }
}

/// The flushing thread: waits for a batch's first line, lets the batch fill for
/// [`FLUSH_INTERVAL`], writes it.
fn flush_batches(batch: &'static Batch) {
    let mut lines = batch.lines();
    loop {
        while lines.is_empty() {
            lines = batch
                .started
                .wait(lines)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        drop(lines);
        std::thread::sleep(FLUSH_INTERVAL);
        lines = batch.lines();
        batch.write_out(&mut lines);
    }
}

/// Writes the lines batched so far (at exit; nothing when nothing batches).
pub fn flush() {
    if let Some(batch) = BATCH.get() {
        batch.write_out(&mut batch.lines());
    }
}

/// One event's writer: appends the formatted line to the batch; `urgent` (a `warn` or
/// `error` line) writes the batch out with it.
pub struct BatchWriter {
    batch: &'static Batch,
    urgent: bool,
}

impl Write for BatchWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut lines = self.batch.lines();
        let first = lines.is_empty();
        lines.extend_from_slice(bytes);
        if self.urgent || lines.len() >= BATCH_BYTES {
            self.batch.write_out(&mut lines);
        } else if first {
            self.batch.started.notify_one();
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl StderrLines {
    /// Writes a whole `info` or `debug` line, formatted by its caller, as a line of an event
    /// at that level would be written.
    pub(super) fn write_quiet_line(&self, line: &[u8]) {
        let _ = BatchWriter {
            batch: self.batch,
            urgent: !self.batching,
        }
        .write_all(line);
    }
}

impl<'a> MakeWriter<'a> for StderrLines {
    type Writer = BatchWriter;

    fn make_writer(&'a self) -> BatchWriter {
        BatchWriter {
            batch: self.batch,
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> BatchWriter {
        BatchWriter {
            batch: self.batch,
            urgent: !self.batching || *meta.level() <= Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::mpsc;

    static WRITTEN: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

    fn captured(lines: &[u8]) {
        WRITTEN.lock().unwrap().push(lines.to_vec());
    }

    fn writer(batch: &'static Batch, level: Level) -> BatchWriter {
        BatchWriter {
            batch,
            urgent: level <= Level::WARN,
        }
    }

    #[test]
    fn lines_wait_for_a_warning_a_full_batch_or_the_flush_and_keep_their_order() {
        let batch: &'static Batch = Box::leak(Box::new(Batch::new(captured)));
        let mut info = writer(batch, Level::INFO);
        info.write_all(b"first\n").unwrap();
        info.write_all(b"second\n").unwrap();
        assert!(WRITTEN.lock().unwrap().is_empty());
        writer(batch, Level::WARN).write_all(b"warning\n").unwrap();
        assert_eq!(
            WRITTEN.lock().unwrap().as_slice(),
            [b"first\nsecond\nwarning\n".to_vec()]
        );
        let line = vec![b'.'; 1023];
        for _ in 0..BATCH_BYTES / 1024 - 1 {
            info.write_all(&line).unwrap();
            info.write_all(b"\n").unwrap();
        }
        assert_eq!(WRITTEN.lock().unwrap().len(), 1, "below a full batch");
        info.write_all(&line).unwrap();
        info.write_all(b"\n").unwrap();
        let written = std::mem::take(&mut *WRITTEN.lock().unwrap());
        assert_eq!(written.len(), 2, "a full batch is written at once");
        assert_eq!(written[1].len(), BATCH_BYTES);
        assert!(batch.lines().is_empty());

        // The flushing thread writes a batch after its first line, without a warning.
        let (sent, received) = mpsc::channel();
        static SENT: Mutex<Option<mpsc::Sender<Vec<u8>>>> = Mutex::new(None);
        *SENT.lock().unwrap() = Some(sent);
        fn to_channel(lines: &[u8]) {
            if let Some(sent) = SENT.lock().unwrap().as_ref() {
                let _ = sent.send(lines.to_vec());
            }
        }
        let flushed: &'static Batch = Box::leak(Box::new(Batch::new(to_channel)));
        std::thread::spawn(move || flush_batches(flushed));
        writer(flushed, Level::INFO).write_all(b"alone\n").unwrap();
        let got = received.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(got, b"alone\n");
        writer(flushed, Level::DEBUG).write_all(b"again\n").unwrap();
        let got = received.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(got, b"again\n");
    }
}
