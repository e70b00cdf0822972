#!/usr/bin/env bash
# Every output of an `mtanalyze` binary over the bundled sample traces, into
# one folder, so that two builds can be compared with `diff -r`: the safety
# net of a refactor that must not change a byte of any report.
#
#   tests/compare-outputs.sh BIN OUTDIR
#
# BIN is an `mtanalyze` binary (e.g. "$CARGO_TARGET_DIR/release/mtanalyze");
# OUTDIR is created (it must not exist). Each run writes OUTDIR/NAME.out
# (stdout, or the -o file), OUTDIR/NAME.err (stderr) and OUTDIR/NAME.rc (the
# exit status), so a changed message or status shows as well as a changed
# report. Covered: every sample trace (`sample-traces/*.bin` and `*.json`)
# with the report in every `--format` under every `--clock`, the stack rows
# (`--stacks`), `check` (table and JSON), `flamegraph`, `export` in every
# format but Parquet (a build option), `diff` of the first two traces in
# every format, `convert --compact`, the HTML page of a window, of
# collapsed call paths, of several traces and of a gated diff, and each
# refusal of options that do not go together. Compare two builds with:
#
#   tests/compare-outputs.sh main/release/mtanalyze /tmp/before
#   tests/compare-outputs.sh mine/release/mtanalyze /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Nothing a run writes depends on the run: paths are given relative to the
# repository root (the script runs from there) and the reports hold no
# wall-clock time. pprof's profile is gzip, whose header could hold a time:
# it is compared as written (the writer sets none).
set -u
BIN=$(realpath "$1")
OUT=$2
cd "$(dirname "$0")/.."
mkdir "$OUT" || exit 1
OUT=$(realpath "$OUT")

# run NAME ARGS...: stdout to NAME.out unless ARGS name `-o`.
run() {
    local name=$1
    shift
    "$BIN" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
}

traces=(sample-traces/*.bin sample-traces/*.json)
for t in "${traces[@]}"; do
    n=$(basename "$t")
    for clock in stack gil wall; do
        for f in table json markdown folded html; do
            run "$n.$clock.$f" "$t" --clock "$clock" --format "$f"
        done
        # folded and html hold every row; --stacks applies to the others.
        for f in table json markdown; do
            run "$n.$clock.$f.stacks" "$t" --clock "$clock" --format "$f" --stacks
        done
        run "$n.$clock.pstats" "$t" --clock "$clock" --format pstats -o "$OUT/$n.$clock.pstats.prof"
        run "$n.$clock.flamegraph" flamegraph "$t" --clock "$clock"
        for e in chrome speedscope callgrind pprof; do
            run "$n.$clock.export-$e" export --format "$e" "$t" --clock "$clock" -o "$OUT/$n.$clock.export-$e.file"
        done
    done
    run "$n.default" "$t"
    run "$n.check" check "$t"
    run "$n.check.json" check "$t" --format json
    run "$n.convert" convert --compact "$t" "$OUT/$n.convert.bin"
done

a=${traces[0]}
b=${traces[1]}
for f in table json folded markdown html; do
    run "diff.$f" diff "$a" "$b" --format "$f"
done
run "diff.self" diff "$a" "$a"

# The HTML page's data takes more shapes than the runs above give it: a
# window (`trace.window`), collapsed call paths (`collapse`), several traces
# (`by_trace`, no timeline) and a diff with a --fail-if gate (`gate`).
run "window.html" "$a" --from 1ms --to 5ms --format html
run "collapse.html" "$a" --collapse-recursion direct --format html
run "many.html" "$a" "$b" --by-trace --format html
run "diff.collapse.html" diff "$a" "$b" --collapse-recursion all --format html
run "diff.gate.html" diff "$a" "$b" --fail-if 'parse.*: tottime > +10%' --confidence 0 --format html

# Refusals: each check of options that do not go together (its one line
# and its status), with traces that read; then an output that is an input
# and a missing trace.
for flag in "--limit 3" "--filter x" "--callers x" "--callees x" --stacks "--stacks --group" --per-thread "--sort name"; do
    # shellcheck disable=SC2086 # one option and its value
    run "refused.html${flag// /}" "$a" --format html $flag
done
run refused.folded-rows "$a" --format folded --limit 3
run refused.stacks-sort "$a" --stacks --sort file
run refused.per-thread "$a" --per-thread
run refused.collapse "$a" --collapse-recursion direct
run refused.pstats-stdout "$a" --format pstats
run refused.by-trace "$a" "$b" --by-trace --format markdown
run refused.same-file "$a" --format json -o "$a"
run refused.missing sample-traces/no-such-trace.bin
run refused.diff-rule diff "$a" "$b" --fail-if 'tottime >> 1'
run refused.diff-min-change diff "$a" "$b" --fail-if 'tottime > +10%' --fail-min-change soon
run refused.diff-folded-rows diff "$a" "$b" --format folded --min-change 1
run refused.diff-same-outputs diff "$a" "$b" -o "$OUT/same.svg" --flamegraph "$OUT/same.svg"
run refused.diff-html-rows diff "$a" "$b" --format html --limit 3
run refused.diff-collapse diff "$a" "$b" --collapse-recursion all
run refused.export-frames export --format chrome --frames "$a"
run refused.export-several export --format callgrind "$a" "$b"
run refused.export-parquet export --format parquet "$a" -o "$OUT/tables"
run refused.top-live top "$a" </dev/null
