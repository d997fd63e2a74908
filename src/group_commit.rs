//! Group commit: many concurrent writers, one statement per batch.
//!
//! A caller submits one item and awaits its own result; a single task takes everything queued
//! since its last write (up to a maximum) and writes it with one call. Under load a batch grows
//! to whatever arrived while the previous write ran, so the cost per item falls as the rate
//! rises; when idle an item is written at once (no timer, no added latency). Each caller's future
//! resolves only after its item was written, so "recorded before it counts as done" still holds
//! item by item. The queue is bounded: when the database falls behind, submitters wait instead
//! of memory growing.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

type Waiter<O> = oneshot::Sender<Result<O>>;

/// Batches that may wait in the queue; beyond that, submitters wait (back-pressure).
const QUEUE_BATCHES: usize = 16;

/// A handle to submit items to one writer task (cheap to clone).
pub struct GroupCommit<T, O> {
    tx: mpsc::Sender<(T, Waiter<O>)>,
}

impl<T, O> Clone for GroupCommit<T, O> {
    fn clone(&self) -> Self {
        GroupCommit {
            tx: self.tx.clone(),
        }
    }
}

impl<T: Send + 'static, O: Send + 'static> GroupCommit<T, O> {
    /// Spawns the writer task (on the current tokio runtime). `write` gets a batch of at most
    /// `max_batch` items and answers one output per item, in order; an error fails the whole
    /// batch (every caller gets it).
    pub fn spawn<F, Fut>(max_batch: usize, write: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<O>>> + Send + 'static,
    {
        let (tx, mut rx) = mpsc::channel::<(T, Waiter<O>)>(max_batch.max(1) * QUEUE_BATCHES);
        let write = Arc::new(write);
        tokio::spawn(async move {
            let max = max_batch.max(1);
            let mut batch = Vec::with_capacity(max);
            while rx.recv_many(&mut batch, max).await > 0 {
                let (items, waiters): (Vec<T>, Vec<Waiter<O>>) = batch.drain(..).unzip();
                match write(items).await {
                    Ok(outs) => {
                        for (w, o) in waiters.into_iter().zip(outs) {
                            let _ = w.send(Ok(o));
                        }
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        for w in waiters {
                            let _ = w.send(Err(Error::Db(sea_orm::DbErr::Custom(msg.clone()))));
                        }
                    }
                }
            }
        });
        GroupCommit { tx }
    }

    /// Queues `item` and waits until its batch is written.
    pub async fn submit(&self, item: T) -> Result<O> {
        self.enqueue(item).await?.wait().await
    }

    /// Queues `item` (waiting while the queue is full) and answers a handle to await its write:
    /// a caller can give up what it holds (a lane place) once its item is queued.
    pub async fn enqueue(&self, item: T) -> Result<Queued<O>> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((item, tx))
            .await
            .map_err(|_| Error::Stopped("group-commit writer"))?;
        Ok(Queued(rx))
    }
}

/// An item in the queue; [`Queued::wait`] answers once its batch is written.
pub struct Queued<O>(oneshot::Receiver<Result<O>>);

impl<O> Queued<O> {
    /// Waits for the item's write.
    pub async fn wait(self) -> Result<O> {
        self.0
            .await
            .map_err(|_| Error::Stopped("group-commit writer"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_items_share_batches_and_each_gets_its_own_answer() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let gc = GroupCommit::spawn(64, move |items: Vec<u32>| {
            c.fetch_add(1, Ordering::SeqCst);
            async move { Ok(items.into_iter().map(|i| i * 2).collect()) }
        });
        let answers = futures::future::join_all((0..200u32).map(|i| {
            let gc = gc.clone();
            async move { gc.submit(i).await }
        }))
        .await;
        for (i, a) in answers.into_iter().enumerate() {
            assert_eq!(a.unwrap(), i as u32 * 2);
        }
        let n = calls.load(Ordering::SeqCst);
        assert!(
            (4..200).contains(&n),
            "{n} writes for 200 items in batches of ≤ 64"
        );
    }

    #[tokio::test]
    async fn a_failed_write_fails_every_item_of_its_batch() {
        let gc = GroupCommit::spawn(8, |_items: Vec<u32>| async {
            Err::<Vec<()>, _>(Error::Stopped("test"))
        });
        assert!(gc.submit(1).await.is_err());
    }
}
