//! Key_Shared routing and policy kernels in plain Rust: no Python types, unit-tested by
//! `cargo test`. The keyshared Python package is a thin PyO3 layer over this crate.

#![deny(missing_docs)]

pub mod buckets;
pub mod cursor;
pub mod danube_ring;
pub mod dispatch;
pub mod draining;
pub mod entry_bucket;
/// The kernels' typed errors: [`InvalidInput`](error::InvalidInput) for an argument a kernel
/// cannot work with, one variant per kind of mistake, [`NotFound`](error::NotFound) for
/// something a stateful kernel does not hold, and [`StateError`](error::StateError), either
/// of them.
pub mod error;
pub mod handoff;
pub mod hashing;
pub mod impacted;
pub mod jdk_utf8;
pub mod keys;
pub mod lanes;
pub mod parallel;
pub mod partitioners;
pub mod pending_acks;
pub mod redelivery;
pub mod ring;
pub mod routing;
pub mod routing_key;
pub mod sorted_hashes;
pub mod system_hashes;
#[cfg(test)]
mod test_rng;
pub mod window;

/// The crate README's examples, compiled and run by `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
