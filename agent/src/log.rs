//! A job's log on its way to Hangar: what Terraform prints is buffered and appended in chunks,
//! at most every half second, each at the offset of the bytes sent before it (so a chunk sent
//! again after a lost answer changes nothing).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::client::Client;

/// The most bytes one append carries (Hangar takes 256 KiB).
const CHUNK: usize = 128 * 1024;

/// Hangar keeps 8 MiB of a phase's log; what comes after is dropped here, with a note.
const MAX_LOG: u64 = 8 * 1024 * 1024 - 1024;

const FLUSH_EVERY: Duration = Duration::from_millis(500);

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
    while open || !buffer.is_empty() {
        // Gather what arrives within the flush interval (or until the writers are gone).
        let deadline = tokio::time::sleep(FLUSH_EVERY);
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
        for attempt in 0..3 {
            match client.append_log(&token, offset, chunk.clone()).await {
                Ok(()) => break,
                Err(crate::client::ClientError::JobOver(_)) => return,
                Err(e) if attempt == 2 => tracing::warn!(error = %e, "a log chunk could not be sent"),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        offset += length;
    }
}
