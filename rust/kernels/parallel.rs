//! Splitting a batch over scoped threads, with a process-wide default thread count.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

/// Below this many items per thread, spawning costs more than it saves.
pub const MIN_ITEMS_PER_THREAD: usize = 32 * 1024;

static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The thread count batches use when a call does not name one.
pub fn default_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        0 => thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Sets the default thread count; 0 restores "one per available core".
pub fn set_default_threads(threads: usize) {
    DEFAULT_THREADS.store(threads, Ordering::Relaxed);
}

/// Calls `work(start, a_chunk, b_chunk)` over matching chunks of two equally long outputs,
/// on up to `threads` threads. `start` is the chunk's first index in the whole batch.
pub fn for_each_chunk<A, B, F>(a: &mut [A], b: &mut [B], threads: usize, work: F)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [A], &mut [B]) + Sync,
{
    assert_eq!(a.len(), b.len(), "outputs must be equally long");
    let len = a.len();
    let threads = threads.clamp(1, (len / MIN_ITEMS_PER_THREAD).max(1));
    if threads == 1 {
        work(0, a, b);
        return;
    }
    let chunk = len.div_ceil(threads);
    let (first_a, rest_a) = a.split_at_mut(chunk);
    let (first_b, rest_b) = b.split_at_mut(chunk);
    thread::scope(|scope| {
        let work = &work;
        for (i, (a, b)) in rest_a
            .chunks_mut(chunk)
            .zip(rest_b.chunks_mut(chunk))
            .enumerate()
        {
            scope.spawn(move || work((i + 1) * chunk, a, b));
        }
        // The calling thread takes a share too instead of only waiting.
        work(0, first_a, first_b);
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
