//! Splitting a batch over scoped threads, with a process-wide default thread count.

use std::mem::MaybeUninit;
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

/// `f(i)` for every `i` in `0..n`, unzipped into two outputs, on up to `threads` threads.
pub fn map_pairs<A, B, F>(n: usize, threads: usize, f: F) -> (Vec<A>, Vec<B>)
where
    A: Send,
    B: Send,
    F: Fn(usize) -> (A, B) + Sync,
{
    let work = |start: usize, a: &mut [MaybeUninit<A>], b: &mut [MaybeUninit<B>]| {
        for (j, (a, b)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            let (x, y) = f(start + j);
            a.write(x);
            b.write(y);
        }
    };
    // SAFETY: `work` writes every slot of the equally long chunks it is given.
    unsafe { collect_pairs(n, threads, work) }
}

/// Two outputs of `n` items each, filled on up to `threads` threads by `work(start, a, b)`,
/// where `start` is the chunks' first index. The outputs are not zero-filled first: on a
/// large batch that would add a tenth to the memory traffic of hashing it.
///
/// # Safety
/// `work` must initialize every slot of both (equally long) chunks it is given.
pub unsafe fn collect_pairs<A, B, F>(n: usize, threads: usize, work: F) -> (Vec<A>, Vec<B>)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [MaybeUninit<A>], &mut [MaybeUninit<B>]) + Sync,
{
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for_each_chunk(
        &mut a.spare_capacity_mut()[..n],
        &mut b.spare_capacity_mut()[..n],
        threads,
        work,
    );
    // SAFETY: every index lies in exactly one chunk, which `work` initialized.
    unsafe {
        a.set_len(n);
        b.set_len(n);
    }
    (a, b)
}

/// Calls `work(start, a_chunk, b_chunk)` over matching chunks of two equally long outputs.
///
/// Threads take small pieces one after another rather than one equal share each, so a thread
/// the OS puts aside on a busy machine holds up only its current piece.
fn for_each_chunk<A, B, F>(a: &mut [A], b: &mut [B], threads: usize, work: F)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [A], &mut [B]) + Sync,
{
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
    fn every_index_is_mapped_once_with_any_thread_count() {
        let n = MIN_ITEMS_PER_THREAD * 5 + 17;
        for threads in [1, 2, 3, 8] {
            let (a, b) = map_pairs(n, threads, |i| (i + 1, i as u16));
            assert!(a.iter().enumerate().all(|(i, &v)| v == i + 1));
            assert!(b.iter().enumerate().all(|(i, &v)| v == i as u16));
        }
    }

    #[test]
    fn empty_batches_are_fine() {
        let (a, b) = map_pairs(0, 4, |i| (i, ()));
        assert!(a.is_empty() && b.is_empty());
    }
}
