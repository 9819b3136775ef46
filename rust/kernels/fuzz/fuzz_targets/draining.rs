//! Any sequence of draining-hash operations: errors, never panics, and every entry, count
//! and stat agrees with a plain map of (owner, pending messages, blocked dispatches).
#![no_main]

use std::collections::HashMap;

use keyshared_kernels::draining::{DrainingHashEntry, DrainingHashes};
use libfuzzer_sys::{arbitrary, fuzz_target};

#[derive(arbitrary::Arbitrary, Debug)]
enum Op {
    Add {
        consumer: u8,
        hash: u8,
    },
    Reduce {
        consumer: u8,
        hash: u8,
        closing: bool,
    },
    ReduceMany {
        consumer: u8,
        hashes: Vec<u8>,
        closing: bool,
    },
    ShouldBlock {
        consumer: u8,
        hash: u8,
    },
    StartBatch,
    EndBatch,
    ConsumerRemoved {
        consumer: u8,
    },
    Clear,
}

/// Few consumers and hashes, so that they collide; 0 is the "no hash" the table ignores.
fn ids(consumer: u8, hash: u8) -> (u64, u16) {
    (u64::from(consumer % 4), u16::from(hash % 8) * 0x2000 / 8)
}

fuzz_target!(|ops: Vec<Op>| {
    let mut table = DrainingHashes::new();
    let mut model: HashMap<u16, DrainingHashEntry> = HashMap::new();
    for op in ops {
        match op {
            Op::Add { consumer, hash } => {
                let (c, h) = ids(consumer, hash);
                let owned_elsewhere = model.get(&h).is_some_and(|e| e.consumer_id != c);
                let added = table.add_entry(c, h);
                assert_eq!(added.is_err(), h == 0 || owned_elsewhere);
                if added.is_ok() {
                    let e = model.entry(h).or_insert(DrainingHashEntry {
                        consumer_id: c,
                        ref_count: 0,
                        blocked_count: 0,
                    });
                    e.ref_count += 1;
                }
            }
            Op::Reduce {
                consumer,
                hash,
                closing,
            } => {
                let (c, h) = ids(consumer, hash);
                if table.reduce_ref_count(c, h, closing).is_ok() {
                    reduce(&mut model, h);
                }
            }
            Op::ReduceMany {
                consumer,
                hashes,
                closing,
            } => {
                let c = u64::from(consumer % 4);
                let hashes: Vec<u16> = hashes.iter().map(|&h| ids(consumer, h).1).collect();
                if table.reduce_ref_counts(c, &hashes, closing).is_ok() {
                    hashes.iter().for_each(|&h| reduce(&mut model, h));
                }
            }
            Op::ShouldBlock { consumer, hash } => {
                let (c, h) = ids(consumer, hash);
                let blocked = table.should_block_sticky_key_hash(c, h);
                match model.get_mut(&h) {
                    // Back on its owner: the entry goes and nothing waits.
                    Some(e) if e.consumer_id == c => {
                        assert!(!blocked);
                        model.remove(&h);
                    }
                    Some(e) => {
                        assert!(blocked);
                        e.blocked_count = e.blocked_count.saturating_add(1);
                    }
                    None => assert!(!blocked),
                }
            }
            Op::StartBatch => table.start_batch(),
            Op::EndBatch => {
                let _ = table.end_batch();
            }
            Op::ConsumerRemoved { consumer } => table.consumer_removed(ids(consumer, 0).0),
            Op::Clear => {
                table.clear();
                model.clear();
            }
        }
        assert_eq!(table.len(), model.len());
        for (&h, &e) in &model {
            assert_eq!(table.get_entry(h), Some(e));
        }
        for c in 0..4 {
            let stats = table.consumer_stats(c);
            let pending: u64 = model
                .values()
                .filter(|e| e.consumer_id == c)
                .map(|e| u64::from(e.ref_count))
                .sum();
            assert!(stats.draining_hashes_unacked_messages <= pending);
        }
    }
});

fn reduce(model: &mut HashMap<u16, DrainingHashEntry>, hash: u16) {
    if let Some(e) = model.get_mut(&hash) {
        e.ref_count -= 1;
        if e.ref_count == 0 {
            model.remove(&hash);
        }
    }
}
