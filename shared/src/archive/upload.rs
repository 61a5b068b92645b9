//! The archive as uploaded, counted against the compressed limit and hashed. SHA-256 runs on a
//! thread of its own, beside inflation rather than after it: on an archive that barely
//! compresses, hashing costs as much as inflating.

use std::io::{self, BufRead, Read};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use sha2::{Digest, Sha256};

use super::inflated::stopped;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Bytes read from the source at a time, and handed to the hasher at a time.
const CHUNK_BYTES: usize = 128 * 1024;

/// Chunks the hasher may fall behind by, which bounds the memory it holds.
const CHUNKS_IN_FLIGHT: usize = 4;

/// Why `Upload` stopped the stream.
pub(super) enum UploadStop {
    Source(io::Error),
    TooLarge,
}

/// The source, read in chunks that the gzip decoder borrows (`BufRead`) while the hasher
/// shares them.
pub(super) struct Upload<R> {
    inner: R,
    hasher: Hasher,
    chunk: Option<Arc<Vec<u8>>>,
    filled: usize,
    pos: usize,
    eof: bool,
    bytes: u64,
    limit: u64,
    head: [u8; 2],
    stop: Option<UploadStop>,
}

impl<R: Read> Upload<R> {
    pub(super) fn new(inner: R, limit: u64) -> Self {
        Self::with_hasher(inner, limit, Hasher::start())
    }

    /// The same without the hash, for a stream nobody asks the SHA-256 of (a provider's
    /// archive, which is rewritten and then inspected as an upload).
    pub(super) fn unhashed(inner: R, limit: u64) -> Self {
        Self::with_hasher(inner, limit, Hasher::Off)
    }

    fn with_hasher(inner: R, limit: u64, hasher: Hasher) -> Self {
        Self { inner, hasher, chunk: None, filled: 0, pos: 0, eof: false, bytes: 0, limit, head: [0; 2], stop: None }
    }

    pub(super) fn consumed(&self) -> u64 {
        self.bytes
    }

    pub(super) fn looks_like_gzip(&self) -> bool {
        self.bytes >= 2 && self.head == GZIP_MAGIC
    }

    pub(super) fn take_stop(&mut self) -> Option<UploadStop> {
        self.stop.take()
    }

    /// Reads whatever follows the point where the decoder stopped, so that the hash and the
    /// count cover the whole upload.
    pub(super) fn drain(&mut self) -> io::Result<()> {
        if self.stop.is_some() {
            return Err(stopped());
        }
        while !self.eof {
            self.refill()?;
        }
        Ok(())
    }

    /// The hex SHA-256 of every byte read.
    pub(super) fn into_sha256(self) -> String {
        self.hasher.finish()
    }

    fn refill(&mut self) -> io::Result<()> {
        let mut buf = match self.chunk.take().map(Arc::try_unwrap) {
            Some(Ok(buf)) => buf,
            _ => vec![0; CHUNK_BYTES],
        };
        (self.filled, self.pos) = (0, 0);
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.stop = Some(UploadStop::Source(e));
                    return Err(stopped());
                }
            }
        }
        if let Some(head) = self.head.get_mut(self.bytes as usize..) {
            head.iter_mut().zip(&buf[..filled]).for_each(|(slot, byte)| *slot = *byte);
        }
        self.bytes += filled as u64;
        if self.bytes > self.limit {
            self.stop = Some(UploadStop::TooLarge);
            return Err(stopped());
        }
        let chunk = Arc::new(buf);
        self.hasher.update(&chunk, filled);
        (self.chunk, self.filled) = (Some(chunk), filled);
        Ok(())
    }
}

impl<R: Read> BufRead for Upload<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.stop.is_some() {
            return Err(stopped());
        }
        if self.pos == self.filled && !self.eof {
            self.refill()?;
        }
        Ok(self.chunk.as_ref().map_or(&[][..], |chunk| &chunk[self.pos..self.filled]))
    }

    fn consume(&mut self, amount: usize) {
        self.pos = (self.pos + amount).min(self.filled);
    }
}

impl<R: Read> Read for Upload<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// SHA-256 over the chunks in order: on its own thread, or inline if no thread can be had.
enum Hasher {
    Beside { chunks: SyncSender<(Arc<Vec<u8>>, usize)>, digest: JoinHandle<Sha256> },
    Inline(Sha256),
    Off,
}

impl Hasher {
    fn start() -> Self {
        let (chunks, received) = sync_channel::<(Arc<Vec<u8>>, usize)>(CHUNKS_IN_FLIGHT);
        let hashing = move || {
            let mut sha256 = Sha256::new();
            for (chunk, len) in received {
                sha256.update(&chunk[..len]);
            }
            sha256
        };
        match thread::Builder::new().name("archive-sha256".into()).spawn(hashing) {
            Ok(digest) => Self::Beside { chunks, digest },
            Err(_) => Self::Inline(Sha256::new()),
        }
    }

    fn update(&mut self, chunk: &Arc<Vec<u8>>, len: usize) {
        match self {
            // A send fails only if the hashing thread panicked; `finish` passes that panic on.
            Self::Beside { chunks, .. } => drop(chunks.send((Arc::clone(chunk), len))),
            Self::Inline(sha256) => sha256.update(&chunk[..len]),
            Self::Off => {}
        }
    }

    fn finish(self) -> String {
        let sha256 = match self {
            Self::Beside { chunks, digest } => {
                drop(chunks);
                digest.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }
            Self::Inline(sha256) => sha256,
            Self::Off => unreachable!("only `inspect_sync` asks for the hash, of an upload it made with one"),
        };
        hex::encode(sha256.finalize())
    }
}
