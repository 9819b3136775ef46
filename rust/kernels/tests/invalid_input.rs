//! Every kind of bad input a kernel refuses, matched as a caller of the crate matches it: by
//! variant and parts, never by the text.

use keyshared_kernels::buckets::{
    buckets_for_budget, canonical_bucket_hash, entry_bucket, equal_width_splits, ring_hash,
    validate_splits, HashRange,
};
use keyshared_kernels::cursor::{check_offset, BucketCheckpoints};
use keyshared_kernels::danube_ring::KeySharedConsumerState;
use keyshared_kernels::dispatch::sticky::{Dispatched, HoldReason};
use keyshared_kernels::dispatch::{check_positions, Selector};
use keyshared_kernels::draining::DrainingHashes;
use keyshared_kernels::entry_bucket::{validate_bucket_boundaries, EntryBucketSelector};
use keyshared_kernels::error::{
    Conflict, DispatchedConflict, Duplicate, InvalidInput, KeyConflict, OffsetState, StateError,
    Tiling,
};
use keyshared_kernels::impacted::validate_assignments;
use keyshared_kernels::keys::IntColumn;
use keyshared_kernels::partitioners::{NumPartitions, Partitioner};
use keyshared_kernels::pending_acks::{keeps_hash, PendingAck, PendingAcks};
use keyshared_kernels::redelivery::{check_position, MessageRedeliveryController};
use keyshared_kernels::ring::ConsistentHashingSelector;
use keyshared_kernels::routing::{RoutingTable, SegmentRoute};
use keyshared_kernels::routing_key::RoutingKey;
use keyshared_kernels::window::{FailurePolicy, InFlightWindow, PoisonPolicy, WindowLimits};

fn range(start: i64, end: i64) -> HashRange {
    HashRange::new(start, end).unwrap()
}

fn invalid<T: std::fmt::Debug>(result: Result<T, StateError>) -> InvalidInput {
    match result.unwrap_err() {
        StateError::Invalid(e) => e,
        other => panic!("not bad input: {other:?}"),
    }
}

#[test]
fn numbers_out_of_range_too_small_or_above_their_limit() {
    assert_eq!(
        NumPartitions::new(0, "num_partitions").unwrap_err(),
        InvalidInput::OutOfRange {
            what: "num_partitions".to_owned(),
            value: 0,
            min: 1,
            max: i32::MAX as u64,
        }
    );
    assert!(matches!(
        ConsistentHashingSelector::new(1, false, 0x1_0000).err(),
        Some(InvalidInput::OutOfRange { what, min: 1, max: 0xFFFF, .. }) if what == "range_max_value"
    ));
    assert!(matches!(
        check_offset(-1, "offset").unwrap_err(),
        InvalidInput::OutOfRange {
            value: -1,
            min: 0,
            ..
        }
    ));
    assert_eq!(
        buckets_for_budget(8, 0).unwrap_err(),
        InvalidInput::TooSmall {
            what: "segment count",
            min: 1,
            value: 0,
        }
    );
    assert_eq!(
        equal_width_splits(-3).unwrap_err(),
        InvalidInput::TooSmall {
            what: "bucket count",
            min: 0,
            value: -3,
        }
    );
    let limits = WindowLimits {
        max_per_consumer: 0,
        ..WindowLimits::default()
    };
    assert!(matches!(
        InFlightWindow::new(limits, FailurePolicy::default()).unwrap_err(),
        InvalidInput::TooSmall {
            what: "max_per_consumer",
            min: 1,
            value: 0
        }
    ));
    let policy = FailurePolicy {
        base_redelivery_delay_ms: 10,
        max_redelivery_delay_ms: 5,
        ..FailurePolicy::default()
    };
    assert_eq!(
        policy.validate().unwrap_err(),
        InvalidInput::Exceeds {
            what: "base_redelivery_delay_ms",
            value: 10,
            limit: "max_redelivery_delay_ms",
            limit_value: 5,
        }
    );
    let policy = FailurePolicy {
        poison_policy: PoisonPolicy::DeadLetter(" ".to_owned()),
        ..FailurePolicy::default()
    };
    assert_eq!(
        policy.validate().unwrap_err(),
        InvalidInput::NoDeadLetterTopic
    );
}

#[test]
fn hashes_off_the_ring_or_reserved() {
    assert_eq!(
        ring_hash(0x1_0000, "hash_b").unwrap_err(),
        InvalidInput::NotRingHash {
            what: "hash_b".to_owned(),
            value: 0x1_0000,
        }
    );
    assert_eq!(
        DrainingHashes::new().add_entry(1, 0).unwrap_err(),
        InvalidInput::ReservedHash { position: None }
    );
    assert_eq!(
        MessageRedeliveryController::new(false)
            .add((3, 4), Some(0))
            .unwrap_err(),
        InvalidInput::ReservedHash {
            position: Some((3, 4))
        }
    );
    let ack = PendingAck {
        ledger_id: 1,
        entry_id: 2,
        batch_size: 1,
        sticky_key_hash: 0,
    };
    assert_eq!(
        PendingAcks::new(7)
            .add_pending_ack_if_allowed(ack, Some(&DrainingHashes::new()))
            .unwrap_err(),
        InvalidInput::ReservedHash {
            position: Some((1, 2))
        }
    );
}

#[test]
fn positions_negative_or_given_twice_and_lengths_that_differ() {
    assert_eq!(
        check_position((1, -2), "position").unwrap_err(),
        InvalidInput::NegativePosition {
            what: "position",
            position: (1, -2),
        }
    );
    let read = [((1, 0), 5, None), ((1, 1), 5, None), ((1, 0), 5, None)];
    assert_eq!(
        check_positions(read).unwrap_err(),
        InvalidInput::Item {
            index: 2,
            error: Box::new(
                Duplicate::Position {
                    position: (1, 0),
                    first: 0,
                }
                .into()
            ),
        }
    );
    let mut checkpoints = BucketCheckpoints::new();
    checkpoints.open(1, 0, 0).unwrap();
    assert_eq!(
        invalid(checkpoints.ack_many(&[1, 1], &[0], &[0, 1])),
        InvalidInput::LengthMismatch {
            names: &["segment_ids", "buckets", "offsets"],
            lengths: vec![2, 1, 2],
        }
    );
    assert_eq!(
        checkpoints.open(1, 0, 5).unwrap_err(),
        InvalidInput::Duplicate(Duplicate::OpenBucket {
            segment_id: 1,
            bucket: 0,
        })
    );
}

#[test]
fn hash_ranges_reversed_unsplittable_apart_unparsable_or_straddling() {
    assert_eq!(
        HashRange::new(6, 5).unwrap_err(),
        InvalidInput::ReversedRange {
            start: "start",
            start_hash: 6,
            end: "end",
            end_hash: 5,
        }
    );
    assert!(matches!(
        entry_bucket(9, 8, &[]).unwrap_err(),
        InvalidInput::ReversedRange {
            start: "entry_hash_min",
            ..
        }
    ));
    assert_eq!(
        range(3, 3).split().unwrap_err(),
        InvalidInput::Unsplittable { range: (3, 3) }
    );
    assert_eq!(
        range(0, 9).merge(range(11, 20)).unwrap_err(),
        InvalidInput::NotAdjacent {
            first: (0, 9),
            second: (11, 20),
        }
    );
    assert_eq!(
        HashRange::parse_hex("0a0b-f0f").unwrap_err(),
        InvalidInput::NotAHashRange {
            text: "0a0b-f0f".to_owned(),
        }
    );
    assert_eq!(
        entry_bucket(0x3FFF, 0x4000, &[0x4000]).unwrap_err(),
        InvalidInput::Straddles {
            min: 0x3FFF,
            max: 0x4000,
            boundary: 0x4000,
            first: 0,
            last: 1,
        }
    );
    assert_eq!(
        canonical_bucket_hash(3, &[10, 20]).unwrap_err(),
        InvalidInput::NoSuchBucket { index: 3, count: 3 }
    );
    assert_eq!(
        EntryBucketSelector::new(&[10])
            .canonical_hash_of_bucket(-1)
            .unwrap_err(),
        InvalidInput::NoSuchBucket {
            index: -1,
            count: 2
        }
    );
}

#[test]
fn splits_and_ranges_that_do_not_tile_the_ring() {
    let tiling = |e: InvalidInput| match e {
        InvalidInput::Tiling(t) => t,
        other => panic!("not a tiling error: {other:?}"),
    };
    assert_eq!(
        tiling(validate_splits(&[5, 0x1_0000]).unwrap_err()),
        Tiling::SplitOutsideRing {
            index: 1,
            value: 0x1_0000,
        }
    );
    assert_eq!(
        tiling(validate_splits(&[1]).unwrap_err()),
        Tiling::FirstSplitTooLow { value: 1, min: 2 }
    );
    assert_eq!(
        tiling(validate_splits(&[9, 3]).unwrap_err()),
        Tiling::SplitsNotAscending {
            index: 1,
            value: 3,
            previous: 9,
        }
    );
    assert_eq!(
        tiling(validate_bucket_boundaries(&[]).unwrap_err()),
        Tiling::NoBuckets
    );
    assert_eq!(
        tiling(validate_bucket_boundaries(&[(0, 9), (11, 0xFFFF)]).unwrap_err()),
        Tiling::BoundaryMisplaced {
            index: 1,
            start: 11,
            end: 0xFFFF,
            expected: 10,
        }
    );
    assert_eq!(
        tiling(validate_bucket_boundaries(&[(0, 0x3FFF)]).unwrap_err()),
        Tiling::BoundariesShort { end: 0x3FFF }
    );
    assert_eq!(
        tiling(validate_bucket_boundaries(&[(0, 0), (1, 0xFFFF)]).unwrap_err()),
        Tiling::FirstBucketTooNarrow
    );
    let table = |ranges: &[(u64, i64, i64)]| {
        let segments = ranges
            .iter()
            .map(|&(segment_id, start, end)| SegmentRoute {
                segment_id,
                range: range(start, end),
                splits: Vec::new(),
            })
            .collect();
        RoutingTable::new(segments, Default::default())
    };
    assert_eq!(tiling(table(&[]).unwrap_err()), Tiling::NoSegments);
    assert_eq!(
        tiling(table(&[(1, 0, 10), (2, 10, 0xFFFF)]).unwrap_err()),
        Tiling::SegmentOverlaps {
            segment_id: 2,
            range: (10, 0xFFFF),
        }
    );
    assert_eq!(
        tiling(table(&[(1, 0, 10), (2, 12, 0xFFFF)]).unwrap_err()),
        Tiling::SegmentGap {
            segment_id: 2,
            range: (12, 0xFFFF),
        }
    );
    assert_eq!(
        tiling(table(&[(1, 0, 0x7FFF)]).unwrap_err()),
        Tiling::SegmentsShort { end: 0x7FFF }
    );
    assert_eq!(
        table(&[(1, 0, 10), (1, 11, 0xFFFF)]).unwrap_err(),
        InvalidInput::Duplicate(Duplicate::SegmentId { segment_id: 1 })
    );
    let assignments = [(range(0, 9), 1), (range(9, 19), 2)];
    assert_eq!(
        tiling(validate_assignments(&assignments, "after").unwrap_err()),
        Tiling::Overlapping {
            what: "after".to_owned(),
            index: 1,
            range: (9, 19),
            previous: (0, 9),
        }
    );
}

#[test]
fn calls_that_conflict_with_held_state() {
    let mut tracker = DrainingHashes::new();
    tracker.add_entry(1, 5).unwrap();
    assert_eq!(
        tracker.add_entry(2, 5).unwrap_err(),
        InvalidInput::Conflict(Conflict::Draining {
            hash: 5,
            owner: 1,
            consumer: 2,
        })
    );
    assert_eq!(
        keeps_hash((1, 2), 9, Some(8), 4).unwrap_err(),
        InvalidInput::Conflict(Conflict::HashChanged {
            position: (1, 2),
            consumer: 4,
            held: 8,
            hash: 9,
        })
    );
    assert_eq!(
        tracker.end_batch().unwrap_err(),
        InvalidInput::OutOfSequence {
            call: "end_batch",
            missing: "a matching start_batch",
        }
    );
}

#[test]
fn the_window_refuses_offsets_it_holds_and_full_consumers() {
    let limits = WindowLimits {
        max_per_consumer: 1,
        ..WindowLimits::default()
    };
    let mut w = InFlightWindow::new(limits, FailurePolicy::default()).unwrap();
    let (k, z) = (RoutingKey::new(b"k", true), RoutingKey::new(b"z", true));
    w.mark_dispatched(1, &k, 7, 0).unwrap();
    assert_eq!(
        w.mark_dispatched(2, &z, 7, 0).unwrap_err(),
        InvalidInput::Conflict(Conflict::ConsumerFull {
            consumer: 7,
            max_per_consumer: 1,
        })
    );
    assert_eq!(
        w.mark_dispatched(1, &k, 8, 0).unwrap_err(),
        InvalidInput::Duplicate(Duplicate::Offset {
            offset: 1,
            state: OffsetState::InFlight,
        })
    );
    assert!(matches!(
        w.mark_dispatched(3, &k, 8, 0).unwrap_err(),
        InvalidInput::Key(KeyConflict::Held {
            holder: 1,
            offset: 3,
            ..
        })
    ));
    w.push_blocked(4, &z).unwrap();
    assert_eq!(
        w.push_blocked(4, &z).unwrap_err(),
        InvalidInput::Duplicate(Duplicate::Offset {
            offset: 4,
            state: OffsetState::Queued,
        })
    );
    assert_eq!(
        w.on_skipped(1).unwrap_err(),
        InvalidInput::Conflict(Conflict::SkippedInFlight { offset: 1 })
    );
    assert_eq!(
        w.on_skipped(4).unwrap_err(),
        InvalidInput::Conflict(Conflict::SkippedQueued { offset: 4 })
    );
}

#[test]
fn dispatch_results_whose_parts_disagree() {
    let result = |consumer, held, draining, queued| Dispatched {
        consumer,
        held,
        draining,
        queued,
    };
    let cases = [
        (
            result(None, None, None, false),
            DispatchedConflict::DeliveredWithoutConsumer,
        ),
        (
            result(Some(1), None, None, true),
            DispatchedConflict::DeliveredQueued,
        ),
        (
            result(Some(1), Some(HoldReason::LookAheadLimit), None, false),
            DispatchedConflict::LookAheadTaken,
        ),
        (
            result(Some(1), Some(HoldReason::PendingAckRefused), None, false),
            DispatchedConflict::RefusedNotQueued,
        ),
        (
            result(Some(1), None, Some(2), false),
            DispatchedConflict::DrainerMismatch,
        ),
    ];
    for (dispatched, conflict) in cases {
        assert_eq!(
            dispatched.check().unwrap_err(),
            InvalidInput::Dispatched(conflict)
        );
    }
}

#[test]
fn consumers_names_and_filters() {
    let mut selector = EntryBucketSelector::new(&[]);
    assert!(matches!(
        invalid(Selector::add_consumer(&mut selector, 1, b"\xff")),
        InvalidInput::NotUtf8 {
            what: "consumer name",
            ..
        }
    ));
    let mut state = KeySharedConsumerState::new();
    let filters: Vec<Box<[u8]>> = vec![b"a".to_vec().into(), Box::new([])];
    assert_eq!(
        state.add_consumer(1, filters).unwrap_err(),
        InvalidInput::EmptyFilter.at(1)
    );
    state.add_consumer(1, vec![b"a".to_vec().into()]).unwrap();
    assert_eq!(
        state
            .add_consumer(1, vec![b"b".to_vec().into()])
            .unwrap_err(),
        InvalidInput::ConsumerExists {
            consumer: 1,
            status: "was already added",
        }
    );
}

#[test]
fn key_kinds_a_partitioner_does_not_take() {
    assert_eq!(
        Partitioner::Kafka.for_ints().unwrap_err(),
        InvalidInput::IntKeysUnsupported {
            partitioner: "kafka",
        }
    );
    let column = IntColumn {
        bits: 64,
        signed: false,
    };
    assert_eq!(
        column.is_int().unwrap_err(),
        InvalidInput::IntTooWide {
            bits: 64,
            signed: false,
        }
    );
}

#[test]
fn the_texts_name_what_went_wrong() {
    let texts = [
        (
            InvalidInput::TooSmall {
                what: "bucket budget",
                min: 0,
                value: -1,
            },
            "bucket budget must not be negative, got -1",
        ),
        (
            InvalidInput::LengthMismatch {
                names: &["segment_ids", "buckets", "offsets"],
                lengths: vec![2, 1, 2],
            },
            "segment_ids, buckets and offsets must be equally long, got 2, 1 and 2",
        ),
        (
            InvalidInput::NoTracker {
                call: "register_draining_hashes",
            },
            "register_draining_hashes needs a map created with a tracker",
        ),
        (
            InvalidInput::ReservedHash {
                position: Some((1, 2)),
            },
            "sticky key hash is missing (0) for 1:2",
        ),
        (
            Duplicate::Offset {
                offset: 3,
                state: OffsetState::Done,
            }
            .into(),
            "offset 3 is already acked, skipped or behind the cursor",
        ),
        (
            InvalidInput::IntKeysUnsupported {
                partitioner: "kafka",
            },
            "partitioner \"kafka\" takes str or bytes keys; int keys are for \"iceberg:bucket\" \
             and \"spark:bucket\"",
        ),
    ];
    for (error, text) in texts {
        assert_eq!(error.to_string(), text);
    }
}
