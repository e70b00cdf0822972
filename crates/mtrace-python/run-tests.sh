#!/usr/bin/env bash
# Tests of the Python binding, from a clean checkout: builds and installs the
# extension into a fresh virtual environment (as the README's Python section
# does), builds mtanalyze, lints the crate, and runs the Python tests.
#
#   crates/mtrace-python/run-tests.sh            # all tests
#   crates/mtrace-python/run-tests.sh -k Threads # unittest arguments pass through
#
# MTRACE_VENV picks the environment (default: target/mtrace-python-venv);
# MTRACE_TEST_README=1 also builds a clean clone exactly as the README says.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
venv="${MTRACE_VENV:-$target/mtrace-python-venv}"

python3 -m venv "$venv"
"$venv/bin/pip" install -q "$here"
cargo fmt --manifest-path "$here/Cargo.toml" -- --check
PYO3_PYTHON="$venv/bin/python" cargo clippy -q --manifest-path "$here/Cargo.toml" --all-targets -- -D warnings
(cd "$repo" && cargo build -q --release -p mtanalyze)
export MTANALYZE="$target/release/mtanalyze"
# Outside the package sources, so `import mtrace` finds the installed module.
cd "$target"
"$venv/bin/python" -m unittest discover -s "$here/tests" -t "$here/tests" -v "$@"
