//! Group commit: commits of executions that wait for the database at the same time are
//! written together, so they share one transaction's `fsync` (and on PostgreSQL one statement)
//! instead of each paying for its own. SQLite's one writer writes a group in one transaction,
//! each commit in a savepoint of its own (`SqliteStore::write_group`); PostgreSQL writes the
//! commits that need nothing but their rows in one statement (`PostgresStore::write_group`).
//! Every commit of a group is answered only after the group is written. No commit waits for
//! company: whoever finds a writer's turn free writes what is queued, alone if nothing else is.

use std::sync::Mutex;

use tokio::sync::{Semaphore, oneshot};

use super::StoreError;

/// A job waiting for a writer, with where its answer goes.
pub(crate) struct Pending<J, T> {
    /// What to write.
    pub job: J,
    /// Its answer.
    pub answer: oneshot::Sender<Result<T, StoreError>>,
}

/// The jobs waiting for a writer, and the writers' turns.
pub(crate) struct Group<J, T> {
    queue: Mutex<Vec<Pending<J, T>>>,
    /// One permit per group that may be written at once; fair, so groups go in the order their
    /// writers came.
    turns: Semaphore,
}

impl<J, T> std::fmt::Debug for Group<J, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").finish_non_exhaustive()
    }
}

/// How many commits one group holds at most.
const MAX_GROUP: usize = 64;

impl<J, T> Group<J, T> {
    /// A group with `writers` groups written at once at most.
    pub(crate) fn new(writers: usize) -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            turns: Semaphore::new(writers.max(1)),
        }
    }

    /// Queues `job` and returns its answer: written by a caller before this one, or by this
    /// one with whatever else is queued once it has a writer's turn (in groups of at most
    /// `MAX_GROUP`, until its own is written). `write` writes a group in order and answers each
    /// of its jobs.
    pub(crate) async fn submit<W, F>(&self, job: J, write: W) -> Result<T, StoreError>
    where
        W: Fn(Vec<Pending<J, T>>) -> F,
        F: std::future::Future<Output = ()>,
    {
        let (answer, mut answered) = oneshot::channel();
        self.lock_queue().push(Pending { job, answer });
        let _turn = self.turns.acquire().await.map_err(|_| lost())?;
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
                // Another writer holds this job's group and answers it before it lets go.
                return answered.await.unwrap_or_else(|_| Err(lost()));
            }
            write(group).await;
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Pending<J, T>>> {
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
    use crate::store::records::Commit;
    use openbot_schema::ExecutionId;

    type Job = (ExecutionId, Commit);

    /// Writes a group by answering each commit with its place in the group, and notes the
    /// group's size; the first group waits a while, as a slow `fsync` would.
    async fn write(sizes: Arc<Mutex<Vec<usize>>>, group: Vec<Pending<Job, i64>>) {
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
        let group = Arc::new(Group::<Job, i64>::new(1));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (group, sizes) = (Arc::clone(&group), Arc::clone(&sizes));
            tasks.push(crate::telemetry::spawn(async move {
                group
                    .submit((ExecutionId::new(), Commit::default()), |pending| {
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
        let group = Group::<Job, i64>::new(1);
        let answer = group
            .submit(
                (ExecutionId::new(), Commit::default()),
                |pending| async move {
                    drop(pending);
                },
            )
            .await;
        assert!(matches!(answer, Err(err) if err.is_transient()));
    }
}
