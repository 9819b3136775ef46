use thiserror::Error;

/// An argument a kernel cannot work with; the message says which one and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

impl InvalidInput {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

pub type KernelResult<T> = Result<T, InvalidInput>;

/// Something a stateful kernel was asked about that it does not hold (a consumer, a
/// checkpoint); Python sees a KeyError.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// A failure of a stateful kernel: bad input, or a key it does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(transparent)]
    NotFound(#[from] NotFound),
}

pub type StateResult<T> = Result<T, StateError>;
