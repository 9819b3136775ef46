//! The build script: the `Py_3_*` cfgs pyo3 builds with (for the few reads of CPython's
//! layout that differ between versions), and the docs of the native items from the stub
//! (stub_docs.rs, plain Rust with no dependencies, which the tests compile alone).

mod stub_docs;

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
    stub_docs::write();
}
