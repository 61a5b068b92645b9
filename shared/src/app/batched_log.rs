//! dev-server's log sink. A line is copied into a buffer in memory, under a lock held for that
//! copy only: no system call and no thread to wake per line. The buffer goes to stdout in
//! batches: by the writer whose line takes it past [`BATCH_BYTES`], by a flusher thread every
//! [`FLUSH_EVERY`] otherwise (so a line reaches a terminal within that), and by the guard when
//! the server stops. Nothing is dropped: a slow reader of stdout slows the writers down.
//!
//! It replaced tracing-appender's queue, whose thread was woken for each line and wrote each
//! wake's lines at once: under load, a system call and a thread wake-up per request (about 6 %
//! of dev-server's samples, BENCHMARKS.md "Warm requests").

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// A batch is written once the buffer holds this much.
const BATCH_BYTES: usize = 64 * 1024;
/// The longest a line waits in the buffer.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// The shared buffer and where batches go.
struct Sink {
    pending: Mutex<Vec<u8>>,
    /// Held while a batch is taken and written, so batches leave in the order taken.
    out: Mutex<Box<dyn Write + Send>>,
    stopped: Mutex<bool>,
    stop: Condvar,
}

impl Sink {
    fn append(&self, line: &[u8]) -> usize {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.extend_from_slice(line);
        pending.len()
    }

    /// Writes out whatever is buffered.
    fn flush(&self) -> io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if batch.is_empty() {
            return Ok(());
        }
        out.write_all(&batch)?;
        out.flush()
    }
}

/// The `MakeWriter` of the log layer.
pub struct BatchedStdout(Arc<Sink>);

/// Writes out what is buffered and stops the flusher when dropped: hold it until the server
/// has stopped.
pub struct FlushGuard {
    sink: Arc<Sink>,
    flusher: Option<JoinHandle<()>>,
}

/// The sink and its guard; the flusher thread runs until the guard is dropped.
pub fn batched_stdout() -> (BatchedStdout, FlushGuard) {
    batched(Box::new(io::stdout()))
}

fn batched(out: Box<dyn Write + Send>) -> (BatchedStdout, FlushGuard) {
    let sink = Arc::new(Sink {
        pending: Mutex::new(Vec::with_capacity(BATCH_BYTES)),
        out: Mutex::new(out),
        stopped: Mutex::new(false),
        stop: Condvar::new(),
    });
    let flushing = Arc::clone(&sink);
    let flusher = std::thread::Builder::new()
        .name("hangar-log".into())
        .spawn(move || {
            let mut stopped = flushing.stopped.lock().unwrap_or_else(PoisonError::into_inner);
            while !*stopped {
                stopped = flushing.stop.wait_timeout(stopped, FLUSH_EVERY).unwrap_or_else(PoisonError::into_inner).0;
                let _ = flushing.flush();
            }
        })
        .ok();
    (BatchedStdout(Arc::clone(&sink)), FlushGuard { sink, flusher })
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        *self.sink.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.sink.stop.notify_all();
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
        let _ = self.sink.flush();
    }
}

impl<'a> MakeWriter<'a> for BatchedStdout {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter(&self.0)
    }
}

/// What the log layer writes one line through.
pub struct LineWriter<'a>(&'a Sink);

impl Write for LineWriter<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        if self.0.append(line) >= BATCH_BYTES {
            self.0.flush()?;
        }
        Ok(line.len())
    }

    /// Lines leave in batches; a line's own flush leaves it to its batch.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output the test can read.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_leave_in_order_when_a_batch_fills_and_at_the_guards_drop() {
        let out = Shared::default();
        let (sink, guard) = batched(Box::new(out.clone()));
        sink.make_writer().write_all(b"first\n").unwrap();
        assert!(out.0.lock().unwrap().is_empty(), "a line waits for its batch");
        let long = vec![b'x'; BATCH_BYTES];
        sink.make_writer().write_all(&long).unwrap();
        assert_eq!(out.0.lock().unwrap().len(), b"first\n".len() + BATCH_BYTES, "a full batch leaves at once");
        sink.make_writer().write_all(b"last\n").unwrap();
        drop(guard);
        assert_eq!(*out.0.lock().unwrap(), [b"first\n".as_slice(), &long, b"last\n"].concat());
    }

    #[test]
    fn a_line_reaches_the_output_within_the_flush_interval() {
        let out = Shared::default();
        let (sink, _guard) = batched(Box::new(out.clone()));
        sink.make_writer().write_all(b"line\n").unwrap();
        let deadline = std::time::Instant::now() + FLUSH_EVERY * 50;
        while out.0.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the flusher never wrote the line");
            std::thread::sleep(FLUSH_EVERY / 4);
        }
        assert_eq!(out.0.lock().unwrap().as_slice(), b"line\n");
    }
}
