//! keyshared's Python module: the PyO3 layer over the `keyshared-kernels` crate. It converts
//! arguments, releases the GIL around the work and turns kernel errors into Python exceptions.
//!
//! Its Python docs are written once, in `python/keyshared/_core.pyi`: build.rs copies each
//! docstring of the stub to `OUT_DIR`, and an item takes its own with `stub_doc!`.

/// The docstring the stub `python/keyshared/_core.pyi` gives `$item` (`"name"`, `"Class.name"`,
/// or `"_core"` for the module), for a `#[doc = ...]` attribute. build.rs fails the build,
/// naming the item, when the stub has none. A macro that writes a method into several classes
/// names it `stub_doc!($class, "name")`: build.rs cannot see that item, so a missing docstring
/// fails the build where the compiler cannot read its file.
macro_rules! stub_doc {
    ($item:literal) => {
        include_str!(concat!(env!("OUT_DIR"), "/stub_docs/", $item, ".txt"))
    };
    ($class:literal, $member:literal) => {
        include_str!(concat!(
            env!("OUT_DIR"),
            "/stub_docs/",
            $class,
            ".",
            $member,
            ".txt"
        ))
    };
}

/// The module's own allocations (batch outputs, packed keys) come from mimalloc, which keeps
/// freed memory for the next call, as polars' module does with its allocator. With the
/// system allocator every large output was fresh memory from the kernel, its pages faulted
/// in anew on each call: on two threads 16M keys took 27-75 ms a call, the faults' kernel
/// time varying with the machine's free huge pages, where they now take 24-26 ms.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod arrays;
mod buckets;
mod conversions;
mod cursor;
mod dispatch;
mod draining;
mod entry_bucket;
mod errors;
mod fastcall;
mod handoff;
mod hashing;
mod impacted;
mod keys;
mod partitioners;
mod pending_acks;
mod redelivery;
mod rings;
mod routing;
mod routing_key;
mod spare;
mod state;
mod window;

use pyo3::prelude::*;

#[doc = stub_doc!("_core")]
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The one version source: Cargo.toml's, which maturin also gives the wheel, in the
    // spelling PEP 440 normalizes it to, as the wheel's metadata holds it (0.2.0-dev0 is
    // 0.2.0.dev0).
    m.add(
        "__version__",
        env!("CARGO_PKG_VERSION").replacen("-dev", ".dev", 1),
    )?;
    // Benchmarks refuse a development build: its timings say nothing about the release.
    let profile = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    m.add("__build_profile__", profile)?;
    hashing::register(m)?;
    buckets::register(m)?;
    routing::register(m)?;
    draining::register(m)?;
    pending_acks::register(m)?;
    redelivery::register(m)?;
    rings::register(m)?;
    impacted::register(m)?;
    entry_bucket::register(m)?;
    dispatch::register(m)?;
    handoff::register(m)?;
    cursor::register(m)?;
    window::register(m)?;
    partitioners::register(m)?;
    m.add_function(wrap_pyfunction!(errors::error_kinds, m)?)?;
    Ok(())
}
