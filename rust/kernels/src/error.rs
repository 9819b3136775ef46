use thiserror::Error;

use crate::routing_key::RoutingKey;

/// An argument a kernel cannot work with. The variants a binding words in its own language
/// carry their parts; the others say which argument was wrong and why, in Rust's terms.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidInput {
    #[error("{0}")]
    Message(String),
    /// `what` (an argument, or an item of one) is outside `[0, max]`.
    #[error("{what} = {value} is outside [0, {max}]")]
    OutOfRange { what: String, value: i128, max: u64 },
    /// Key `index` of a batch is null and no stand-in key was given for nulls.
    #[error("key {index} is null and no stand-in key was given")]
    NullKey { index: usize },
    /// A message's key conflicts with what the in-flight window holds for it.
    #[error(transparent)]
    Key(#[from] KeyConflict),
    /// Consumer `consumer` is already held; `status` says how ("was already added", "is
    /// already connected").
    #[error("consumer {consumer} {status}")]
    ConsumerExists { consumer: u64, status: &'static str },
    /// Item `index` of a batch is wrong; the caller, who knows the batch's name, says which.
    #[error("item {index}: {error}")]
    Item {
        index: usize,
        error: Box<InvalidInput>,
    },
}

impl InvalidInput {
    pub fn new(message: impl Into<String>) -> Self {
        Self::Message(message.into())
    }

    /// This error, as the error of item `index` of a batch.
    pub fn at(self, index: usize) -> Self {
        Self::Item {
            index,
            error: Box::new(self),
        }
    }
}

/// What the in-flight window refuses about a message's key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyConflict {
    /// The key is held by an in-flight message: the new one must queue behind it.
    #[error("key {key} is held by offset {holder}; offset {offset} must queue behind it")]
    Held {
        key: RoutingKey,
        holder: u64,
        offset: u64,
    },
    /// Older messages of the key are queued: the new one must queue behind them.
    #[error("older messages of key {key} are queued; offset {offset} must queue behind them")]
    Queued { key: RoutingKey, offset: u64 },
    /// The offset was taken from the queue with another key than the one given now.
    #[error("offset {offset} was taken with key {held}, not {key}")]
    OtherKey {
        offset: u64,
        held: RoutingKey,
        key: RoutingKey,
    },
}

pub type KernelResult<T> = Result<T, InvalidInput>;

/// Something a stateful kernel was asked about that it does not hold; Python sees a KeyError
/// (`keyshared.errors.UnknownConsumer` for a consumer, `NotFound` otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NotFound {
    /// A consumer the kernel does not hold; `status` is what it would be if held
    /// ("connected", "in the state").
    #[error("consumer {consumer} is not {status}")]
    Consumer { consumer: u64, status: &'static str },
    /// A cursor's bucket that is not open.
    #[error("bucket {bucket} of segment {segment_id} is not open")]
    Bucket { segment_id: u64, bucket: u32 },
    /// Item `index` of a batch names something the kernel does not hold.
    #[error("[{index}]: {error}")]
    Item { index: usize, error: Box<NotFound> },
}

impl NotFound {
    /// This error, as the error of item `index` of a batch.
    pub fn at(self, index: usize) -> Self {
        Self::Item {
            index,
            error: Box::new(self),
        }
    }

    /// Whether what is missing is a consumer.
    pub fn is_consumer(&self) -> bool {
        match self {
            Self::Consumer { .. } => true,
            Self::Bucket { .. } => false,
            Self::Item { error, .. } => error.is_consumer(),
        }
    }
}

/// A failure of a stateful kernel: bad input, or a key it does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(transparent)]
    NotFound(#[from] NotFound),
}

pub type StateResult<T> = Result<T, StateError>;
