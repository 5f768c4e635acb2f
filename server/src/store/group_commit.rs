//! Group commit on SQLite: its one writer connection writes commits one after another, each
//! with its own `fsync`, so the commits of executions that wait for the writer at the same time
//! are written in one transaction, each inside a savepoint of its own: a refused or failed
//! commit is rolled back alone, and every commit of the group is answered only after the one
//! `COMMIT`. No commit waits for company: whoever finds the writer free writes what is queued,
//! alone if nothing else is.

use std::sync::Mutex;

use openbot_schema::ExecutionId;
use tokio::sync::oneshot;

use super::StoreError;
use super::records::Commit;

/// A commit waiting for the writer, with where its answer goes.
pub(crate) struct Pending {
    pub id: ExecutionId,
    pub generation: i64,
    pub commit: Commit,
    pub answer: oneshot::Sender<Result<i64, StoreError>>,
}

/// The commits waiting for the writer, and the turn to write them.
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Vec<Pending>>,
    /// Held by whoever writes a group; fair, so groups go in the order their writers came.
    writer: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").finish_non_exhaustive()
    }
}

/// How many commits one transaction writes at most.
const MAX_GROUP: usize = 64;

impl Group {
    /// Queues `commit` and returns its answer: written by a caller before this one, or by this
    /// one with whatever else is queued once the writer is free (in groups of at most
    /// `MAX_GROUP`, until its own is written). `write` writes a group in order and answers each
    /// of its commits.
    pub(crate) async fn commit<W, F>(
        &self,
        id: ExecutionId,
        generation: i64,
        commit: Commit,
        write: W,
    ) -> Result<i64, StoreError>
    where
        W: Fn(Vec<Pending>) -> F,
        F: std::future::Future<Output = ()>,
    {
        let (answer, mut answered) = oneshot::channel();
        self.lock_queue().push(Pending {
            id,
            generation,
            commit,
            answer,
        });
        let _turn = self.writer.lock().await;
        loop {
            match answered.try_recv() {
                Ok(result) => return result,
                Err(oneshot::error::TryRecvError::Closed) => return Err(lost()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let group = {
                let mut queue = self.lock_queue();
                let take = queue.len().min(MAX_GROUP);
                queue.drain(..take).collect::<Vec<_>>()
            };
            if group.is_empty() {
                // Every group is answered before its writer lets go: unreachable, but never wait
                // for an answer that cannot come.
                return Err(lost());
            }
            write(group).await;
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What a commit whose group was dropped unwritten or unanswered hears: the writer went away
/// (its caller was cancelled); the commit may or may not have landed.
pub(crate) fn lost() -> StoreError {
    StoreError::Unavailable(sqlx::Error::WorkerCrashed)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Writes a group by answering each commit with its place in the group, and notes the
    /// group's size; the first group waits a while, as a slow `fsync` would.
    async fn write(sizes: Arc<Mutex<Vec<usize>>>, group: Vec<Pending>) {
        let first = sizes.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        sizes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(group.len());
        if first {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for (place, pending) in group.into_iter().enumerate() {
            let _ = pending.answer.send(Ok(place as i64));
        }
    }

    #[tokio::test]
    async fn commits_that_wait_for_a_busy_writer_are_written_as_one_group() {
        let group = Arc::new(Group::default());
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (group, sizes) = (Arc::clone(&group), Arc::clone(&sizes));
            tasks.push(tokio::spawn(async move {
                group
                    .commit(ExecutionId::new(), 1, Commit::default(), |pending| {
                        write(Arc::clone(&sizes), pending)
                    })
                    .await
            }));
            if i == 0 {
                // The first commit finds the writer free and writes alone.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap_or_else(|e| panic!("{e}")).ok());
        }
        assert_eq!(*sizes.lock().unwrap_or_else(|p| p.into_inner()), [1, 4]);
        assert_eq!(answers, [Some(0), Some(0), Some(1), Some(2), Some(3)]);
    }

    #[tokio::test]
    async fn a_commit_whose_group_was_dropped_unanswered_hears_a_passing_failure() {
        let group = Group::default();
        let answer = group
            .commit(
                ExecutionId::new(),
                1,
                Commit::default(),
                |pending| async move {
                    drop(pending);
                },
            )
            .await;
        assert!(matches!(answer, Err(err) if err.is_transient()));
    }
}
