//! Sets pyo3's `Py_3_x` cfgs, so the crate can use `PyEval_SetProfileAllThreads` on 3.12+.
fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
