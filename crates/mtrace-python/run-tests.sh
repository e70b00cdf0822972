#!/usr/bin/env bash
# Tests of the Python binding, from a clean checkout, on every CPython 3.11+
# this machine has: pyenv's versions (`pyenv root`, $PYENV_ROOT and
# ~/.pyenv), then `python3` on PATH and /usr/bin/python3, one run per
# distinct version. For each: the wheel built with `pip wheel` (maturin from
# PyPI), installed into a fresh virtual environment (as the README's Python
# section does), clippy of the crate built against that Python, and the
# unittest suite, run with a PATH that holds the environment's bin/ and the
# system's alone: no cargo, rustc or pyenv, as on a Python user's machine
# (the suite's `mtanalyze` is the wheel's console script). Every
# version runs even if an earlier one failed; the script fails if any did
# (a run of no tests fails too), and its last lines say which versions ran
# and how each went. Then, once, in the first version's environment: the
# type check, PyPI's mypy run as pyproject.toml's [tool.mypy] says (--strict,
# the package, its stub and the examples); it fails the script too.
#
#   crates/mtrace-python/run-tests.sh            # all tests, every version
#   crates/mtrace-python/run-tests.sh -k Threads # unittest arguments pass through
#   MTRACE_PYTHONS="/usr/bin/python3.12 python3.13" crates/mtrace-python/run-tests.sh
#
# MTRACE_PYTHONS: the interpreters to test instead of those found (each still
# checked for 3.11+). MTRACE_WHEELS: a folder of wheels made by
# build-wheels.sh (manylinux), tested instead of a wheel built here.
# MTRACE_VENV: the folder holding one environment per version,
# `$MTRACE_VENV/<version>`, and the wheels, `$MTRACE_VENV/wheels` (default
# target/mtrace-python-venvs).
# MTRACE_TEST_README=1 also builds a clean clone exactly as the README says.
# MTRACE_TYPECHECK=0 skips the type check (it installs mypy from PyPI).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
venvs="${MTRACE_VENV:-$target/mtrace-python-venvs}"
say() { echo "run-tests.sh: $*" >&2; }

# The interpreters: `pythons` and their `versions` (pythons.sh).
source "$here/pythons.sh"
say "testing with CPython ${versions[*]}"

cargo fmt --manifest-path "$here/Cargo.toml" -- --check
# The system's own folders, for the tests' PATH: no Rust toolchain there.
system_path="/usr/local/bin:/usr/bin:/bin"
for tool in cargo rustc; do
    if PATH="$system_path" command -v "$tool" >/dev/null; then
        say "warning: $tool is in $system_path: the no-toolchain test will fail"
    fi
done

# One version: wheel, environment, install, lint, tests. Runs in a subshell with -e.
test_one() {
    local py="$1" version="$2"
    shift 2
    local venv="$venvs/$version" wheels="$venvs/wheels/$version"
    rm -rf "$venv" "$wheels"
    local started=$SECONDS wheel
    if [ -n "${MTRACE_WHEELS:-}" ]; then
        # A wheel build-wheels.sh made: cpXY-cpXY[t] for this interpreter.
        wheel="$(ls "$MTRACE_WHEELS"/mtrace-*-"$(wheel_tag "$py")"-*.whl)"
        say "testing $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) from $MTRACE_WHEELS"
    else
        "$py" -m pip wheel -q --disable-pip-version-check --no-deps -w "$wheels" "$here"
        wheel="$(ls "$wheels"/mtrace-*.whl)"
        say "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in $((SECONDS - started)) s"
    fi
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$wheel"
    # The crate has version-dependent code (cfg(Py_3_12)): lint it for each version.
    PYO3_PYTHON="$venv/bin/python" cargo clippy -q --manifest-path "$here/Cargo.toml" --all-targets -- -D warnings
    # Outside the package sources, so `import mtrace` finds the installed
    # module; a Python user's PATH: the environment's bin/ and the system's.
    cd "$target"
    env -u CARGO_HOME -u RUSTUP_HOME -u PYENV_ROOT -u VIRTUAL_ENV \
        PATH="$venv/bin:$system_path" MTRACE_NO_TOOLCHAIN=1 MTRACE_BUILD_PATH="$PATH" \
        "$venv/bin/python" -m unittest discover -s "$here/tests" -t "$here/tests" -v "$@"
}

mkdir -p "$venvs"
results=()
failed=0
for i in "${!pythons[@]}"; do
    py="${pythons[$i]}"
    version="${versions[$i]}"
    log="$venvs/$version.log"
    say "=== CPython $version ($py)"
    set +e
    (set -e; test_one "$py" "$version" "$@") 2>&1 | tee "$log"
    status="${PIPESTATUS[0]}"
    set -e
    # unittest's own summary: "Ran N tests" and "OK (skipped=1)" / "FAILED (failures=2)".
    ran="$(grep -E '^Ran [0-9]+ tests?' "$log" | tail -n 1 || true)"
    outcome="$(grep -E '^(OK|FAILED)( |$)' "$log" | tail -n 1 || true)"
    if [ "$status" -eq 0 ] && [[ "$ran" == "Ran 0 tests"* ]]; then
        # unittest 3.12+ fails a run of no tests (exit 5); 3.11 does not: fail both alike.
        failed=$((failed + 1))
        results+=("CPython $version: FAILED, no tests ran; log: $log")
    elif [ "$status" -eq 0 ]; then
        results+=("CPython $version: passed (${ran:-no tests ran}, ${outcome:-no summary})")
    else
        failed=$((failed + 1))
        results+=("CPython $version: FAILED, exit $status (${ran:-tests did not run}${outcome:+, $outcome}); log: $log")
    fi
done

# The type check: the package's annotations, its stub of the native module
# and the examples, as a user's `mypy --strict` sees them (the sources, for
# Python 3.11, the oldest supported). Once: the check is the same for every
# version. Its cache stays in the target folder, out of the sources.
typecheck=skipped
if [ "${MTRACE_TYPECHECK:-1}" != 0 ]; then
    venv="$venvs/${versions[0]}"
    started=$SECONDS
    say "=== mypy --strict (pyproject.toml's [tool.mypy]) with CPython ${versions[0]}"
    # mypy pinned: a newer one's new checks are a change of their own.
    if "$venv/bin/pip" install -q --disable-pip-version-check "mypy==2.4.1" &&
        (cd "$here" && MYPY_CACHE_DIR="$target/mypy-cache" "$venv/bin/mypy"); then
        typecheck=passed
    else
        typecheck=FAILED
    fi
    typecheck+=" ($((SECONDS - started)) s)"
fi

for line in "${results[@]}"; do
    say "$line"
done
say "$((${#pythons[@]} - failed)) of ${#pythons[@]} Python versions passed"
say "mypy --strict: $typecheck"
[ "$failed" -eq 0 ] && [[ "$typecheck" != FAILED* ]]
