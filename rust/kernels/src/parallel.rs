//! Splitting a batch over a persistent pool of worker threads, with a process-wide default
//! thread count.
//!
//! The workers are rayon's: made once for each thread count a process asks for and kept, so
//! a call wakes threads that already exist instead of starting new ones, and they share a
//! call's pieces by work stealing. Each piece's output is written by the thread that
//! computes it, so the pages of a fresh output are first touched, and faulted in, on every
//! thread at once.
//!
//! After `fork` the child has only the thread that forked: the parent's workers are not
//! there. Each pool remembers the process that made it, and a child makes its own (Spark's
//! Python workers are forked from a daemon that may have imported the library).

use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread;

use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

/// Below this many items per thread, waking a worker costs more than it saves.
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

/// Items in the smallest piece of work a thread takes: large enough that taking it costs
/// little beside hashing it, small enough that a thread the OS puts aside on a busy machine
/// holds up little.
const PIECE: usize = 16 * 1024;

/// A pool of `threads` workers and the process that made it.
struct Pool {
    process: u32,
    threads: usize,
    pool: Arc<ThreadPool>,
}

/// The pool of `threads` workers of this process, made on first use; None if the OS would
/// not start its threads (the caller then works alone).
fn pool(threads: usize) -> Option<Arc<ThreadPool>> {
    static POOLS: Mutex<Vec<Pool>> = Mutex::new(Vec::new());
    let process = std::process::id();
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if pools.first().is_some_and(|p| p.process != process) {
        // A forked child's copy of its parent's pools: their workers are not in this
        // process, so dropping them would signal threads that do not exist. They are
        // forgotten instead, a few bytes each.
        std::mem::forget(std::mem::take(&mut *pools));
    }
    if let Some(p) = pools.iter().find(|p| p.threads == threads) {
        return Some(Arc::clone(&p.pool));
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("keyshared-{i}"))
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    pools.push(Pool {
        process,
        threads,
        pool: Arc::clone(&pool),
    });
    Some(pool)
}

/// `f(range, a, b)` over ranges of `piece` items (the last may be shorter) that together
/// cover two equally long outputs, on up to `threads` threads of the pool, `a` and `b` being
/// the outputs' slots for the range; the ranges where `f` answered false (it wrote no
/// answer there, for the caller to write), in order. For work whose pieces are each worth
/// waking a thread for; the caller sizes them.
pub fn fill_pieces<A, B, F>(
    a: &mut [MaybeUninit<A>],
    b: &mut [MaybeUninit<B>],
    piece: usize,
    threads: usize,
    f: F,
) -> Vec<Range<usize>>
where
    A: Send,
    B: Send,
    F: Fn(Range<usize>, &mut [MaybeUninit<A>], &mut [MaybeUninit<B>]) -> bool + Sync,
{
    assert_eq!(a.len(), b.len(), "outputs of unequal lengths");
    let (n, piece) = (a.len(), piece.max(1));
    type Slots<'a, T> = &'a mut [MaybeUninit<T>];
    let run = |(i, (a, b)): (usize, (Slots<A>, Slots<B>))| {
        let range = i * piece..i * piece + a.len();
        (!f(range.clone(), a, b)).then_some(range)
    };
    match (threads > 1 && n > piece).then(|| pool(threads)).flatten() {
        Some(pool) => pool.install(|| {
            let pieces = a.par_chunks_mut(piece).zip(b.par_chunks_mut(piece));
            pieces.enumerate().filter_map(run).collect()
        }),
        None => {
            let pieces = a.chunks_mut(piece).zip(b.chunks_mut(piece));
            pieces.enumerate().filter_map(run).collect()
        }
    }
}

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
/// large batch that would add a tenth to the memory traffic of hashing it, and it would
/// fault every page in on the calling thread alone.
///
/// # Safety
/// `work` must initialize every slot of both (equally long) chunks it is given.
pub unsafe fn collect_pairs<A, B, F>(n: usize, threads: usize, work: F) -> (Vec<A>, Vec<B>)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [MaybeUninit<A>], &mut [MaybeUninit<B>]) + Sync,
{
    let (mut a, mut b) = (output(n), output(n));
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

/// Room for `n` items. A large output is advised onto huge pages, as NumPy advises its own
/// large arrays: its first touch then faults in one 2 MiB page where it would fault in 512
/// small ones, and on many threads those faults, not the hashing, were most of a call's time.
pub fn output<T>(n: usize) -> Vec<T> {
    let out: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    advise_huge_pages(out.as_ptr().cast(), n * size_of::<T>());
    out
}

/// Below this, an allocation is no huge page's worth.
#[cfg(target_os = "linux")]
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *const u8, len: usize) {
    const HUGE_PAGE: usize = 2 << 20;
    if len < HUGE_PAGE_MIN_BYTES {
        return;
    }
    // Only whole huge pages inside the allocation: the advice applies to whole pages, and
    // the rest of the allocator's mapping is not this output's to advise.
    let first = (start as usize).next_multiple_of(HUGE_PAGE);
    let end = (start as usize + len) / HUGE_PAGE * HUGE_PAGE;
    if end > first {
        // SAFETY: [first, end) lies inside the allocation just made; the advice changes how
        // its pages are backed, never their contents. A kernel without transparent huge
        // pages refuses it, and the output keeps small pages.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
    }
}

/// Calls `work(start, a_chunk, b_chunk)` over matching chunks of two equally long outputs
/// that together cover them, on up to `threads` threads of the pool.
fn for_each_chunk<A, B, F>(a: &mut [A], b: &mut [B], threads: usize, work: F)
where
    A: Send,
    B: Send,
    F: Fn(usize, &mut [A], &mut [B]) + Sync,
{
    let threads = threads.clamp(1, (a.len() / MIN_ITEMS_PER_THREAD).max(1));
    let Some(pool) = (threads > 1).then(|| pool(threads)).flatten() else {
        work(0, a, b);
        return;
    };
    pool.install(|| {
        a.par_chunks_mut(PIECE)
            .zip(b.par_chunks_mut(PIECE))
            .enumerate()
            .for_each(|(i, (a, b))| work(i * PIECE, a, b));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_every_slot_once_in_order_with_any_thread_count() {
        for (n, piece) in [(0, 4), (1, 4), (4, 4), (17, 4), (3, 0), (100_000, 1_000)] {
            for threads in [1, 2, 3, 8] {
                let (mut a, mut b) = (output::<usize>(n), output::<u8>(n));
                // Every third piece is left to the caller.
                let left = fill_pieces(
                    &mut a.spare_capacity_mut()[..n],
                    &mut b.spare_capacity_mut()[..n],
                    piece,
                    threads,
                    |range, a, b| {
                        assert!(!range.is_empty() && range.len() <= piece.max(1));
                        if range.start / piece.max(1) % 3 == 2 {
                            return false;
                        }
                        for ((i, a), b) in range.zip(a).zip(b) {
                            a.write(i);
                            b.write(i as u8);
                        }
                        true
                    },
                );
                for range in &left {
                    for i in range.clone() {
                        a.spare_capacity_mut()[i].write(i);
                        b.spare_capacity_mut()[i].write(i as u8);
                    }
                }
                let step = piece.max(1);
                let want: Vec<_> = (0..n).step_by(step).filter(|s| s / step % 3 == 2).collect();
                assert_eq!(left.iter().map(|r| r.start).collect::<Vec<_>>(), want);
                // SAFETY: the pieces and the caller wrote every slot.
                unsafe {
                    a.set_len(n);
                    b.set_len(n);
                }
                assert_eq!(a, (0..n).collect::<Vec<_>>());
                assert!(b.iter().enumerate().all(|(i, &x)| x == i as u8));
            }
        }
    }

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
    fn outputs_on_huge_pages_hold_every_item() {
        // 3 MiB of u32 and 12 MiB of u64: one each side of HUGE_PAGE_MIN_BYTES.
        let n = 3 << 18;
        let (a, b) = map_pairs(n, 3, |i| (i as u32, i as u64 * 7));
        assert!(a.iter().enumerate().all(|(i, &v)| v == i as u32));
        assert!(b.iter().enumerate().all(|(i, &v)| v == i as u64 * 7));
    }

    #[test]
    fn empty_batches_are_fine() {
        let (a, b) = map_pairs(0, 4, |i| (i, ()));
        assert!(a.is_empty() && b.is_empty());
    }

    #[test]
    fn a_pool_is_kept_per_thread_count() {
        let first = pool(3).expect("a pool of 3");
        assert_eq!(first.current_num_threads(), 3);
        assert!(Arc::ptr_eq(&first, &pool(3).expect("the same pool")));
        assert_eq!(pool(2).expect("a pool of 2").current_num_threads(), 2);
    }

    #[test]
    fn calls_from_many_threads_at_once_agree() {
        let n = MIN_ITEMS_PER_THREAD * 3;
        thread::scope(|scope| {
            for threads in [2, 3, 2, 4] {
                scope.spawn(move || {
                    let (a, _) = map_pairs(n, threads, |i| (i * 3, ()));
                    assert!(a.iter().enumerate().all(|(i, &v)| v == i * 3));
                });
            }
        });
    }
}
