use std::fmt;
use std::str::Utf8Error;

use strum::{IntoStaticStr, VariantNames};
use thiserror::Error;

/// A message's position, `(ledger_id, entry_id)`.
type Position = (i64, i64);

/// A hash range's `(start, end)`, both ends inclusive, shown in hex as `0a0b-f0f0`.
type Range = (u16, u16);

/// A routing key's bytes, and whether it is text (else binary).
type Key = (Box<[u8]>, bool);

/// An argument a kernel cannot work with: one variant per kind of mistake, carrying its parts
/// so that a caller can match on what went wrong. The text (`Display`) is the sentence a
/// binding shows; the bindings word a few variants in their own language (bounds, batches).
/// Its [`kind`](Self::kind) is the variant's name in snake_case, or the wrapped error's.
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum InvalidInput {
    /// `what` (an argument, or an item of one) is outside `[min, max]`.
    #[error("{what} = {value} is outside [{min}, {max}]")]
    OutOfRange {
        /// The argument's name, an item's (`offsets[3]`), or what the value is (`segment id`).
        what: String,
        /// The value given, wide enough for any integer argument.
        value: i128,
        /// The least allowed value, inclusive.
        min: i64,
        /// The greatest allowed value, inclusive.
        max: u64,
    },
    /// `what` is below its least allowed value `min` (0: it must not be negative).
    #[error("{what} {}, got {value}", at_least(*min))]
    TooSmall {
        /// The argument's name, or what it counts.
        what: &'static str,
        /// The least allowed value, inclusive.
        min: i64,
        /// The value given.
        value: i64,
    },
    /// `what` (`value`) is above `limit` (`limit_value`), which bounds it.
    #[error("{what} ({value}) must not exceed {limit} ({limit_value})")]
    Exceeds {
        /// The argument's name, or what it counts.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The name of the argument or constant that bounds it.
        limit: &'static str,
        /// The bound's value, which `value` may equal.
        limit_value: u64,
    },
    /// `what` is not a hash of the 16-bit ring `[0, 0xffff]`.
    #[error("{what} must be a 16-bit hash in [0, 0xffff], got {value}")]
    NotRingHash {
        /// The argument's name, or an item's.
        what: String,
        /// The value given.
        value: i64,
    },
    /// A sticky key hash of 0, which means "not set", where a hash is required; `position` is
    /// the message's, where the hash belongs to one.
    #[error("{}", reserved_hash(*position))]
    ReservedHash {
        /// The message's `(ledger_id, entry_id)`, where the hash is a message's.
        position: Option<Position>,
    },
    /// `what`, a message position, has a negative ledger id or entry id.
    #[error("{what} ({}, {}) must have non-negative ledger_id and entry_id", position.0, position.1)]
    NegativePosition {
        /// The argument's name.
        what: &'static str,
        /// The `(ledger_id, entry_id)` given.
        position: Position,
    },
    /// Arguments read in step (item `i` of each belongs together) have `lengths` that differ;
    /// `names` are the arguments, in the same order.
    #[error("{} must be equally long, got {}", and_list(names), and_list(lengths))]
    LengthMismatch {
        /// The arguments' names.
        names: &'static [&'static str],
        /// Their lengths, one per name.
        lengths: Vec<usize>,
    },
    /// A hash range whose start (argument `start`) is above its end (argument `end`).
    #[error("{start} ({start_hash:#06x}) must not be above {end} ({end_hash:#06x})")]
    ReversedRange {
        /// The name of the argument that gives the start.
        start: &'static str,
        /// The start given.
        start_hash: u16,
        /// The name of the argument that gives the end.
        end: &'static str,
        /// The end given, below `start_hash`.
        end_hash: u16,
    },
    /// A range of one hash, which has no halves.
    #[error("{} has size 1 and cannot be split", hex(*range))]
    Unsplittable {
        /// The range, `(start, end)` with `start == end`.
        range: Range,
    },
    /// Two ranges to merge that do not touch end to start.
    #[error("{} and {} are not adjacent and cannot be merged", hex(*first), hex(*second))]
    NotAdjacent {
        /// The range merged into, `(start, end)` inclusive.
        first: Range,
        /// The range merged with it, `(start, end)` inclusive.
        second: Range,
    },
    /// Text that is not a hash range in hex form (`"0a0b-f0f0"`).
    #[error("{text:?} is not a hash range like \"0a0b-f0f0\"")]
    NotAHashRange {
        /// The text given.
        text: String,
    },
    /// An entry's hash range `[min, max]` spans buckets `first` and `last`, cut at `boundary`:
    /// no one bucket holds the entry.
    #[error(
        "entry range {min:04x}-{max:04x} straddles the bucket boundary at {boundary:#06x} \
         (buckets {first} and {last})"
    )]
    Straddles {
        /// The entry's `entry_hash_min`, the least hashB of its messages.
        min: u16,
        /// The entry's `entry_hash_max`, the greatest hashB of its messages.
        max: u16,
        /// The first split point in `(min, max]`: the start of bucket `first + 1`.
        boundary: u16,
        /// The bucket of `min`.
        first: u32,
        /// The bucket of `max`.
        last: u32,
    },
    /// Bucket `index` of a layout of `count` buckets (numbered `0..count`).
    #[error("bucket index {index} is outside [0, {}] for {count} buckets", count - 1)]
    NoSuchBucket {
        /// The bucket index given.
        index: i64,
        /// How many buckets the layout has.
        count: usize,
    },
    /// Split points or ranges that do not cut the 16-bit ring as they must.
    #[error(transparent)]
    #[strum(transparent)]
    Tiling(#[from] Tiling),
    /// Something given, or added, a second time.
    #[error(transparent)]
    #[strum(transparent)]
    Duplicate(#[from] Duplicate),
    /// A call that conflicts with what the kernel holds.
    #[error(transparent)]
    #[strum(transparent)]
    Conflict(#[from] Conflict),
    /// A message's key conflicts with what the in-flight window holds for it.
    #[error(transparent)]
    #[strum(transparent)]
    Key(#[from] KeyConflict),
    /// A dispatch result whose parts disagree.
    #[error(transparent)]
    #[strum(transparent)]
    Dispatched(#[from] DispatchedConflict),
    /// `call` came without `missing`, the call it closes.
    #[error("{call} without {missing}")]
    OutOfSequence {
        /// The call made (`"end_batch"`, ...).
        call: &'static str,
        /// The call it needs first, as the message words it (`"a matching start_batch"`).
        missing: &'static str,
    },
    /// `call` works on draining hashes, and the map was created without a tracker of them.
    #[error("{call} needs a map created with a tracker")]
    NoTracker {
        /// The call made.
        call: &'static str,
    },
    /// Consumer `consumer` is already held; `status` says how ("was already added", "is
    /// already connected").
    #[error("consumer {consumer} {status}")]
    ConsumerExists {
        /// The consumer's id.
        consumer: u64,
        /// How it is held, as the end of the message's sentence.
        status: &'static str,
    },
    /// A name (`what`) that is not UTF-8.
    #[error("the {what} is not UTF-8: {error}")]
    NotUtf8 {
        /// What the name is (`"consumer name"`, ...).
        what: &'static str,
        /// Where the bytes stop being UTF-8.
        error: Utf8Error,
    },
    /// An empty key filter, which would match only the empty key.
    #[error("an empty filter would match only the empty key")]
    EmptyFilter,
    /// The dead-letter poison policy without a topic to publish to (empty or blank).
    #[error("the \"dead_letter\" poison policy needs a topic to publish to")]
    NoDeadLetterTopic,
    /// Int keys for a partitioner, by its name, that hashes only str or bytes keys.
    #[error(
        "partitioner {partitioner:?} takes str or bytes keys; int keys are for \"iceberg:bucket\" \
         and \"spark:bucket\""
    )]
    IntKeysUnsupported {
        /// The partitioner's name (`"kafka"`, ...).
        partitioner: &'static str,
    },
    /// Int keys of `bits` bits (`signed` or not) that do not fit Spark's long.
    #[error("{}int{bits} keys do not fit a long; use int32 or int64 keys", if *signed { "" } else { "u" })]
    IntTooWide {
        /// The keys' width in bits.
        bits: u32,
        /// Whether the keys are signed.
        signed: bool,
    },
    /// Key `index` of a batch is null and no stand-in key was given for nulls.
    #[error("key {index} is null and no stand-in key was given")]
    NullKey {
        /// The null key's index in the batch.
        index: usize,
    },
    /// Item `index` of a batch is wrong; the caller, who knows the batch's name, says which.
    #[error("item {index}: {error}")]
    Item {
        /// The item's index in the batch.
        index: usize,
        /// What is wrong with the item.
        error: Box<InvalidInput>,
    },
}

impl InvalidInput {
    /// This error, as the error of item `index` of a batch.
    pub fn at(self, index: usize) -> Self {
        Self::Item {
            index,
            error: Box::new(self),
        }
    }

    /// A stable snake_case name of the mistake: the variant's, or for a wrapper (an item of
    /// a batch, a tiling, a duplicate, a conflict) the wrapped one's.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Item { error, .. } => error.kind(),
            _ => self.into(),
        }
    }

    /// Which kind of exception the mistake is: a value the call cannot take, unless the
    /// value's type is what is wrong.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::IntKeysUnsupported { .. } | Self::IntTooWide { .. } => ErrorCategory::Type,
            Self::Item { error, .. } => error.category(),
            _ => ErrorCategory::default(),
        }
    }

    /// The argument that was wrong, where the kernel knows its Python name.
    pub fn argument(&self) -> Option<&str> {
        match self {
            Self::OutOfRange { what, .. } | Self::NotRingHash { what, .. } => named(what).0,
            Self::TooSmall { what, .. }
            | Self::Exceeds { what, .. }
            | Self::NegativePosition { what, .. } => named(what).0,
            Self::ReversedRange { start, .. } => Some(start),
            Self::Tiling(tiling) => tiling.argument(),
            Self::NullKey { .. } => Some("keys"),
            Self::Item { error, .. } => error.argument(),
            _ => None,
        }
    }

    /// The index of the wrong item in a batch argument, where the mistake is one item's.
    pub fn index(&self) -> Option<usize> {
        match self {
            Self::OutOfRange { what, .. } | Self::NotRingHash { what, .. } => named(what).1,
            Self::TooSmall { what, .. }
            | Self::Exceeds { what, .. }
            | Self::NegativePosition { what, .. } => named(what).1,
            Self::Tiling(tiling) => tiling.index(),
            Self::NullKey { index } | Self::Item { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// The Python exception class a kernel error raises, by what is wrong; bindings map each to
/// one class, so that no call site chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorCategory {
    /// A value the call cannot take (a ValueError).
    #[default]
    Value,
    /// A value of a type the call does not take (a TypeError).
    Type,
    /// Something a stateful kernel does not hold (a KeyError).
    NotFound,
    /// A consumer a stateful kernel does not hold (a KeyError).
    UnknownConsumer,
}

/// `(argument, index)` of `what`, which a kernel writes as `name`, `name[index]` or
/// `name[index].field`; no argument where `what` describes rather than names ("bucket
/// count").
fn named(what: &str) -> (Option<&str>, Option<usize>) {
    let (name, rest) = what.split_once('[').unwrap_or((what, ""));
    let is_name = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let index = rest.split_once(']').and_then(|(i, _)| i.parse().ok());
    match is_name {
        true => (Some(name), index),
        false => (None, None),
    }
}

/// Every kind an error of a kernel can have: the variants' names but those of the variants
/// that wrap another error, whose kind is the wrapped one's.
pub fn kinds() -> Vec<&'static str> {
    const WRAPPERS: [&str; 7] = [
        "item",
        "tiling",
        "duplicate",
        "conflict",
        "key",
        "dispatched",
        "unknown_item",
    ];
    InvalidInput::VARIANTS
        .iter()
        .chain(Tiling::VARIANTS)
        .chain(Duplicate::VARIANTS)
        .chain(Conflict::VARIANTS)
        .chain(KeyConflict::VARIANTS)
        .chain(DispatchedConflict::VARIANTS)
        .chain(NotFound::VARIANTS)
        .filter(|kind| !WRAPPERS.contains(kind))
        .copied()
        .collect()
}

fn at_least(min: i64) -> String {
    match min {
        0 => "must not be negative".to_owned(),
        _ => format!("must be at least {min}"),
    }
}

fn reserved_hash(position: Option<Position>) -> String {
    match position {
        Some((ledger_id, entry_id)) => {
            format!("sticky key hash is missing (0) for {ledger_id}:{entry_id}")
        }
        None => "sticky key hash must not be 0, which means \"not set\"".to_owned(),
    }
}

fn hex((start, end): Range) -> String {
    format!("{start:04x}-{end:04x}")
}

/// `a, b and c`.
fn and_list<T: fmt::Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => items.concat(),
    }
}

/// Why split points or ranges do not cut the 16-bit ring as they must.
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Tiling {
    /// Split point `index` is outside `[1, 0xffff]`.
    #[error("splits[{index}] = {value} is outside [1, 0xffff]")]
    SplitOutsideRing {
        /// The split point's index.
        index: usize,
        /// The split point given.
        value: i64,
    },
    /// The first split point leaves bucket 0 narrower than `[0, 1]`, so that it cannot hold
    /// its canonical hash 1; `min` is the least first split that can.
    #[error(
        "splits[0] = {value} leaves bucket 0 narrower than [0, 1]: the first split must be at \
         least {min}"
    )]
    FirstSplitTooLow {
        /// The first split point given.
        value: u16,
        /// The least first split point allowed.
        min: u16,
    },
    /// Split point `index` is not above the one before it.
    #[error("splits must be strictly ascending: splits[{index}] = {value} follows {previous}")]
    SplitsNotAscending {
        /// The split point's index.
        index: usize,
        /// The split point given.
        value: u16,
        /// The split point before it, at `index - 1`, at or above `value`.
        previous: u16,
    },
    /// Entry-bucket boundaries with no bucket.
    #[error("entry-bucket boundaries must declare at least one bucket")]
    NoBuckets,
    /// Entry-bucket range `index`, `[start, end]`, does not start at `expected` (where the one
    /// before ends), or ends before it starts or past the ring.
    #[error(
        "entry-bucket boundaries must be ascending, contiguous and start at 0: ranges[{index}] \
         is [{start}, {end}] where start {expected} was expected"
    )]
    BoundaryMisplaced {
        /// The range's index.
        index: usize,
        /// The range's start given, inclusive.
        start: i64,
        /// The range's end given, inclusive.
        end: i64,
        /// The start it must have: 0 for the first range, else one past the end before it.
        expected: i64,
    },
    /// Entry-bucket ranges that end at `end`, short of the ring's end 0xffff.
    #[error("entry-bucket boundaries must tile the 16-bit ring: the last range ends at {end}")]
    BoundariesShort {
        /// The last range's end, inclusive.
        end: i64,
    },
    /// Entry-bucket 0 narrower than `[0, 1]`, so that it cannot hold its canonical hash 1.
    #[error("entry-bucket 0 must span at least [0, 1] to hold the canonical hash 1")]
    FirstBucketTooNarrow,
    /// No active segment.
    #[error("active segments must tile 0000-ffff, got none")]
    NoSegments,
    /// Active segment `segment_id` starts before the one before it ends.
    #[error("active segments must tile 0000-ffff: segment {segment_id} ({}) overlaps the one before it", hex(*range))]
    SegmentOverlaps {
        /// The segment's id.
        segment_id: u64,
        /// The segment's range, `(start, end)` inclusive.
        range: Range,
    },
    /// Active segment `segment_id` starts past the hash after the one before it.
    #[error("active segments must tile 0000-ffff: segment {segment_id} ({}) leaves a gap before it", hex(*range))]
    SegmentGap {
        /// The segment's id.
        segment_id: u64,
        /// The segment's range, `(start, end)` inclusive.
        range: Range,
    },
    /// Active segments that end at `end`, short of 0xffff.
    #[error("active segments must tile 0000-ffff, but they end at {end:04x}")]
    SegmentsShort {
        /// The last segment's end, inclusive.
        end: u16,
    },
    /// Range assignments (argument `what`) not sorted by start, or overlapping: item `index`,
    /// `range`, does not start past `previous`.
    #[error(
        "{what} must be sorted and non-overlapping: {what}[{index}] = {} follows {}",
        hex(*range),
        hex(*previous)
    )]
    Overlapping {
        /// The argument's name.
        what: String,
        /// The range's index.
        index: usize,
        /// The range at `index`, `(start, end)` inclusive.
        range: Range,
        /// The range before it, `(start, end)` inclusive.
        previous: Range,
    },
}

impl Tiling {
    /// The argument the split points or ranges came as, where the kernel names it.
    pub fn argument(&self) -> Option<&str> {
        match self {
            Self::SplitOutsideRing { .. }
            | Self::FirstSplitTooLow { .. }
            | Self::SplitsNotAscending { .. } => Some("splits"),
            Self::Overlapping { what, .. } => named(what).0,
            _ => None,
        }
    }

    /// The index of the wrong split point or range.
    pub fn index(&self) -> Option<usize> {
        match self {
            Self::SplitOutsideRing { index, .. }
            | Self::SplitsNotAscending { index, .. }
            | Self::BoundaryMisplaced { index, .. }
            | Self::Overlapping { index, .. } => Some(*index),
            Self::FirstSplitTooLow { .. } => Some(0),
            _ => None,
        }
    }
}

/// Something given, or added, a second time.
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case", prefix = "duplicate_")]
pub enum Duplicate {
    /// A read's entry at `position`, given first at index `first`.
    #[error(
        "position ({}, {}) is given twice (first at index {first}); a read holds each entry once",
        position.0, position.1
    )]
    Position {
        /// The entry's `(ledger_id, entry_id)`.
        position: Position,
        /// The index the position is first given at.
        first: usize,
    },
    /// A segment id that two segments of a layout share.
    #[error("segment id {segment_id} appears more than once")]
    SegmentId {
        /// The shared id.
        segment_id: u64,
    },
    /// A cursor's bucket opened while open.
    #[error("bucket {bucket} of segment {segment_id} is already open")]
    OpenBucket {
        /// The bucket's segment.
        segment_id: u64,
        /// The bucket's index in its segment.
        bucket: u32,
    },
    /// An offset added to the in-flight window, which already holds it as `state`.
    #[error("offset {offset} is already {}", state.held())]
    Offset {
        /// The offset added.
        offset: u64,
        /// What the window already holds it as.
        state: OffsetState,
    },
}

/// What the in-flight window holds an offset as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetState {
    /// Dispatched and not yet acked.
    InFlight,
    /// In the blocked queue, or taken from it and not yet dispatched.
    Queued,
    /// Acked, skipped, or behind the cursor.
    Done,
}

impl OffsetState {
    fn held(self) -> &'static str {
        match self {
            Self::InFlight => "in flight",
            Self::Queued => "in the blocked queue",
            Self::Done => "acked, skipped or behind the cursor",
        }
    }
}

/// A call that conflicts with what a kernel holds.
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Conflict {
    /// Hash `hash` drains on consumer `owner`, and was to be added for consumer `consumer`.
    #[error(
        "consumer {owner} is already draining hash {hash}; it cannot be used for consumer \
         {consumer}"
    )]
    Draining {
        /// The draining sticky key hash.
        hash: u16,
        /// The consumer it drains on.
        owner: u64,
        /// The consumer it was to be added for.
        consumer: u64,
    },
    /// The reference count of draining hash `hash` is at its maximum.
    #[error("the reference count of hash {hash} would overflow")]
    RefCountOverflow {
        /// The draining sticky key hash.
        hash: u16,
    },
    /// An entry pending on consumer `consumer` under `held`, given now with another `hash`.
    #[error(
        "position ({}, {}) is pending on consumer {consumer} under sticky key hash {held}, \
         not {hash}; an entry keeps its hash",
        position.0, position.1
    )]
    HashChanged {
        /// The entry's `(ledger_id, entry_id)`.
        position: Position,
        /// The consumer it is pending on.
        consumer: u64,
        /// The sticky key hash it is pending under.
        held: u16,
        /// The sticky key hash given now.
        hash: u16,
    },
    /// Consumer `consumer` has `max_per_consumer` messages in flight, its most.
    #[error(
        "consumer {consumer} already has max_per_consumer ({max_per_consumer}) messages in \
         flight"
    )]
    ConsumerFull {
        /// The consumer's id.
        consumer: u64,
        /// The window's cap of in-flight messages per consumer.
        max_per_consumer: usize,
    },
    /// An offset skipped while it is in flight.
    #[error("offset {offset} is in flight; ack it, or remove_entry it first")]
    SkippedInFlight {
        /// The offset skipped.
        offset: u64,
    },
    /// An offset skipped while it is queued.
    #[error("offset {offset} is queued; take_unblocked or drain_blocked_for_key it first")]
    SkippedQueued {
        /// The offset skipped.
        offset: u64,
    },
}

/// How the parts of a dispatch result disagree; the parts are named as the Python
/// `DispatchResult` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum DispatchedConflict {
    /// A delivered entry (no hold reason) without its consumer.
    #[error("consumer_id must be set for a delivered entry (held=None)")]
    DeliveredWithoutConsumer,
    /// A delivered entry (no hold reason) queued for redelivery.
    #[error("queued_for_redelivery must be False for a delivered entry (held=None)")]
    DeliveredQueued,
    /// An entry held by the look-ahead limit with a consumer or queued: it was not taken.
    #[error(
        "an entry held for LOOK_AHEAD_LIMIT is not taken: consumer_id must be None and \
         queued_for_redelivery False"
    )]
    LookAheadTaken,
    /// An entry refused by a consumer's pending-ack map without the consumer or not queued.
    #[error(
        "an entry held for PENDING_ACK_REFUSED was refused by a consumer's map and queued: \
         consumer_id must be set and queued_for_redelivery True"
    )]
    RefusedNotQueued,
    /// A draining consumer without the draining hold reason, or that reason without one.
    #[error("draining_consumer_id must be set for held=DRAINING, and only for it")]
    DrainerMismatch,
}

/// What the in-flight window refuses about a message's key.
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case", prefix = "key_")]
pub enum KeyConflict {
    /// The key is held by an in-flight message: the new one must queue behind it.
    #[error(
        "key {} is held by offset {holder}; offset {offset} must queue behind it",
        key_text(&key.0, key.1)
    )]
    Held {
        /// The key's bytes, and whether it is text.
        key: Key,
        /// The offset of the in-flight message that holds the key.
        holder: u64,
        /// The new message's offset.
        offset: u64,
    },
    /// Older messages of the key are queued: the new one must queue behind them.
    #[error(
        "older messages of key {} are queued; offset {offset} must queue behind them",
        key_text(&key.0, key.1)
    )]
    Queued {
        /// The key's bytes, and whether it is text.
        key: Key,
        /// The new message's offset.
        offset: u64,
    },
    /// The offset was taken from the queue with another key than the one given now.
    #[error(
        "offset {offset} was taken with key {}, not {}",
        key_text(&held.0, held.1),
        key_text(&key.0, key.1)
    )]
    OtherKey {
        /// The message's offset.
        offset: u64,
        /// The key it was taken with: its bytes, and whether it is text.
        held: Key,
        /// The key given now: its bytes, and whether it is text.
        key: Key,
    },
}

/// A routing key as errors and `RoutingKey` show it: a text key as a quoted string, a binary
/// key as escaped bytes.
pub(crate) fn key_text(bytes: &[u8], text: bool) -> String {
    match (text, std::str::from_utf8(bytes)) {
        (true, Ok(s)) => format!("{s:?}"),
        _ => format!("bytes \"{}\"", bytes.escape_ascii()),
    }
}

/// The result of a kernel that fails only on bad input: its value, or what was wrong.
pub type KernelResult<T> = Result<T, InvalidInput>;

/// Something a stateful kernel was asked about that it does not hold; Python sees a KeyError
/// (`keyshared.errors.UnknownConsumer` for a consumer, `NotFound` otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Error, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case", prefix = "unknown_")]
pub enum NotFound {
    /// A consumer the kernel does not hold; `status` is what it would be if held
    /// ("connected", "in the state").
    #[error("consumer {consumer} is not {status}")]
    Consumer {
        /// The consumer's id.
        consumer: u64,
        /// What it would be if held, as the end of the message's sentence.
        status: &'static str,
    },
    /// A cursor's bucket that is not open.
    #[error("bucket {bucket} of segment {segment_id} is not open")]
    Bucket {
        /// The bucket's segment.
        segment_id: u64,
        /// The bucket's index in its segment.
        bucket: u32,
    },
    /// Item `index` of a batch names something the kernel does not hold.
    #[error("[{index}]: {error}")]
    Item {
        /// The item's index in the batch.
        index: usize,
        /// What the item names that is missing.
        error: Box<NotFound>,
    },
}

impl NotFound {
    /// This error, as the error of item `index` of a batch.
    pub fn at(self, index: usize) -> Self {
        Self::Item {
            index,
            error: Box::new(self),
        }
    }

    /// As [`InvalidInput::kind`].
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Item { error, .. } => error.kind(),
            _ => self.into(),
        }
    }

    /// A missing consumer, or something else missing.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::Consumer { .. } => ErrorCategory::UnknownConsumer,
            Self::Bucket { .. } => ErrorCategory::NotFound,
            Self::Item { error, .. } => error.category(),
        }
    }

    /// The index of the item of a batch that names what is missing.
    pub fn index(&self) -> Option<usize> {
        match self {
            Self::Item { index, .. } => Some(*index),
            _ => None,
        }
    }
}

/// A failure of a stateful kernel: bad input, or a key it does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    /// An argument the kernel cannot work with (a ValueError or TypeError in Python).
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// Something the kernel was asked about that it does not hold (a KeyError in Python).
    #[error(transparent)]
    NotFound(#[from] NotFound),
}

impl StateError {
    /// The snake_case name of the mistake, the wrapped error's.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Invalid(e) => e.kind(),
            Self::NotFound(e) => e.kind(),
        }
    }

    /// Which Python exception class the mistake maps to, the wrapped error's.
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::Invalid(e) => e.category(),
            Self::NotFound(e) => e.category(),
        }
    }

    /// The argument that was wrong, where bad input names one.
    pub fn argument(&self) -> Option<&str> {
        match self {
            Self::Invalid(e) => e.argument(),
            Self::NotFound(_) => None,
        }
    }

    /// The wrong item's index in a batch argument, where there is one.
    pub fn index(&self) -> Option<usize> {
        match self {
            Self::Invalid(e) => e.index(),
            Self::NotFound(e) => e.index(),
        }
    }
}

/// The result of a stateful kernel: its value, bad input, or a key it does not hold.
pub type StateResult<T> = Result<T, StateError>;
