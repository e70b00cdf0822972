#!/usr/bin/env bash
# Builds the wheels a Python user installs without a Rust toolchain: one
# manylinux wheel per CPython 3.11+ of this machine (3.11, 3.12, 3.13, 3.14
# and the free-threaded 3.14t where installed; found as run-tests.sh finds
# them, pythons.sh), with PyPI's maturin and its zig linker (PyPI's
# ziglang), so no Docker and no manylinux image: zig links against glibc
# 2.17's symbols. PyPI's `auditwheel show` then confirms each wheel's
# manylinux tag; a wheel without one fails the script.
#
#   crates/mtrace-python/build-wheels.sh              # into target/wheels
#   crates/mtrace-python/build-wheels.sh DIST         # into DIST
#   MTRACE_WHEELS=target/wheels crates/mtrace-python/run-tests.sh   # test them
#
# The tools go into their own virtual environment (target/wheel-tools), the
# build into target/zig (zig's C compiler and linker differ from the
# system's, so cargo keeps their artifacts apart from target/release).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
dist="$(mkdir -p "${1:-$target/wheels}" && cd "${1:-$target/wheels}" && pwd)"
say() { echo "build-wheels.sh: $*" >&2; }
# The manylinux policy: glibc 2.17 (manylinux2014), what zig links against.
policy=manylinux_2_17

source "$here/pythons.sh"
say "building wheels for CPython ${versions[*]}"

tools="$target/wheel-tools"
if [ ! -x "$tools/bin/maturin" ] || [ ! -x "$tools/bin/auditwheel" ]; then
    "${pythons[0]}" -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check "maturin>=1.5,<2" ziglang auditwheel
fi

rm -f "$dist"/mtrace-*.whl
built=()
seen=" "
for i in "${!pythons[@]}"; do
    # Its own path: maturin runs with the tools' bin/ first on PATH, where
    # a bare `python3` would be the tools' interpreter.
    py="$("${pythons[$i]}" -c 'import sys; print(sys.executable)')"
    # One wheel per ABI (3.11.7 and Debian's 3.11.2 share cp311).
    tag="$(wheel_tag "$py")"
    case "$seen" in *" $tag "*) continue ;; esac
    seen+="$tag "
    started=$SECONDS
    PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$target/zig" \
        maturin build --quiet --release --zig --compatibility "$policy" \
        --manifest-path "$here/Cargo.toml" -i "$py" -o "$dist"
    wheel="$(ls "$dist"/mtrace-*-"$tag"-*.whl)"
    shown="$("$tools/bin/auditwheel" show "$wheel")"
    if ! grep -q "\"${policy}_x86_64\"" <<<"$shown"; then
        say "$(basename "$wheel") is not $policy:"
        echo "$shown" >&2
        exit 1
    fi
    say "$(basename "$wheel"): $(du -k "$wheel" | cut -f1) KiB, auditwheel: ${policy}_x86_64, in $((SECONDS - started)) s"
    built+=("$wheel")
done
say "${#built[@]} wheels in $dist"
