//! Plain-Rust kernels: no Python types, unit-tested by `cargo test`.

pub mod buckets;
pub mod error;
pub mod hashing;
pub mod keys;
pub mod murmur;
pub mod parallel;
pub mod routing;
