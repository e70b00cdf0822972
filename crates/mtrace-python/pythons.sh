# Sourced by run-tests.sh and build-wheels.sh: the CPython 3.11+
# interpreters of this machine, one per distinct version, into `pythons`
# (paths) and `versions` (such as 3.14.7t: the ABI flags tell a
# free-threaded build apart). Looks in pyenv's versions (`pyenv root`,
# $PYENV_ROOT, ~/.pyenv), then `python3` on PATH and /usr/bin/python3; or
# takes MTRACE_PYTHONS, a space-separated list. Needs `say` and exits 1
# when none is found. Also defines `wheel_tag PY`.

# Interpreters to try, in order of preference (a version found twice is run
# once, from the first place it was found).
candidates=()
if [ -n "${MTRACE_PYTHONS:-}" ]; then
    read -r -a candidates <<<"$MTRACE_PYTHONS"
else
    roots=()
    if command -v pyenv >/dev/null 2>&1; then
        roots+=("$(pyenv root 2>/dev/null || true)")
    fi
    roots+=("${PYENV_ROOT:-}" "$HOME/.pyenv")
    for root in "${roots[@]}"; do
        [ -n "$root" ] || continue
        for py in "$root"/versions/*/bin/python3; do
            [ -x "$py" ] && candidates+=("$py")
        done
    done
    candidates+=(python3 /usr/bin/python3)
fi

pythons=()
versions=()
seen=" "
for py in "${candidates[@]}"; do
    # The real version (a pyenv shim or a symlink says nothing), with the ABI
    # flags so a free-threaded 3.13t is not taken for 3.13.
    if ! version="$("$py" -c 'import sys; print(sys.implementation.name, "%d.%d.%d%s" % (sys.version_info[:3] + (sys.abiflags,)), int(sys.version_info >= (3, 11)))' 2>/dev/null)"; then
        # Not there (python3 missing from PATH is normal); say so only when asked for it.
        [ -z "${MTRACE_PYTHONS:-}" ] || say "skipping $py: it does not run"
        continue
    fi
    read -r implementation version recent <<<"$version"
    case "$seen" in *" $version "*) continue ;; esac
    seen+="$version "
    if [ "$implementation" != cpython ]; then
        say "skipping $py ($implementation $version): only CPython is supported"
    elif [ "$recent" != 1 ]; then
        say "skipping $py (CPython $version): mtrace needs CPython 3.11 or newer"
    elif ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
        say "skipping $py (CPython $version): it cannot make a virtual environment (no venv/ensurepip module)"
    else
        pythons+=("$py")
        versions+=("$version")
    fi
done
if [ "${#pythons[@]}" -eq 0 ]; then
    say "no CPython 3.11+ found (looked in pyenv's versions, python3 on PATH, /usr/bin/python3; or set MTRACE_PYTHONS)"
    exit 1
fi

# The Python and ABI tags of the wheels interpreter PY installs, as in
# their names: cp312-cp312, cp314-cp314t (free-threaded).
wheel_tag() {
    "$1" -c 'import sys; v = "cp%d%d" % sys.version_info[:2]; print(f"{v}-{v}{sys.abiflags}")'
}
