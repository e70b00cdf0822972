"""Drives `mtanalyze --format html` pages in headless Chromium (Playwright).

Run by tests/e2e/html.rs: `python html_browser.py SPEC.json`. The spec is a
list of cases, each {"name", "page" (a path), "kind" ("report" | "diff"),
"screenshot" (a path), and what to expect}; for each case this script
loads the page from file://, checks it, takes a full-page screenshot, and
prints one JSON object per case on stdout ({"name", "load_ms", "failures":
[...], ...}). It exits 0 when it could run (the Rust test reads the
failures), 3 when the browser cannot be started (the test skips, saying why).

Chromium is Debian's (/usr/bin/chromium); `playwright install` is never run.
"""

import json
import sys
import time

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def check_report(page, case, out):
    fail = out["failures"]
    exp = case.get("first_rows", [])
    labels = page.eval_on_selector_all(
        "#functions tbody tr", "rows => rows.map(r => r.lastChild.textContent)"
    )
    out["rows"] = len(labels)
    if labels[: len(exp)] != exp:
        fail.append(f"first rows {labels[:len(exp)]!r} != the CLI's {exp!r}")
    # The numbers of the first row, as the CLI's table writes them.
    first = case.get("first_numbers")
    if first:
        cells = page.eval_on_selector_all(
            "#functions tbody tr:first-child td",
            "cells => cells.map(c => c.textContent)",
        )
        if cells[: len(first)] != first:
            fail.append(f"first row's numbers {cells[:len(first)]!r} != {first!r}")
    # Sorting by ncalls (largest first) reorders the rows.
    def ncalls():
        return page.eval_on_selector_all(
            "#functions tbody tr",
            "rows => rows.map(r => Number(r.firstChild.textContent.split('/')[0]))",
        )

    before = ncalls()
    page.click('#functions th[data-col="0"]')
    after = ncalls()
    if after != sorted(after, reverse=True):
        fail.append(f"sorting by ncalls: not largest first: {after[:8]}")
    if len(set(before)) > 1 and after == before:
        fail.append("sorting by ncalls did not reorder the rows")
    page.click('#functions th[data-col="0"]')
    again = ncalls()
    if again != sorted(again):
        fail.append("sorting by ncalls twice: not smallest first")
    # The filter hides rows: the first function's exact name.
    if exp and len(labels) > 1:
        name = case["first_name"]
        regex = "^" + "".join("\\" + c if not c.isalnum() else c for c in name) + "$"
        page.fill("#filter", regex)
        shown = page.eval_on_selector_all(
            "#functions tbody tr", "rows => rows.map(r => r.lastChild.textContent)"
        )
        if not shown or len(shown) >= len(labels):
            fail.append(f"the filter {regex!r} left {len(shown)} of {len(labels)} rows")
        elif not all(s.startswith(name) for s in shown):
            fail.append(f"the filter {regex!r} kept {shown[:3]!r}")
        page.fill("#filter", "")
        # Selecting a row shows its callers and callees.
        page.click("#functions tbody tr:first-child")
        if page.query_selector("#callers") is None or page.query_selector("#callees") is None:
            fail.append("clicking a row shows no callers/callees tables")
    # Clicking a flame-graph frame zooms.
    target = page.evaluate("window.mtrace.flameTarget()")
    if target is None:
        if case.get("expect_flame", True):
            fail.append("the flame graph drew no frame below the root")
    else:
        page.query_selector("#flame").scroll_into_view_if_needed()
        target = page.evaluate("window.mtrace.flameTarget()")
        box = page.query_selector("#flame").bounding_box()
        page.mouse.click(box["x"] + target[0], box["y"] + target[1])
        z = page.evaluate("window.mtrace.flame")
        if not z["zoom"]:
            fail.append("clicking a flame-graph frame did not zoom")
        out["zoomed_on"] = z["zoomName"]
        page.click("#flame-reset")
        # Search highlights: the first function's name matches some width.
        if exp:
            page.fill("#flame-search", case["first_name"].replace("(", "\\(").replace(")", "\\)"))
            if page.evaluate("window.mtrace.flame.matched") <= 0 and case.get("first_self", 0) > 0:
                fail.append("searching the flame graph matched nothing")
            page.fill("#flame-search", "")
    # The timeline draws the stacks; a stretch clicked gives its command.
    tl = page.evaluate("window.mtrace.timeline || null")
    if case.get("expect_timeline", True):
        if not tl or tl["rows"] == 0 or tl["threads"] == 0:
            fail.append(f"the timeline drew no stack: {tl!r}")
        else:
            spot = page.evaluate("window.mtrace.timelineTarget()")
            if spot is None:
                fail.append("the timeline has no stretch to click")
            else:
                page.query_selector("#timeline").scroll_into_view_if_needed()
                box = page.query_selector("#timeline").bounding_box()
                page.mouse.click(box["x"] + spot["x"], box["y"] + spot["y"])
                cmd = page.input_value("#tl-command")
                out["command"] = cmd
                want = f"--from {spot['from']}ns --to {spot['to']}ns"
                if not cmd.endswith(want):
                    fail.append(f"the stretch's command {cmd!r} does not end with {want!r}")
            out["timeline"] = page.evaluate("window.mtrace.timeline")
    if case.get("expect_by_trace"):
        if page.query_selector("#by-trace tbody tr") is None:
            fail.append("no per-trace rows")
    if case.get("expect_text"):
        cells = page.eval_on_selector_all("#functions td", "cs => cs.map(c => c.textContent)")
        if not any(c.startswith(case["expect_text"]) for c in cells):
            fail.append(f"no cell reads {case['expect_text']!r} as text")
        if page.evaluate("document.querySelectorAll('#functions script, #functions b').length"):
            fail.append("a name became markup")
    if case.get("expect_warnings"):
        text = page.inner_text("#notes")
        for w in case["expect_warnings"]:
            if w not in text:
                fail.append(f"the warnings at the top lack {w!r}")


def check_diff(page, case, out):
    fail = out["failures"]
    first = page.eval_on_selector_all(
        "#diff tbody tr", "rows => rows.map(r => r.lastChild.textContent)"
    )
    out["first_rows"] = first[:5]
    want = case.get("first_function")
    if want and (not first or not first[0].startswith(want)):
        fail.append(f"the diff's first row is {first[:1]!r}, not {want!r}")
    cls = page.eval_on_selector_all(
        "#diff tbody tr:first-child td", "cells => cells.map(c => c.className)"
    )
    if case.get("first_slower") and not any("slower" in c for c in cls):
        fail.append(f"the first row is not coloured as slower: {cls!r}")
    if case.get("gate_failed") is not None:
        gate = page.query_selector("#gate")
        if gate is None:
            fail.append("no gate verdict")
        else:
            failed = "gate-fail" in (gate.get_attribute("class") or "")
            if failed != case["gate_failed"]:
                fail.append(f"gate shown as failed={failed}")
    target = page.evaluate("window.mtrace.flameTarget()")
    if target is None:
        fail.append("the differential flame graph drew no frame")
    else:
        page.query_selector("#flame").scroll_into_view_if_needed()
        target = page.evaluate("window.mtrace.flameTarget()")
        box = page.query_selector("#flame").bounding_box()
        page.mouse.click(box["x"] + target[0], box["y"] + target[1])
        if not page.evaluate("window.mtrace.flame")["zoom"]:
            fail.append("clicking a differential flame-graph frame did not zoom")
        page.click("#flame-reset")


def run_case(browser, case):
    out = {"name": case["name"], "failures": []}
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    outside = []
    errors = []

    def route(r):
        url = r.request.url
        if url.startswith("file://") and url.split("#")[0] == case["url"]:
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # A name run as code would open an alert: none may.
    page.on("dialog", lambda d: (errors.append(f"a dialog opened: {d.message}"), d.dismiss()))
    page.on("request", lambda r: None if r.url.split("#")[0] == case["url"] else outside.append(r.url))
    start = time.monotonic()
    page.goto(case["url"], wait_until="load", timeout=60000)
    page.wait_for_function("window.mtrace && window.mtrace.ready === true", timeout=60000)
    out["load_ms"] = round((time.monotonic() - start) * 1000)
    try:
        if case["kind"] == "report":
            check_report(page, case, out)
        else:
            check_diff(page, case, out)
    except Exception as e:  # a check that could not run is a failure, said
        out["failures"].append(f"check failed to run: {e}")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=case["screenshot"], full_page=True)
    out["errors"] = errors
    out["outside_requests"] = sorted(set(outside))
    if errors:
        out["failures"].append(f"console errors: {errors}")
    if outside:
        out["failures"].append(f"requests outside the file: {sorted(set(outside))}")
    context.close()
    return out


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        except Exception as e:
            print(f"cannot start {CHROMIUM}: {e}", file=sys.stderr)
            sys.exit(3)
        for case in cases:
            print(json.dumps(run_case(browser, case)), flush=True)
        browser.close()


if __name__ == "__main__":
    main()
