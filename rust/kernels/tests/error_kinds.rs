//! What a binding reads from a kernel error to raise it: its kind, category, argument and
//! index.

use std::collections::HashSet;

use keyshared_kernels::buckets::{ring_hash, validate_splits};
use keyshared_kernels::error::{kinds, ErrorCategory, InvalidInput, NotFound, StateError};
use keyshared_kernels::partitioners::NumPartitions;

fn parts(e: &InvalidInput) -> (&'static str, ErrorCategory, Option<&str>, Option<usize>) {
    (e.kind(), e.category(), e.argument(), e.index())
}

#[test]
fn a_variant_gives_its_kind_and_where_it_was_wrong() {
    let e = ring_hash(0x10000, "end").unwrap_err();
    assert_eq!(
        parts(&e),
        ("not_ring_hash", ErrorCategory::Value, Some("end"), None)
    );
    let e = NumPartitions::new(0, "num_partitions").unwrap_err();
    assert_eq!(
        parts(&e),
        (
            "out_of_range",
            ErrorCategory::Value,
            Some("num_partitions"),
            None
        )
    );
    let e = validate_splits(&[0x8000, 0x10]).unwrap_err();
    assert_eq!(
        parts(&e),
        (
            "splits_not_ascending",
            ErrorCategory::Value,
            Some("splits"),
            Some(1)
        )
    );
    let e = InvalidInput::NullKey { index: 4 };
    assert_eq!(
        parts(&e),
        ("null_key", ErrorCategory::Value, Some("keys"), Some(4))
    );
    let e = InvalidInput::IntTooWide {
        bits: 64,
        signed: false,
    };
    assert_eq!(parts(&e), ("int_too_wide", ErrorCategory::Type, None, None));
}

#[test]
fn an_item_of_a_batch_has_the_kind_of_its_error_and_its_index() {
    let e = ring_hash(-1, "hash").unwrap_err().at(3);
    assert_eq!(
        parts(&e),
        ("not_ring_hash", ErrorCategory::Value, Some("hash"), Some(3))
    );
    let e = InvalidInput::EmptyFilter.at(1);
    assert_eq!(
        parts(&e),
        ("empty_filter", ErrorCategory::Value, None, Some(1))
    );
}

#[test]
fn a_description_is_not_an_argument_and_a_path_names_its_batch() {
    let e = InvalidInput::TooSmall {
        what: "bucket count",
        min: 1,
        value: 0,
    };
    assert_eq!((e.argument(), e.index()), (None, None));
    let e = InvalidInput::OutOfRange {
        what: "acks[2].batch_size".to_owned(),
        value: 0,
        min: 1,
        max: 10,
    };
    assert_eq!((e.argument(), e.index()), (Some("acks"), Some(2)));
}

#[test]
fn what_is_missing_is_a_consumer_or_not() {
    let consumer = NotFound::Consumer {
        consumer: 7,
        status: "connected",
    };
    let bucket = NotFound::Bucket {
        segment_id: 1,
        bucket: 0,
    };
    assert_eq!(consumer.kind(), "unknown_consumer");
    assert_eq!(consumer.category(), ErrorCategory::UnknownConsumer);
    assert_eq!(bucket.kind(), "unknown_bucket");
    assert_eq!(bucket.category(), ErrorCategory::NotFound);
    let e = StateError::from(bucket.at(5));
    assert_eq!(
        (e.kind(), e.category(), e.index()),
        ("unknown_bucket", ErrorCategory::NotFound, Some(5))
    );
}

#[test]
fn every_kind_is_listed_once_and_no_wrapper_is() {
    let all = kinds();
    assert_eq!(all.len(), all.iter().collect::<HashSet<_>>().len());
    for wrapper in [
        "item",
        "tiling",
        "duplicate",
        "conflict",
        "key",
        "dispatched",
    ] {
        assert!(!all.contains(&wrapper), "{wrapper}");
    }
    for kind in [
        "null_key",
        "splits_not_ascending",
        "duplicate_offset",
        "key_held",
    ] {
        assert!(all.contains(&kind), "{kind}");
    }
}
