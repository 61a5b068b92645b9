//! A job's log on its way to Hangar: what Terraform prints is buffered and appended in chunks,
//! at most every half second, each at the offset of the bytes sent before it (so a chunk sent
//! again after a lost answer changes nothing).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::client::{Client, ClientError};

/// The most bytes one append carries (Hangar takes 256 KiB).
const CHUNK: usize = 128 * 1024;

/// Hangar keeps 8 MiB of a phase's log; what comes after is dropped here, with a note.
const MAX_LOG: u64 = 8 * 1024 * 1024 - 1024;

/// How often the log is sent: every half second, then less often as a long job's chunks add up,
/// so that it stays within the chunks Hangar keeps (4096) for many hours.
fn flush_every(chunks_sent: u32) -> Duration {
    match chunks_sent {
        0..1024 => Duration::from_millis(500),
        1024..3072 => Duration::from_secs(5),
        _ => Duration::from_secs(30),
    }
}

/// Sends of one chunk that may fail in a row (Hangar unreachable) before the log is given up.
const MAX_FAILED_SENDS: u32 = 30;

pub struct LogWriter {
    sender: mpsc::UnboundedSender<Vec<u8>>,
    task: JoinHandle<()>,
}

impl LogWriter {
    pub fn start(client: Client, token: String) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let task = tokio::spawn(flush(client, token, receiver));
        Self { sender, task }
    }

    /// A sender for what Terraform prints.
    pub fn sender(&self) -> mpsc::UnboundedSender<Vec<u8>> {
        self.sender.clone()
    }

    pub fn line(&self, text: &str) {
        let _ = self.sender.send(format!("{text}\n").into_bytes());
    }

    /// Sends what is buffered, and stops.
    pub async fn close(self) {
        drop(self.sender);
        let _ = self.task.await;
    }
}

async fn flush(client: Client, token: String, mut receiver: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut offset: u64 = 0;
    let mut buffer: Vec<u8> = Vec::new();
    let mut open = true;
    let mut truncated = false;
    let (mut chunks_sent, mut failed) = (0u32, 0u32);
    while open || !buffer.is_empty() {
        // Gather what arrives within the flush interval (or until the writers are gone).
        let deadline = tokio::time::sleep(flush_every(chunks_sent));
        tokio::pin!(deadline);
        while open && buffer.len() < CHUNK {
            tokio::select! {
                received = receiver.recv() => match received {
                    Some(bytes) => buffer.extend_from_slice(&bytes),
                    None => open = false,
                },
                _ = &mut deadline => break,
            }
        }
        if buffer.is_empty() {
            continue;
        }
        let take = buffer.len().min(CHUNK);
        let mut chunk: Vec<u8> = buffer.drain(..take).collect();
        if offset + chunk.len() as u64 > MAX_LOG {
            if !truncated {
                truncated = true;
                chunk = b"\n[The log is over Hangar's limit: the rest is not kept.]\n".to_vec();
            } else {
                continue;
            }
        }
        let length = chunk.len() as u64;
        match client.append_log(&token, offset, chunk.clone()).await {
            Ok(()) => {
                // The offset moves only past what Hangar kept, so no chunk ever leaves a gap.
                offset += length;
                chunks_sent += 1;
                failed = 0;
            }
            Err(ClientError::JobOver(_)) => return,
            Err(ClientError::Refused { status, body }) if status.is_client_error() => {
                tracing::warn!(%status, %body, "Hangar keeps no more of this log");
                return;
            }
            Err(e) => {
                failed += 1;
                if failed >= MAX_FAILED_SENDS {
                    tracing::warn!(error = %e, "the log could not be sent; the rest is not");
                    return;
                }
                // Sent again, at the same offset, with what came since.
                buffer.splice(0..0, chunk);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
