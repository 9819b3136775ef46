//! Splitting a batch over scoped threads, with a process-wide default thread count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread;

/// Below this many items per thread, spawning costs more than it saves.
pub const MIN_ITEMS_PER_THREAD: usize = 32 * 1024;

static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The thread count batches use when a call does not name one.
pub fn default_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => available_threads(),
        n => n,
    }
}

/// The cores available to the process, asked once: on Linux the question reads cgroup
/// files, which costs tens of microseconds, far more than a small batch itself.
fn available_threads() -> usize {
    static AVAILABLE: OnceLock<usize> = OnceLock::new();
    *AVAILABLE.get_or_init(|| thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Sets the default thread count; 0 restores "one per available core".
pub fn set_default_threads(threads: usize) {
    DEFAULT_THREADS.store(threads, Ordering::Relaxed);
}

/// Items in one piece of work handed to a thread.
const PIECE: usize = 16 * 1024;

/// Calls `work(start, a_chunk, b_chunk)` over matching chunks of two equally long outputs,
/// on up to `threads` threads. `start` is the chunk's first index in the whole batch.
///
/// Threads take small pieces one after another rather than one equal share each, so a thread
/// the OS puts aside on a busy machine holds up only its current piece.
pub fn for_each_chunk<A, B, F>(a: &mut [A], b: &mut [B], threads: usize, work: F)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [A], &mut [B]) + Sync,
{
    assert_eq!(a.len(), b.len(), "outputs must be equally long");
    let threads = threads.clamp(1, (a.len() / MIN_ITEMS_PER_THREAD).max(1));
    if threads == 1 {
        work(0, a, b);
        return;
    }
    let pieces = Mutex::new(a.chunks_mut(PIECE).zip(b.chunks_mut(PIECE)).enumerate());
    let run = || loop {
        let next = pieces.lock().unwrap_or_else(PoisonError::into_inner).next();
        match next {
            Some((i, (a, b))) => work(i * PIECE, a, b),
            None => break,
        }
    };
    thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(run);
        }
        // The calling thread works too instead of only waiting.
        run();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_is_visited_once_with_any_thread_count() {
        for threads in [1, 2, 3, 8] {
            let n = MIN_ITEMS_PER_THREAD * 5 + 17;
            let mut out = vec![0usize; n];
            let mut unit = vec![(); n];
            for_each_chunk(&mut out, &mut unit, threads, |start, a, _| {
                for (j, slot) in a.iter_mut().enumerate() {
                    *slot = start + j + 1;
                }
            });
            assert!(out.iter().enumerate().all(|(i, &v)| v == i + 1));
        }
    }

    #[test]
    fn empty_batches_are_fine() {
        let mut out: Vec<u8> = vec![];
        let mut unit: Vec<()> = vec![];
        for_each_chunk(&mut out, &mut unit, 4, |_, _, _| {});
    }
}
