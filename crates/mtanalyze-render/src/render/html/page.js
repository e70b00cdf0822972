// The page of `mtanalyze --format html` and `mtanalyze diff --format html`.
//
// It reads the JSON of the element #data (written by render/html/mod.rs)
// and builds every table, the flame graph and the timeline from it. Data
// reaches the DOM through textContent and attributes only, never as markup.
// No request of any kind is made (the page's Content-Security-Policy
// forbids them). `window.mtrace` exposes the state the browser tests read.
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('data').textContent);
  const state = (window.mtrace = { data: D, errors: [] });

  // ---------------------------------------------------------------- helpers

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      e.append(typeof kid === 'string' ? document.createTextNode(kid) : kid);
    }
    return e;
  }

  // A duration as the CLI writes it: three significant digits.
  function dur(ns) {
    if (!isFinite(ns) || ns <= 0) return '0ns';
    if (ns < 999.5 && Number.isInteger(ns)) return ns.toFixed(0) + 'ns';
    const units = [['ns', 1], ['µs', 1e3], ['ms', 1e6], ['s', 1e9]];
    for (let i = 0; i < units.length; i++) {
      const v = ns / units[i][1];
      const d = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
      const text = v.toFixed(d);
      if (Number(text) < 1000 || i === units.length - 1) return text + units[i][0];
    }
    return String(ns);
  }
  function signedDur(ns) { return (ns > 0 ? '+' : ns < 0 ? '-' : '') + dur(Math.abs(ns)); }
  function pct(change, base) {
    if (!base) return change ? 'new' : '0%';
    const p = (100 * change) / base;
    return (p > 0 ? '+' : '') + p.toFixed(1) + '%';
  }
  function calls(t, p) { return t === p ? String(t) : t + '/' + p; }
  function per(x, n) { return n ? dur(x / n) : '0ns'; }
  function label(f) { return f.file ? f.function + ' (' + f.file + ':' + f.line + ')' : f.function; }
  function hash(s) { let h = 2166136261; for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); } return h >>> 0; }
  function regexOf(text) {
    if (!text) return null;
    try { return new RegExp(text); } catch (e) { return undefined; }
  }
  function section(id, title, ...kids) {
    const s = el('section', { id }, el('h2', { text: title }), ...kids);
    document.getElementById('nav').append(el('a', { href: '#' + id, text: title }));
    return s;
  }

  // A sortable table. columns: {label, value(row), text(row), num, cls(row)}.
  // Clicking a header sorts by it (numbers largest first, text A to Z;
  // again: the other way). `limit` rows are drawn, with a button for all.
  function sortableTable(opts) {
    const { id, columns, onclick } = opts;
    let rows = opts.rows.slice();
    let shown = rows;
    let sortCol = opts.sortCol === undefined ? -1 : opts.sortCol;
    let asc = false;
    let limit = opts.limit || 500;
    let filter = null;
    const thead = el('tr');
    columns.forEach((c, i) => {
      thead.append(el('th', { class: c.num ? '' : 'text', 'data-col': String(i), title: c.title || null, onclick: () => sortBy(i) }, c.label));
    });
    const tbody = el('tbody');
    const table = el('table', { id }, el('thead', {}, thead), tbody);
    const more = el('p', { class: 'note' });
    const wrap = el('div', {}, el('div', { class: 'scroll' }, table), more);
    let selected = null;
    function compare(c) {
      return (a, b) => {
        const x = c.value(a), y = c.value(b);
        let r = c.num ? y - x : String(x).localeCompare(String(y));
        if (asc) r = -r;
        return r || (opts.tie ? opts.tie(a, b) : 0);
      };
    }
    function sortBy(i, keepDirection) {
      if (!keepDirection) asc = sortCol === i ? !asc : !columns[i].num;
      sortCol = i;
      rows.sort(compare(columns[i]));
      draw();
    }
    function draw() {
      shown = filter ? rows.filter(filter) : rows;
      tbody.replaceChildren();
      const n = Math.min(shown.length, limit);
      for (let r = 0; r < n; r++) {
        const row = shown[r];
        const tr = el('tr', { 'data-key': opts.key ? String(opts.key(row)) : null });
        if (selected !== null && opts.key && opts.key(row) === selected) tr.classList.add('selected');
        for (const c of columns) {
          const cls = (c.num ? 'num' : c.fn ? 'fn' : 'text') + (c.cls ? ' ' + c.cls(row) : '');
          tr.append(el('td', { class: cls, title: c.tip ? c.tip(row) : null }, c.text(row)));
        }
        if (onclick) tr.addEventListener('click', () => { select(opts.key ? opts.key(row) : null); onclick(row); });
        tbody.append(tr);
      }
      thead.querySelectorAll('th').forEach((th, i) => {
        th.classList.toggle('sorted', i === sortCol);
        th.classList.toggle('asc', i === sortCol && asc);
      });
      more.replaceChildren();
      const hidden = opts.total !== undefined ? opts.total - rows.length : 0;
      let text = 'showing ' + n + ' of ' + shown.length + ' rows';
      if (filter) text += ' (' + (rows.length - shown.length) + ' hidden by the filter)';
      if (hidden > 0) text += '; ' + hidden + ' more not in the page' + (opts.hiddenWhy ? ' (' + opts.hiddenWhy + ')' : '');
      more.append(text);
      if (shown.length > n) more.append(' ', el('button', { onclick: () => { limit = Infinity; draw(); } }, 'show all'));
    }
    function select(key) {
      selected = key;
      tbody.querySelectorAll('tr').forEach((tr) => tr.classList.toggle('selected', tr.getAttribute('data-key') === String(key)));
    }
    if (sortCol >= 0) { asc = false; }
    draw();
    return {
      element: wrap,
      sortBy,
      setFilter(f) { filter = f; draw(); },
      select,
      redraw: draw,
    };
  }

  // ----------------------------------------------------------- flame graph

  // An icicle of a call-path tree (node 0 the root), on a canvas. Widths
  // are `width(i)` (the subtree's self time); `color(i)` paints a frame.
  function flameGraph(opts) {
    const canvas = el('canvas', { id: opts.id, tabindex: '0' });
    const info = el('div', { id: 'flame-info' });
    const ROW = 18;
    const MAX_ROWS = 1200;
    let tree, kids, depthOf, zoom = 0, search = null, maxDepth = 0, rects = [];
    function setTree(t) {
      tree = t;
      const n = t.parent.length;
      kids = Array.from({ length: n }, () => []);
      depthOf = new Int32Array(n);
      for (let i = 1; i < n; i++) { kids[t.parent[i]].push(i); }
      for (let i = 1; i < n; i++) { depthOf[i] = depthOf[t.parent[i]] + 1; }
      maxDepth = 0;
      for (let i = 0; i < n; i++) if (depthOf[i] > maxDepth) maxDepth = depthOf[i];
      const name = (i) => opts.name(i);
      for (const k of kids) k.sort((a, b) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0));
      zoom = 0;
      draw();
    }
    function draw() {
      const cssWidth = Math.max(300, canvas.parentElement ? canvas.parentElement.clientWidth - 2 : 1000);
      const rowsShown = Math.min(maxDepth + 1, MAX_ROWS);
      const cssHeight = rowsShown * ROW + 2;
      const dpr = window.devicePixelRatio || 1;
      canvas.width = Math.floor(cssWidth * dpr);
      canvas.height = Math.floor(cssHeight * dpr);
      canvas.style.width = cssWidth + 'px';
      canvas.style.height = cssHeight + 'px';
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, cssWidth, cssHeight);
      g.font = '11.5px ui-monospace, Menlo, Consolas, monospace';
      g.textBaseline = 'middle';
      rects = [];
      const total = Math.max(opts.width(zoom), 1);
      const scale = cssWidth / total;
      // The zoomed frame's ancestors, full width.
      for (let a = tree.parent[zoom], d = depthOf[zoom] - 1; zoom !== 0 && a >= 0; a = tree.parent[a], d--) {
        box(g, a, 0, cssWidth, d, true);
        if (a === 0) break;
      }
      // The zoomed frame and what is under it.
      const stack = [[zoom, 0]];
      while (stack.length) {
        const [i, x] = stack.pop();
        const w = opts.width(i) * scale;
        const d = depthOf[i];
        if (w < 0.3 || d >= MAX_ROWS) continue;
        box(g, i, x, w, d, false);
        let cx = x;
        for (const c of kids[i]) {
          const cw = opts.width(c) * scale;
          if (cw >= 0.3) stack.push([c, cx]);
          cx += cw;
        }
      }
      const note = maxDepth + 1 > MAX_ROWS ? ' (deeper than ' + MAX_ROWS + ' frames: not drawn)' : '';
      info.textContent = (zoom ? 'zoomed on ' + opts.name(zoom) + ': click the top row to zoom out' : 'click a frame to zoom') + note;
      state.flame = { zoom, zoomName: zoom ? opts.name(zoom) : null, drawn: rects.length, matched: matched() };
    }
    function box(g, i, x, w, d, faded) {
      const y = d * ROW;
      let fill = opts.color(i);
      const hit = search && i !== 0 && search.test(opts.name(i));
      if (search && !hit) fill = '#e4e6eb';
      if (hit) fill = '#d81b9a';
      if (faded) fill = '#cfd6e3';
      g.fillStyle = fill;
      g.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
      rects.push([x, y, w, i]);
      if (w > 24) {
        g.fillStyle = hit ? '#fff' : '#111';
        const text = i === 0 ? opts.rootName() : opts.name(i);
        const fit = Math.floor((w - 6) / 7);
        g.fillText(text.length > fit ? text.slice(0, Math.max(fit - 1, 0)) + '…' : text, x + 3, y + ROW / 2);
      }
    }
    function at(ev) {
      const r = canvas.getBoundingClientRect();
      const x = ev.clientX - r.left, y = ev.clientY - r.top;
      for (let k = rects.length - 1; k >= 0; k--) {
        const [rx, ry, rw, i] = rects[k];
        if (x >= rx && x < rx + rw && y >= ry && y < ry + ROW) return i;
      }
      return -1;
    }
    function matched() {
      if (!search || !tree) return 0;
      // Sum of the outermost matching frames' widths.
      let sum = 0;
      const walk = [0];
      while (walk.length) {
        const i = walk.pop();
        if (i !== 0 && search.test(opts.name(i))) { sum += opts.width(i); continue; }
        for (const c of kids[i]) walk.push(c);
      }
      return sum;
    }
    // For the browser tests: the middle of the widest frame below the root.
    state.flameTarget = () => {
      let best = null;
      for (const r of rects) if (r[1] === ROW && r[2] >= 2 && (!best || r[2] > best[2])) best = r;
      return best ? [best[0] + best[2] / 2, best[1] + ROW / 2] : null;
    };
    canvas.addEventListener('click', (ev) => {
      const i = at(ev);
      if (i < 0) return;
      zoom = i === zoom ? tree.parent[i] : i;
      if (zoom < 0) zoom = 0;
      draw();
    });
    canvas.addEventListener('mousemove', (ev) => {
      const i = at(ev);
      if (i >= 0) info.textContent = opts.describe(i);
    });
    canvas.addEventListener('mouseleave', draw);
    window.addEventListener('resize', () => tree && draw());
    return {
      canvas, info, setTree,
      setSearch(re) { search = re; draw(); if (search) info.textContent = 'matched: ' + opts.describeMatch(matched()); },
      zoomTo(i) { zoom = i; draw(); },
      reset() { zoom = 0; draw(); },
    };
  }

  // -------------------------------------------------------------- header

  document.getElementById('title').textContent = document.title;
  document.getElementById('header').textContent = D.header.join('\n');
  const notes = document.getElementById('notes');
  const main = document.getElementById('main');
  main.replaceChildren();

  function warningsBox(warnings, lines) {
    if (!lines.length && !(warnings && warnings.length)) return null;
    const box = el('div', { class: 'warnbox', id: 'warnings' });
    for (const l of lines) box.append(el('p', { text: l }));
    for (const w of warnings || []) {
      box.append(el('p', {}, el('b', { text: w.kind }), ' ×' + w.count + ' (first at ' + w.first + '): ' + w.repair));
    }
    return box;
  }

  if (D.kind === 'report') reportPage();
  else diffPage();

  // ---------------------------------------------------------- the report

  function reportPage() {
    const F = D.functions;
    const box = warningsBox(D.warnings, D.notes);
    if (box) notes.append(box);
    if (D.collapse) notes.append(el('p', { class: 'note', text: 'Call paths with --collapse-recursion ' + D.collapse + ': recursive frames count on the path of their outer frame.' }));
    if (D.marks.length) {
      notes.append(el('p', { class: 'note', text: 'marks: ' + D.marks.slice(0, 20).map((m) => m.name + ' at ' + dur(m.time_ns)).join(', ') + (D.marks.length > 20 ? ', ... (' + D.marks.length + ')' : '') }));
    }

    // Functions, callers and callees.
    // The CLI's order (tottime, ties by name, file, line): every function.
    const rows = D.order.slice();
    const byName = (a, b) => {
      const x = F[a], y = F[b];
      return x.function < y.function ? -1 : x.function > y.function ? 1 : x.file < y.file ? -1 : x.file > y.file ? 1 : x.line - y.line;
    };
    const fcols = [
      { label: 'ncalls', num: true, value: (i) => F[i].ncalls, text: (i) => calls(F[i].ncalls, F[i].primitive_calls) },
      { label: 'tottime', num: true, value: (i) => F[i].tottime_ns, text: (i) => dur(F[i].tottime_ns) },
      { label: 'percall', num: true, value: (i) => (F[i].ncalls ? F[i].tottime_ns / F[i].ncalls : 0), text: (i) => per(F[i].tottime_ns, F[i].ncalls), title: 'tottime / ncalls' },
      { label: 'cumtime', num: true, value: (i) => F[i].cumtime_ns, text: (i) => dur(F[i].cumtime_ns) },
      { label: 'percall', num: true, value: (i) => (F[i].primitive_calls ? F[i].cumtime_ns / F[i].primitive_calls : 0), text: (i) => per(F[i].cumtime_ns, F[i].primitive_calls), title: 'cumtime / primitive calls' },
      { label: 'paused', num: true, value: (i) => F[i].paused_ns, text: (i) => dur(F[i].paused_ns) },
      { label: 'scheduled', num: true, value: (i) => F[i].scheduled_ns, text: (i) => dur(F[i].scheduled_ns), title: 'paused, woken, waiting for a thread' },
      { label: 'waiting', num: true, value: (i) => F[i].waiting_ns, text: (i) => dur(F[i].waiting_ns), title: 'paused, not yet woken' },
      { label: 'function (file:line)', fn: true, value: (i) => label(F[i]), text: (i) => label(F[i]) },
    ];
    const edgesIn = F.map(() => []), edgesOut = F.map(() => []);
    for (const e of D.edges) { edgesOut[e[0]].push(e); edgesIn[e[1]].push(e); }
    const edgePanel = el('div', { id: 'edges', class: 'split' });
    const ftable = sortableTable({
      id: 'functions', columns: fcols, rows, sortCol: 1, key: (i) => i, tie: byName,
      onclick: (i) => showEdges(i),
    });
    const filterBox = el('input', { type: 'text', id: 'filter', placeholder: 'regex on name and file:line', 'aria-label': 'filter functions' });
    filterBox.addEventListener('input', () => {
      const re = regexOf(filterBox.value);
      filterBox.classList.toggle('bad', re === undefined);
      if (re === undefined) return;
      ftable.setFilter(re ? (i) => re.test(F[i].function) || re.test(F[i].file + ':' + F[i].line + ' ' + F[i].function) : null);
    });
    function edgeTable(title, list, other, idPart) {
      const ecols = [
        { label: 'ncalls', num: true, value: (e) => e[2], text: (e) => calls(e[2], e[3]) },
        { label: 'tottime', num: true, value: (e) => e[4], text: (e) => dur(e[4]) },
        { label: 'cumtime', num: true, value: (e) => e[5], text: (e) => dur(e[5]) },
        { label: title, fn: true, value: (e) => label(F[e[other]]), text: (e) => label(F[e[other]]) },
      ];
      const t = sortableTable({ id: idPart, columns: ecols, rows: list, sortCol: 2, key: (e) => e[other], onclick: (e) => { ftable.select(e[other]); showEdges(e[other]); } });
      return el('div', {}, el('h3', { text: title + ' (' + list.length + ')' }), t.element);
    }
    function showEdges(i) {
      edgePanel.replaceChildren(
        el('div', { style: 'grid-column: 1 / span 2' }, el('b', { text: label(F[i]) }), ' ',
          el('button', { onclick: () => { searchBox.value = '^' + F[i].function.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$'; searchBox.dispatchEvent(new Event('input')); document.getElementById('flame').scrollIntoView(); } }, 'show in the flame graph')),
        edgeTable('callers', edgesIn[i], 0, 'callers'),
        edgeTable('callees', edgesOut[i], 1, 'callees'));
      state.selectedFunction = i;
    }
    main.append(section('functions-section', 'Functions',
      el('div', { class: 'controls' }, el('label', {}, 'filter ', filterBox),
        el('span', { class: 'note', text: 'click a column to sort, a row for its callers and callees (numbers per edge)' })),
      ftable.element, edgePanel));

    // Flame graph.
    const trees = D.trees.trees;
    let tree = trees[0];
    const fg = flameGraph({
      id: 'flame',
      name: (i) => (F[tree.func[i]] ? D.labels[tree.func[i]] : '?'),
      rootName: () => 'all (' + dur(tree.total[0]) + ')',
      width: (i) => tree.total[i],
      color: (i) => {
        const h = hash(F[tree.func[i]] ? F[tree.func[i]].function : '');
        return 'hsl(' + (10 + (h % 40)) + ',' + (70 + (h >> 8) % 20) + '%,' + (58 + (h >> 16) % 14) + '%)';
      },
      describe: (i) => {
        if (i === 0) return 'all: ' + dur(tree.total[0]) + ' self time in total';
        const f = F[tree.func[i]];
        return label(f) + ': ' + dur(tree.total[i]) + ' (' + (100 * tree.total[i] / Math.max(tree.total[0], 1)).toFixed(2) + '%), self ' + dur(tree.self[i]) + ', ' + tree.calls[i] + ' calls ended here';
      },
      describeMatch: (ns) => dur(ns) + ' (' + (100 * ns / Math.max(tree.total[0], 1)).toFixed(2) + '% of ' + dur(tree.total[0]) + ')',
    });
    const searchBox = el('input', { type: 'text', id: 'flame-search', placeholder: 'search: regex on function names' });
    searchBox.addEventListener('input', () => {
      const re = regexOf(searchBox.value);
      searchBox.classList.toggle('bad', re === undefined);
      if (re !== undefined) fg.setSearch(re);
    });
    const treeSelect = el('select', { id: 'flame-tree', 'aria-label': 'stacks' });
    trees.forEach((t, k) => treeSelect.append(el('option', { value: String(k) }, k === 0 ? 'merged: all stacks' : t.name + ' (' + t.stacks + (t.stacks === 1 ? ' stack)' : ' stacks)'))));
    treeSelect.addEventListener('change', () => { tree = trees[Number(treeSelect.value)]; fg.setTree(tree); fg.setSearch(regexOf(searchBox.value) || null); });
    const flameNotes = [];
    if (tree.left_out) flameNotes.push(tree.left_out + ' small call paths are not in the page (their time is in their callers\' widths).');
    if (D.trees.groups_left_out) flameNotes.push(D.trees.groups_left_out + ' smaller stack groups have no graph of their own.');
    main.append(section('flame-section', 'Flame graph',
      el('p', { class: 'note', text: 'Widths are self time under the ' + D.clock + ' clock with paused time cut out, so they add up to the table\'s tottime; a frame\'s width is its cumulative time.' + (D.collapse ? ' Recursion collapsed (' + D.collapse + ').' : '') }),
      el('div', { class: 'controls' }, trees.length > 1 ? el('label', {}, 'stacks ', treeSelect) : null, el('label', {}, 'search ', searchBox),
        el('button', { id: 'flame-reset', onclick: () => fg.reset() }, 'reset zoom')),
      ...flameNotes.map((t) => el('p', { class: 'note', text: t })),
      fg.canvas, fg.info));
    fg.setTree(tree);

    // Timeline.
    if (D.timeline) timelineSection();
    else main.append(section('timeline-section', 'Timeline', el('p', { class: 'note', text: 'A report of several traces has no timeline: open one trace\'s page for it.' })));

    // Stacks.
    stacksSection();

    // Per trace.
    if (D.by_trace.length) byTraceSection();
  }

  // ----------------------------------------------------------- timeline

  function timelineSection() {
    const T = D.timeline;
    const stacks = T.stacks.map((s, k) => {
      let run = 0;
      for (let j = 0; j < s.running.length; j += 2) run += s.running[j + 1] - s.running[j];
      return Object.assign({ k, run, color: 'hsl(' + (hash(s.id) % 360) + ',60%,55%)' }, s);
    });
    const byId = new Map(stacks.map((s) => [s.id, s]));
    const longest = stacks.slice().sort((a, b) => b.run - a.run);
    const N = 40;
    // Every thread's stretches of the shown stacks: [start, end, stack].
    const tids = D.trace.threads.map((t) => t.tid);
    const threadRows = new Map(tids.map((t) => [t, []]));
    for (const s of stacks) {
      for (let j = 0; j < s.threads.length; j += 3) {
        const t = s.threads[j];
        if (!threadRows.has(t)) { threadRows.set(t, []); tids.push(t); }
        threadRows.get(t).push([s.threads[j + 1], s.threads[j + 2], s]);
      }
    }
    for (const r of threadRows.values()) r.sort((a, b) => a[0] - b[0]);
    const threadName = new Map(D.trace.threads.map((t) => [t.tid, t.name]));
    let t0 = D.trace.window ? D.trace.window[0] : D.trace.first_event_ns;
    let t1 = D.trace.window ? D.trace.window[1] : D.trace.end_ns;
    if (!(t1 > t0)) t1 = t0 + 1;
    const full = [t0, t1];
    let selected = null; // a stack
    let picked = null; // [from, to] of a window picked
    const canvas = el('canvas', { id: 'timeline', tabindex: '0' });
    const info = el('div', { id: 'tl-info' });
    const cmd = el('input', { type: 'text', readonly: 'readonly', class: 'cmd', id: 'tl-command', value: 'select a stretch (click) or a window (shift+drag) for its --from/--to command' });
    const AXIS = 22, TRACK = 18, ROW = 14, LEFT = 170;
    let layout = [];
    function rowsShown() {
      const list = longest.slice(0, N);
      if (selected && !list.includes(selected)) list.unshift(selected);
      return list;
    }
    function x(t, w) { return LEFT + ((t - t0) / (t1 - t0)) * (w - LEFT); }
    function tAt(px, w) { return t0 + ((px - LEFT) / (w - LEFT)) * (t1 - t0); }
    function draw() {
      const w = Math.max(400, canvas.parentElement ? canvas.parentElement.clientWidth - 2 : 1000);
      const list = rowsShown();
      const h = AXIS + tids.length * TRACK + 8 + list.length * ROW + 4;
      const dpr = window.devicePixelRatio || 1;
      canvas.width = Math.floor(w * dpr); canvas.height = Math.floor(h * dpr);
      canvas.style.width = w + 'px'; canvas.style.height = h + 'px';
      const g = canvas.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      g.clearRect(0, 0, w, h);
      g.font = '11px ui-monospace, Menlo, Consolas, monospace';
      g.textBaseline = 'middle';
      layout = [];
      // Axis.
      g.fillStyle = '#5d6677';
      const step = niceStep((t1 - t0) / 8);
      for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
        const px = x(t, w);
        g.fillRect(px, AXIS - 6, 1, 6);
        g.fillText(dur(t), px + 2, 8);
      }
      let y = AXIS;
      // Thread tracks: which stack ran when.
      for (const tid of tids) {
        g.fillStyle = '#1d2330';
        const nm = threadName.get(tid);
        g.fillText(clip('thread ' + tid + (nm ? ' ' + nm : ''), 24), 4, y + TRACK / 2);
        g.fillStyle = '#f1f3f6';
        g.fillRect(LEFT, y + 1, w - LEFT, TRACK - 2);
        const spans = threadRows.get(tid) || [];
        drawSpans(g, spans, (s) => [s[0], s[1]], (s) => (selected && s[2] !== selected ? '#c7ccd6' : s[2].color), y + 1, TRACK - 2, w);
        layout.push({ y, h: TRACK, kind: 'thread', tid, spans });
        y += TRACK;
      }
      y += 8;
      // Stack rows: running and paused (waiting, then scheduled after a wake).
      for (const s of list) {
        g.fillStyle = s === selected ? '#2f5fb3' : '#1d2330';
        g.fillText(clip(s.name || s.id, 24), 4, y + ROW / 2);
        const ps = [];
        for (let j = 0; j < s.paused.length; j += 3) {
          const [a, b, woke] = [s.paused[j], s.paused[j + 1], s.paused[j + 2]];
          if (woke >= 0 && woke > a) ps.push([a, woke, 'waiting']);
          if (woke >= 0) ps.push([woke, b, 'scheduled']); else ps.push([a, b, 'waiting']);
        }
        const rs = [];
        for (let j = 0; j < s.running.length; j += 2) rs.push([s.running[j], s.running[j + 1], 'running']);
        drawSpans(g, ps, (p) => [p[0], p[1]], (p) => (p[2] === 'scheduled' ? '#f0a030' : '#d5d9e0'), y + 3, ROW - 6, w);
        drawSpans(g, rs, (p) => [p[0], p[1]], () => s.color, y + 1, ROW - 2, w);
        layout.push({ y, h: ROW, kind: 'stack', stack: s, spans: rs.concat(ps).sort((a, b) => a[0] - b[0]) });
        y += ROW;
      }
      // Marks.
      for (const m of D.marks) {
        if (m.time_ns < t0 || m.time_ns > t1) continue;
        const px = x(m.time_ns, w);
        g.fillStyle = '#8e24aa';
        g.fillRect(px, AXIS, 1, h - AXIS);
        g.fillText(clip(m.name, 20), px + 3, AXIS + 6);
      }
      // The window picked.
      if (picked) {
        g.fillStyle = 'rgba(47,95,179,0.15)';
        const a = x(picked[0], w), b = x(picked[1], w);
        g.fillRect(a, AXIS, Math.max(b - a, 1), h - AXIS);
      }
      g.fillStyle = '#d9dde5';
      g.fillRect(LEFT - 1, 0, 1, h);
      state.timeline = { rows: list.length, threads: tids.length, stacks: stacks.length, view: [t0, t1], selected: selected ? selected.id : null, picked, command: cmd.value };
    }
    function drawSpans(g, spans, range, color, y, hgt, w) {
      // Binary search the first span that ends after t0 (spans sorted by start, they do not overlap much).
      let lastPx = -1, lastColor = null;
      for (const s of spans) {
        const [a, b] = range(s);
        if (b < t0 || a > t1) continue;
        const xa = Math.max(x(a, w), LEFT), xb = Math.min(x(b, w), w);
        const c = color(s);
        const left = Math.floor(xa);
        if (left === lastPx && c === lastColor && xb - xa < 1) continue;
        g.fillStyle = c;
        g.fillRect(xa, y, Math.max(xb - xa, 1), hgt);
        lastPx = left; lastColor = c;
      }
    }
    function niceStep(raw) {
      const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
      for (const m of [1, 2, 5, 10]) if (raw <= m * p) return m * p;
      return 10 * p;
    }
    function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }
    function hit(ev) {
      const r = canvas.getBoundingClientRect();
      const px = ev.clientX - r.left, py = ev.clientY - r.top;
      const row = layout.find((l) => py >= l.y && py < l.y + l.h);
      if (!row) return null;
      if (px < LEFT) return { row };
      const t = tAt(px, r.width);
      // The tolerance of a pixel either way, for stretches thinner than one.
      const tol = (t1 - t0) / (r.width - LEFT);
      let best = null;
      for (const s of row.spans) {
        if (s[0] - tol <= t && t <= s[1] + tol) { best = s; if (s[0] <= t && t <= s[1]) break; }
      }
      return { row, t, span: best };
    }
    function showCommand(a, b, what) {
      picked = [a, b];
      cmd.value = D.command + ' --from ' + Math.floor(a) + 'ns --to ' + Math.ceil(b) + 'ns';
      info.textContent = what + ': ' + dur(a) + ' .. ' + dur(b) + ' (' + dur(b - a) + ')';
      draw();
    }
    let drag = null;
    canvas.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, t0, t1, shift: ev.shiftKey, moved: false }; });
    window.addEventListener('mouseup', (ev) => {
      if (!drag) return;
      const d = drag; drag = null;
      const r = canvas.getBoundingClientRect();
      if (d.shift && d.moved) {
        const a = tAt(Math.min(d.x, ev.clientX) - r.left, r.width), b = tAt(Math.max(d.x, ev.clientX) - r.left, r.width);
        showCommand(Math.max(a, full[0]), Math.min(b, full[1]), 'window');
        return;
      }
      if (d.moved) return;
      const h = hit(ev);
      if (!h) return;
      if (h.row.kind === 'stack' && !h.span) { selectStack(h.row.stack); return; }
      if (!h.span) return;
      if (h.row.kind === 'thread') {
        selected = h.span[2];
        showCommand(h.span[0], h.span[1], (selected.name || selected.id) + ' on thread ' + h.row.tid);
      } else {
        selected = h.row.stack;
        showCommand(h.span[0], h.span[1], (selected.name || selected.id) + ' ' + h.span[2]);
      }
      state.onStack && state.onStack(selected.id);
    });
    canvas.addEventListener('mousemove', (ev) => {
      if (drag) {
        const r = canvas.getBoundingClientRect();
        const dx = ev.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.shift) { if (drag.moved) { const a = tAt(Math.min(drag.x, ev.clientX) - r.left, r.width), b = tAt(Math.max(drag.x, ev.clientX) - r.left, r.width); picked = [a, b]; draw(); } return; }
        if (!drag.moved) return;
        const dt = (dx / (r.width - LEFT)) * (drag.t1 - drag.t0);
        t0 = drag.t0 - dt; t1 = drag.t1 - dt;
        draw();
        return;
      }
      const h = hit(ev);
      if (!h || !h.span) { info.textContent = h && h.row.kind === 'stack' ? (h.row.stack.name || h.row.stack.id) + ': ran ' + dur(h.row.stack.run) : ''; return; }
      const s = h.span;
      const who = h.row.kind === 'thread' ? (s[2].name || s[2].id) + ' on thread ' + h.row.tid : (h.row.stack.name || h.row.stack.id) + ' ' + s[2];
      info.textContent = who + ': ' + dur(s[0]) + ' .. ' + dur(s[1]) + ' (' + dur(s[1] - s[0]) + ')';
    });
    canvas.addEventListener('wheel', (ev) => {
      ev.preventDefault();
      const r = canvas.getBoundingClientRect();
      const at = tAt(ev.clientX - r.left, r.width);
      const f = Math.pow(1.2, ev.deltaY / 100);
      let a = at - (at - t0) * f, b = at + (t1 - at) * f;
      if (b - a < 100) return;
      t0 = Math.max(a, full[0] - (full[1] - full[0])); t1 = Math.min(b, full[1] + (full[1] - full[0]));
      draw();
    }, { passive: false });
    window.addEventListener('resize', draw);
    function selectStack(s) {
      selected = s;
      info.textContent = (s.name || s.id) + ': ran ' + dur(s.run) + ', ' + dur(s.start) + ' .. ' + dur(s.end);
      showCommand(s.start, s.end, (s.name || s.id) + ' from its first stretch to its last');
    }
    // For the browser tests: the middle of the widest running stretch
    // drawn on the first stack row, and the window it stands for.
    state.timelineTarget = () => {
      const w = canvas.getBoundingClientRect().width;
      const row = layout.find((l) => l.kind === 'stack');
      if (!row) return null;
      let best = null;
      for (const s of row.spans) if (s[2] === 'running' && (!best || s[1] - s[0] > best[1] - best[0])) best = s;
      if (!best) return null;
      const a = Math.max(x(best[0], w), LEFT), b = Math.min(x(best[1], w), w);
      return { x: (a + b) / 2, y: row.y + row.h / 2, from: best[0], to: best[1] };
    };
    state.selectStackById = (id) => { const s = byId.get(id); if (s) { selectStack(s); canvas.scrollIntoView({ block: 'center' }); } return !!s; };
    const notesT = [];
    if (T.left_out > 0) notesT.push('The timeline holds the ' + stacks.length + ' busiest stacks; ' + T.left_out + ' more are left out (their stretches are not on the thread tracks either).');
    const merged = stacks.filter((s) => s.merged_below > 0);
    if (merged.length) notesT.push(merged.length + ' stacks had their shortest pauses merged into the stretches around them (up to ' + dur(Math.max(...merged.map((s) => s.merged_below))) + ').');
    main.append(section('timeline-section', 'Timeline',
      el('p', { class: 'note', text: 'A track per thread (which stack it was on), then the ' + Math.min(N, stacks.length) + ' stacks that ran longest: running in their colour, paused in grey (waiting) or orange (scheduled: woken, waiting for a thread). Wheel: zoom; drag: pan; shift+drag: pick a window; click: pick a stretch.' }),
      ...notesT.map((t) => el('p', { class: 'note', text: t })),
      el('div', { class: 'controls' }, el('button', { id: 'tl-reset', onclick: () => { t0 = full[0]; t1 = full[1]; draw(); } }, 'whole trace'),
        el('button', { onclick: () => { if (picked) { t0 = picked[0]; t1 = Math.max(picked[1], picked[0] + 100); draw(); } } }, 'zoom to the pick'),
        el('span', { class: 'legend' }, el('span', {}, el('i', { style: 'background:#d5d9e0' }), 'waiting'), el('span', {}, el('i', { style: 'background:#f0a030' }), 'scheduled'), el('span', {}, el('i', { style: 'background:#8e24aa' }), 'mark'))),
      canvas, info, el('label', { class: 'note' }, 'the same window on the command line:'), cmd));
    draw();
  }

  // -------------------------------------------------------------- stacks

  function stacksSection() {
    const S = D.stacks;
    const scols = [
      { label: 'stack', value: (s) => s.id, text: (s) => s.id },
      { label: 'name', value: (s) => s.name, text: (s) => s.name },
      { label: 'threads', value: (s) => s.threads.join(','), text: (s) => s.threads.join(',') },
      { label: 'running', num: true, value: (s) => s.running_ns, text: (s) => dur(s.running_ns) },
      { label: 'paused', num: true, value: (s) => s.paused_ns, text: (s) => dur(s.paused_ns) },
      { label: 'scheduled', num: true, value: (s) => s.scheduled_ns, text: (s) => dur(s.scheduled_ns) },
      { label: 'waiting', num: true, value: (s) => s.waiting_ns, text: (s) => dur(s.waiting_ns) },
      { label: 'switches', num: true, value: (s) => s.switches_in, text: (s) => String(s.switches_in) },
      { label: 'depth', num: true, value: (s) => s.max_depth, text: (s) => String(s.max_depth) },
      { label: 'events', num: true, value: (s) => s.events, text: (s) => String(s.events) },
      { label: 'ended', value: (s) => (s.ended ? 'yes' : ''), text: (s) => (s.ended ? 'yes' : '') },
    ];
    const st = sortableTable({
      id: 'stacks', columns: scols, rows: S, sortCol: 3, key: (s) => s.id, total: D.stacks_total,
      hiddenWhy: 'the page holds the busiest; the groups count every stack',
      onclick: (s) => { if (!(state.selectStackById && state.selectStackById(s.id))) info.textContent = s.id + ' is not on the timeline (not among the busiest)'; },
    });
    state.onStack = (id) => st.select(id);
    const info = el('p', { class: 'note' });
    const G = D.groups;
    const gcols = [
      { label: 'group', value: (g) => g.name, text: (g) => g.name },
      { label: 'stacks', num: true, value: (g) => g.stacks, text: (g) => String(g.stacks) },
      { label: 'threads', value: (g) => g.threads.join(','), text: (g) => (g.threads.length > 8 ? g.threads.length + ' threads' : g.threads.join(',')) },
      { label: 'running', num: true, value: (g) => g.running_ns, text: (g) => dur(g.running_ns) },
      { label: 'mean running', num: true, value: (g) => g.running_ns / g.stacks, text: (g) => dur(g.running_ns / g.stacks) },
      { label: 'paused', num: true, value: (g) => g.paused_ns, text: (g) => dur(g.paused_ns) },
      { label: 'mean paused', num: true, value: (g) => g.paused_ns / g.stacks, text: (g) => dur(g.paused_ns / g.stacks) },
      { label: 'scheduled', num: true, value: (g) => g.scheduled_ns, text: (g) => dur(g.scheduled_ns) },
      { label: 'waiting', num: true, value: (g) => g.paused_ns - g.scheduled_ns, text: (g) => dur(g.paused_ns - g.scheduled_ns) },
      { label: 'switches', num: true, value: (g) => g.switches_in, text: (g) => String(g.switches_in) },
      { label: 'depth', num: true, value: (g) => g.max_depth, text: (g) => String(g.max_depth) },
      { label: 'events', num: true, value: (g) => g.events, text: (g) => String(g.events) },
    ];
    const gt = sortableTable({ id: 'groups', columns: gcols, rows: G, sortCol: 3, key: (g) => g.name });
    const body = el('div', {}, st.element);
    const tabs = el('div', { class: 'tabs controls' });
    const perStack = el('button', { class: 'on', onclick: () => { body.replaceChildren(st.element); perStack.classList.add('on'); grouped.classList.remove('on'); } }, 'per stack');
    const grouped = el('button', { id: 'stacks-grouped', onclick: () => { body.replaceChildren(gt.element); grouped.classList.add('on'); perStack.classList.remove('on'); } }, 'grouped (request-# as --group)');
    tabs.append(perStack, grouped);
    main.append(section('stacks-section', 'Stacks', tabs, body, info));
  }

  // ------------------------------------------------------------ per trace

  function byTraceSection() {
    const rows = [];
    for (const t of D.by_trace) for (const f of t.functions) rows.push([t, f]);
    const cols = [
      { label: 'trace', value: (r) => r[0].label, text: (r) => r[0].label, tip: (r) => r[0].source },
      { label: 'ncalls', num: true, value: (r) => r[1].ncalls, text: (r) => calls(r[1].ncalls, r[1].primitive_calls) },
      { label: 'tottime', num: true, value: (r) => r[1].tottime_ns, text: (r) => dur(r[1].tottime_ns) },
      { label: 'cumtime', num: true, value: (r) => r[1].cumtime_ns, text: (r) => dur(r[1].cumtime_ns) },
      { label: 'paused', num: true, value: (r) => r[1].paused_ns, text: (r) => dur(r[1].paused_ns) },
      { label: 'function (file:line)', fn: true, value: (r) => label(r[1]), text: (r) => label(r[1]) },
    ];
    const t = sortableTable({ id: 'by-trace', columns: cols, rows, limit: 300 });
    t.sortBy(2, true);
    const traces = el('ul');
    for (const tr of D.by_trace) traces.append(el('li', {}, tr.label + ': ' + dur(tr.duration_ns) + ', ' + tr.functions_total + ' functions' + (tr.functions_total > tr.functions.length ? ' (the ' + tr.functions.length + ' with the most self time here)' : '')));
    main.append(section('by-trace-section', 'Per trace', el('p', { class: 'note', text: D.by_trace.length + ' traces summed into the report above (--by-trace):' }), traces, t.element));
  }

  // ---------------------------------------------------------------- diff

  function diffPage() {
    const lines = D.notes.slice();
    const box = warningsBox([], lines);
    if (box) notes.append(box);
    if (D.gate) {
      const g = D.gate;
      const ok = !g.breaches.length;
      const gbox = el('div', { id: 'gate', class: ok ? 'gate-pass' : 'gate-fail' },
        el('b', { text: ok ? 'gate passed' : 'gate failed: ' + g.breaches.length + (g.breaches.length === 1 ? ' row breaks' : ' rows break') + ' a --fail-if rule' }),
        el('div', { text: 'rules: ' + g.rules.join('; ') }));
      for (const b of g.breaches) gbox.append(el('div', { class: 'mono', text: 'fail-if ' + b }));
      notes.append(gbox);
    }
    const F = D.functions;
    const side = (f, k) => (f[k] ? f[k] : null);
    const v = (f, s, key) => (side(f, s) ? side(f, s)[key] : 0);
    const show = (f, s, key, ncalls) => (side(f, s) ? (ncalls ? String(side(f, s)[key]) : dur(side(f, s)[key])) : '-');
    const change = (d) => (d > 0 ? 'slower' : d < 0 ? 'faster' : '');
    // Self time is coloured by the significance test's verdict, never by noise.
    const verdict = (f) => (f.verdict === 'slower' || f.verdict === 'faster' ? f.verdict : '');
    const cols = [
      { label: 'base tottime', num: true, value: (f) => v(f, 'base', 'tottime_ns'), text: (f) => show(f, 'base', 'tottime_ns') },
      { label: 'new tottime', num: true, value: (f) => v(f, 'new', 'tottime_ns'), text: (f) => show(f, 'new', 'tottime_ns') },
      { label: 'Δ tottime', num: true, value: (f) => f.delta.tottime_ns, text: (f) => signedDur(f.delta.tottime_ns), cls: (f) => verdict(f), title: 'new minus base: slower first; click again for faster first (coloured only when significant)' },
      { label: 'Δ%', num: true, value: (f) => (f.base ? f.delta.tottime_ns / Math.max(f.base.tottime_ns, 1) : 1e18), text: (f) => (f.new ? pct(f.delta.tottime_ns, v(f, 'base', 'tottime_ns')) : 'gone'), cls: (f) => verdict(f) },
      { label: 'p', num: true, value: (f) => (f.p_value == null ? 2 : f.p_value), text: (f) => (f.p_value == null ? '-' : f.p_value < 0.001 ? '<0.001' : f.p_value.toFixed(3)), title: 'p-value of the significance test of the self-time change (-: none could be made)' },
      { label: 'verdict', value: (f) => f.verdict, text: (f) => f.verdict, cls: (f) => verdict(f), title: 'slower or faster only when significant; noise otherwise' },
      { label: 'base cumtime', num: true, value: (f) => v(f, 'base', 'cumtime_ns'), text: (f) => show(f, 'base', 'cumtime_ns') },
      { label: 'new cumtime', num: true, value: (f) => v(f, 'new', 'cumtime_ns'), text: (f) => show(f, 'new', 'cumtime_ns') },
      { label: 'Δ cumtime', num: true, value: (f) => f.delta.cumtime_ns, text: (f) => signedDur(f.delta.cumtime_ns), cls: (f) => change(f.delta.cumtime_ns) },
      { label: 'Δ paused', num: true, value: (f) => f.delta.paused_ns, text: (f) => signedDur(f.delta.paused_ns), cls: (f) => change(f.delta.paused_ns) },
      { label: 'ncalls', num: true, value: (f) => Math.abs(f.delta.ncalls), text: (f) => show(f, 'base', 'ncalls', true) + ' → ' + show(f, 'new', 'ncalls', true) },
      { label: 'function (file:line)', fn: true, value: (f) => label(f), text: (f) => label(f) + (f.matched === 'name' ? ' [moved]' : f.matched === 'new' ? ' [new]' : f.matched === 'gone' ? ' [gone]' : '') },
    ];
    // What got slower first (the CLI orders by the size of the change, either way).
    const t = sortableTable({ id: 'diff', columns: cols, rows: F, key: (f) => label(f), total: D.functions_total });
    t.sortBy(2, true);
    const filterBox = el('input', { type: 'text', id: 'filter', placeholder: 'regex on name and file:line' });
    filterBox.addEventListener('input', () => {
      const re = regexOf(filterBox.value);
      filterBox.classList.toggle('bad', re === undefined);
      if (re !== undefined) t.setFilter(re ? (f) => re.test(f.function) || re.test(f.file + ':' + f.line + ' ' + f.function) : null);
    });
    main.append(section('diff-section', 'What changed',
      el('p', { class: 'note', text: 'Rows by the change of self time, what got slower first (click Δ tottime again for what got faster): red got slower, blue faster.' }),
      el('div', { class: 'controls' }, el('label', {}, 'filter ', filterBox)), t.element));

    // Differential flame graph: widths are the new trace's; colour the change.
    const tr = D.tree;
    const names = D.names;
    let maxRel = 0;
    for (let i = 1; i < tr.parent.length; i++) {
      const d = Math.abs(tr.self[i] - tr.base_self[i]);
      if (d > maxRel) maxRel = d;
    }
    const fg = flameGraph({
      id: 'flame',
      name: (i) => names[tr.func[i]] || '?',
      rootName: () => 'all (new ' + dur(tr.total[0]) + ', base ' + dur(tr.base_total[0]) + ')',
      width: (i) => tr.total[i],
      color: (i) => {
        const d = tr.self[i] - tr.base_self[i];
        const a = maxRel ? Math.min(1, Math.abs(d) / maxRel) : 0;
        const l = 92 - 42 * Math.sqrt(a);
        return d > 0 ? 'hsl(0,75%,' + l + '%)' : d < 0 ? 'hsl(215,75%,' + l + '%)' : 'hsl(220,10%,88%)';
      },
      describe: (i) => {
        if (i === 0) return 'all: new ' + dur(tr.total[0]) + ', base ' + dur(tr.base_total[0]);
        return names[tr.func[i]] + ': new ' + dur(tr.total[i]) + ', base ' + dur(tr.base_total[i]) + ' (' + pct(tr.total[i] - tr.base_total[i], tr.base_total[i]) + '); self ' + dur(tr.base_self[i]) + ' → ' + dur(tr.self[i]);
      },
      describeMatch: (ns) => dur(ns) + ' of the new trace\'s ' + dur(tr.total[0]),
    });
    const searchBox = el('input', { type: 'text', id: 'flame-search', placeholder: 'search: regex on function names' });
    searchBox.addEventListener('input', () => { const re = regexOf(searchBox.value); if (re !== undefined) fg.setSearch(re); });
    const parts = [el('p', { class: 'note', text: 'Widths are the new trace\'s self time per call path' + (D.collapse ? ' (recursion collapsed: ' + D.collapse + ')' : '') + '; red: more self time than in the base, blue: less. Paths only in the base have no width.' })];
    if (tr.parent.length <= 1) parts.push(el('p', { class: 'note', text: 'No call paths to draw.' }));
    if (tr.left_out) parts.push(el('p', { class: 'note', text: tr.left_out + ' small call paths are not in the page.' }));
    main.append(section('flame-section', 'Differential flame graph', ...parts,
      el('div', { class: 'controls' }, el('label', {}, 'search ', searchBox), el('button', { id: 'flame-reset', onclick: () => fg.reset() }, 'reset zoom')),
      fg.canvas, fg.info));
    fg.setTree(tr);
  }
  state.ready = true;
})();
