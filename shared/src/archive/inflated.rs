//! The tar stream as it comes out of the gzip decoder, counted against the uncompressed limit.
//! The read that crosses the limit is stopped, so a gzip bomb inflates no further than the
//! limit and the decoder's one buffer, and the reason is recorded: the error that reaches the
//! caller through `tar` and `flate2` is generic.

use std::cell::Cell;
use std::io::{self, Read};

/// Why `Inflated` stopped the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InflatedStop {
    TooLarge,
    HeadersTooLarge,
}

/// The tar stream's byte count, shared between `Inflated` (which advances it) and the walk over
/// entries (which reads it, and opens a header window around each call into `tar`).
pub(super) struct Tally {
    bytes: Cell<u64>,
    limit: u64,
    window_end: Cell<u64>,
    stop: Cell<Option<InflatedStop>>,
}

impl Tally {
    pub(super) fn new(limit: u64) -> Self {
        Self { bytes: Cell::new(0), limit, window_end: Cell::new(u64::MAX), stop: Cell::new(None) }
    }

    pub(super) fn consumed(&self) -> u64 {
        self.bytes.get()
    }

    /// Whether a body of `size` bytes, read from here, would cross the limit.
    pub(super) fn would_exceed(&self, size: u64) -> bool {
        self.bytes.get().saturating_add(size) > self.limit
    }

    /// Until `close_window`, at most `cap` more bytes may be read: `tar` is reading headers.
    pub(super) fn open_window(&self, cap: u64) {
        self.window_end.set(self.bytes.get().saturating_add(cap));
    }

    pub(super) fn close_window(&self) {
        self.window_end.set(u64::MAX);
    }

    pub(super) fn stop(&self) -> Option<InflatedStop> {
        self.stop.get()
    }
}

/// Counts the decompressed tar stream against the tally's limit.
pub(super) struct Inflated<'t, R> {
    inner: R,
    tally: &'t Tally,
}

impl<'t, R: Read> Inflated<'t, R> {
    pub(super) fn new(inner: R, tally: &'t Tally) -> Self {
        Self { inner, tally }
    }

    pub(super) fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for Inflated<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.tally.stop.get().is_some() {
            return Err(stopped());
        }
        let n = self.inner.read(buf)?;
        let bytes = self.tally.bytes.get() + n as u64;
        self.tally.bytes.set(bytes);
        let stop = if bytes > self.tally.limit {
            InflatedStop::TooLarge
        } else if bytes > self.tally.window_end.get() {
            InflatedStop::HeadersTooLarge
        } else {
            return Ok(n);
        };
        self.tally.stop.set(Some(stop));
        Err(stopped())
    }
}

/// Stands in for a reason recorded by `Inflated` or `Upload` on its way up through `tar` and
/// `flate2`.
pub(super) fn stopped() -> io::Error {
    io::Error::other("archive inspection stopped")
}

/// Reads `reader` to its end through `scratch`, keeping nothing.
pub(super) fn discard(reader: &mut impl Read, scratch: &mut [u8]) -> io::Result<()> {
    loop {
        match reader.read(scratch) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
