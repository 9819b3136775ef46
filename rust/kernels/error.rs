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
