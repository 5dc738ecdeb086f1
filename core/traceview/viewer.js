// rlm trace view: renders the trace embedded in #trace-data.
//
// The tree is built lazily: a node's body is made the first time it is
// opened, lists longer than LIST_CAP show their head and a button for the
// rest, and texts longer than TEXT_CAP show their head and a button. So a
// trace of thousands of events opens as fast as a small one; a small one
// (ITEMS_OPEN nodes or fewer) opens whole. Search runs over the data, not
// the DOM, and opens the path to what it found.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('trace-data').textContent);
  var TEXT_CAP = 20000, LIST_CAP = 200, ITEMS_OPEN = 400, HITS_CAP = 200;
  var app = document.getElementById('app');
  var Q = ''; // the current search, lower case
  // entering is set from an Enter that revealed a node until that key is
  // released: its keypress would otherwise "click" the head reveal
  // focused, closing the node again.
  var entering = false;
  document.addEventListener('keyup', function (e) { if (e.key === 'Enter') entering = false; });

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function badge(text, kind) { return el('span', 'badge ' + kind, text); }
  function oneLine(s, n) {
    s = (s || '').replace(/\s+/g, ' ').trim();
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }
  function num(n) { return Number(n || 0).toLocaleString('en-US'); }
  function dur(ms) {
    ms = ms || 0;
    return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(1) + ' s';
  }
  function stats(s, wall) {
    if (!s) return '';
    var parts = [];
    if (s.in || s.out) parts.push(num(s.in) + ' → ' + num(s.out) + ' tok');
    if (s.cost) parts.push('$' + s.cost.toFixed(4));
    if (s.calls > 1) parts.push(s.calls + ' calls');
    if (wall !== false) parts.push(dur(s.ms));
    return parts.join(' · ');
  }

  // ---- the node specs: every collapsible thing, with its parent ----
  var specs = new Map();
  var loopsById = new Map();
  D.loops.forEach(function (l) { loopsById.set(l.id, l); });
  function spec(key, kind, parent, data, extra) {
    var s = { key: key, kind: kind, parent: parent, data: data, open: false, el: null, filled: false };
    for (var k in extra) s[k] = extra[k];
    specs.set(key, s);
    return s;
  }
  var childOf = new Map(); // child loop id -> cell key
  D.loops.forEach(function (l) {
    (l.iters || []).forEach(function (it, i) {
      (it.cells || []).forEach(function (c, j) {
        (c.subs || []).forEach(function (s) {
          if (s.child != null) childOf.set(s.child, 'L' + l.id + '.i' + i + '.c' + j);
        });
      });
    });
  });
  var roots = [];
  D.loops.forEach(function (l) {
    var lk = 'L' + l.id;
    var parent = childOf.has(l.id) && loopsById.has(l.parent) ? childOf.get(l.id) : null;
    spec(lk, 'loop', parent, l, { loop: l });
    if (!parent) roots.push(lk);
    (l.iters || []).forEach(function (it, i) {
      var ik = lk + '.i' + i;
      spec(ik, 'iter', lk, it, { loop: l });
      (it.cells || []).forEach(function (c, j) {
        var ck = ik + '.c' + j;
        spec(ck, 'cell', ik, c, { loop: l, iter: it });
        (c.subs || []).forEach(function (s, k) {
          if (s.child != null && loopsById.has(s.child)) return; // the child loop is the node
          spec(ck + '.s' + k, 'sub', ck, s, { loop: l });
        });
      });
    });
  });
  function children(sp) {
    var out = [], d = sp.data;
    if (sp.kind === 'loop') (d.iters || []).forEach(function (_, i) { out.push(sp.key + '.i' + i); });
    if (sp.kind === 'iter') (d.cells || []).forEach(function (_, j) { out.push(sp.key + '.c' + j); });
    if (sp.kind === 'cell') (d.subs || []).forEach(function (s, k) {
      out.push(s.child != null && loopsById.has(s.child) ? 'L' + s.child : sp.key + '.s' + k);
    });
    return out;
  }
  function where(sp) {
    var names = [];
    for (var s = sp; s; s = s.parent ? specs.get(s.parent) : null) names.unshift(title(s));
    return names.join(' › ');
  }
  function title(sp) {
    var d = sp.data;
    switch (sp.kind) {
      case 'loop': return 'loop ' + d.id + (d.depth === 0 && d.parent == null ? ' (root)' : ' (depth ' + d.depth + ')');
      case 'iter': return d.forced ? 'forced answer' : 'iteration ' + d.n;
      case 'cell': return 'block ' + d.block;
      case 'sub': return d.kind === 'llm_query' ? 'llm_query' : 'rlm_query (one model call)';
    }
    return sp.key;
  }

  // ---- text blocks: capped, syntax-coloured code, marked search hits ----
  var PY = /(#[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|[rRbBfFuU]{0,2}"(?:\\.|[^"\\\n])*"|[rRbBfFuU]{0,2}'(?:\\.|[^'\\\n])*')|\b(and|as|assert|async|await|break|class|continue|def|del|elif|else|except|finally|for|from|global|if|import|in|is|lambda|None|nonlocal|not|or|pass|raise|return|True|False|try|while|with|yield)\b|\b(\d+(?:\.\d+)?)\b|\b(print|len|range|sorted|FINAL|FINAL_VAR|llm_query|llm_query_batched|rlm_query|rlm_query_batched|context|search_context|chunk_text|SHOW_VARS)\b/g;
  var TOK = [null, 'tok-com', 'tok-str', 'tok-kw', 'tok-num', 'tok-fn'];
  function colour(pre, s) {
    var at = 0, m;
    PY.lastIndex = 0;
    while ((m = PY.exec(s)) !== null) {
      if (m[0] === '') { PY.lastIndex++; continue; }
      if (m.index > at) pre.appendChild(document.createTextNode(s.slice(at, m.index)));
      var cls = null;
      for (var g = 1; g < TOK.length; g++) if (m[g] !== undefined) { cls = TOK[g]; break; }
      pre.appendChild(el('span', cls, m[0]));
      at = m.index + m[0].length;
    }
    if (at < s.length) pre.appendChild(document.createTextNode(s.slice(at)));
  }
  function marked(pre, s, q) {
    var low = s.toLowerCase(), at = 0, i;
    while (q && (i = low.indexOf(q, at)) >= 0) {
      if (i > at) pre.appendChild(document.createTextNode(s.slice(at, i)));
      pre.appendChild(el('mark', null, s.slice(i, i + q.length)));
      at = i + q.length;
    }
    if (at < s.length) pre.appendChild(document.createTextNode(s.slice(at)));
  }
  function fillPre(pre, s, code) {
    pre.textContent = '';
    if (Q && s.toLowerCase().indexOf(Q) >= 0) marked(pre, s, Q);
    else if (code) colour(pre, s);
    else pre.textContent = s;
  }
  function textBlock(label, text, cls, field, code) {
    var b = el('div', 'block');
    b.dataset.field = field;
    if (label) b.appendChild(el('div', 'label', label));
    var pre = el('pre', cls);
    b.appendChild(pre);
    text = text || '';
    var cut = text.length > TEXT_CAP && !(Q && text.toLowerCase().indexOf(Q) >= TEXT_CAP - Q.length);
    fillPre(pre, cut ? text.slice(0, TEXT_CAP) : text, code);
    if (cut) {
      var more = el('button', 'more', 'show all ' + num(text.length) + ' characters (' + num(text.length - TEXT_CAP) + ' more)');
      more.addEventListener('click', function () { fillPre(pre, text, code); more.remove(); });
      b.appendChild(more);
    }
    return b;
  }
  function line(text, cls) { return el('div', 'line ' + (cls || ''), text); }

  // ---- nodes ----
  function head(sp) {
    var d = sp.data, h = el('button', 'head');
    h.type = 'button';
    h.setAttribute('aria-expanded', 'false');
    h.appendChild(el('span', 'tw', '▸'));
    h.appendChild(el('span', 'name', title(sp)));
    var sum = el('span', 'sum'), st = el('span', 'st');
    h.appendChild(sum);
    h.appendChild(st);
    switch (sp.kind) {
      case 'loop':
        sum.textContent = d.task ? oneLine(d.task, 120) : '';
        st.textContent = stats(d.total);
        if (d.error) h.insertBefore(badge('failed', 'bad'), sum);
        else if (d.done) h.insertBefore(badge('answered (' + d.source + ')', 'ok'), sum);
        else h.insertBefore(badge('unfinished', 'warn'), sum);
        break;
      case 'iter': {
        var cells = (d.cells || []).length;
        sum.textContent = d.model ? oneLine(d.model.text, 140) : (d.errors ? oneLine(d.errors[0], 140) : '');
        st.textContent = (cells ? cells + (cells === 1 ? ' block · ' : ' blocks · ') : '') + stats(d.stats);
        if (d.forced) h.insertBefore(badge('forced', 'warn'), sum);
        if (d.final) h.insertBefore(badge('✔ ' + d.final.source, 'ok'), sum);
        if (d.errors) h.insertBefore(badge('model error', 'bad'), sum);
        if (d.warnings) h.insertBefore(badge('budget warning', 'warn'), sum);
        break;
      }
      case 'cell': {
        sum.textContent = oneLine((d.code || '').split('\n').filter(function (x) { return x.trim(); })[0] || '', 120);
        var n = (d.subs || []).length;
        st.textContent = (n ? n + (n === 1 ? ' sub-call · ' : ' sub-calls · ') : '') + stats(d.stats);
        if (d.running) h.insertBefore(badge('no result: the trace ends here', 'warn'), sum);
        else if (d.timed_out || (d.ended_by && d.ended_by !== 'exit')) h.insertBefore(badge(d.ended_by || 'timeout', 'bad'), sum);
        else if (d.error) h.insertBefore(badge('error', 'bad'), sum);
        if (d.state_lost) h.insertBefore(badge('REPL restarted', 'bad'), sum);
        if (d.truncated) h.insertBefore(badge('output cut', 'warn'), sum);
        break;
      }
      case 'sub':
        sum.textContent = oneLine(d.prompt, 120);
        st.textContent = d.call ? stats({ in: d.call.in, out: d.call.out, cost: d.call.cost, ms: d.call.ms, calls: 1 }) : '';
        if (d.error) h.insertBefore(badge('failed', 'bad'), sum);
        else if (!d.done) h.insertBefore(badge('no answer: the trace ends here', 'warn'), sum);
        break;
    }
    return h;
  }
  function node(sp) {
    var n = el('div', 'node ' + sp.kind + (sp.kind === 'loop' && sp.parent ? ' child' : ''));
    n.dataset.key = sp.key;
    n.dataset.kind = sp.kind;
    var h = head(sp), body = el('div', 'body');
    body.hidden = true;
    h.addEventListener('click', function () { if (!entering) setOpen(sp, !sp.open); });
    n.appendChild(h);
    n.appendChild(body);
    sp.el = n;
    return n;
  }
  function setOpen(sp, open) {
    var h = sp.el.firstChild, body = sp.el.lastChild;
    if (open && !sp.filled) { fill(sp, body); sp.filled = true; }
    sp.open = open;
    body.hidden = !open;
    h.setAttribute('aria-expanded', String(open));
    h.firstChild.textContent = open ? '▾' : '▸';
  }
  function refill(sp) {
    if (!sp.filled) return;
    var body = sp.el.lastChild;
    // Keep the child nodes (they may be open); rebuild only the texts.
    var kids = Array.prototype.filter.call(body.children, function (c) { return c.classList.contains('node'); });
    body.textContent = '';
    sp.listEl = null;
    fill(sp, body, kids);
  }
  // list renders child nodes, the first LIST_CAP of them and a button for
  // the rest; reuse holds nodes already made (refill).
  function list(sp, body, reuse) {
    var keys = children(sp), made = new Map();
    (reuse || []).forEach(function (n) { made.set(n.dataset.key, n); });
    var box = el('div', 'kids');
    function add(from, to) {
      for (var i = from; i < to; i++) {
        var c = specs.get(keys[i]);
        if (!c) continue;
        box.appendChild(made.get(keys[i]) || node(c));
      }
    }
    var shown = sp.all ? keys.length : Math.min(keys.length, LIST_CAP);
    add(0, shown);
    if (keys.length > shown) {
      var more = el('button', 'more', 'show the other ' + num(keys.length - shown));
      more.addEventListener('click', function () { more.remove(); add(shown, keys.length); sp.all = true; });
      sp.more = function () { if (more.isConnected) more.click(); };
      box.appendChild(more);
    }
    body.appendChild(box);
  }
  function fill(sp, body, reuse) {
    var d = sp.data;
    switch (sp.kind) {
      case 'loop':
        if (sp.parent && d.task) body.appendChild(textBlock('task given by rlm_query' + (d.context_chars ? ' (context ' + num(d.context_chars) + ' characters)' : ''), d.task, '', 'task'));
        body.appendChild(line('own: ' + (stats(d.own, false) || 'no model calls') + ' · with its sub-calls: ' + stats(d.total), 'st'));
        list(sp, body, reuse);
        if (d.error) body.appendChild(line('✘ ' + d.error, 'bad'));
        else if (d.done) body.appendChild(textBlock('answer (' + d.source + ')', d.answer, 'out', 'answer'));
        else body.appendChild(line('this loop has no answer in the trace', 'warn'));
        break;
      case 'iter':
        (d.warnings || []).forEach(function (w) { body.appendChild(line('! budget warning: ' + w, 'warn')); });
        (d.errors || []).forEach(function (e) { body.appendChild(line('✘ model call failed: ' + e, 'bad')); });
        if (d.model) {
          var m = d.model;
          body.appendChild(textBlock('model' + (d.forced ? ', asked for its best answer' : '') + ' · ' + (m.model || '?') + ' · ' +
            stats({ in: m.in, out: m.out, cost: m.cost, ms: m.ms }) + (m.attempts > 1 ? ' · ' + m.attempts + ' attempts' : ''), m.text, 'reply', 'reply'));
        }
        list(sp, body, reuse);
        if (d.final) body.appendChild(textBlock('✔ answer · ' + d.final.how, d.final.answer, 'out', 'final'));
        break;
      case 'cell': {
        body.appendChild(textBlock('code', d.code, 'code', 'code', true));
        var bad = d.error || d.timed_out || (d.ended_by && d.ended_by !== 'exit');
        if (d.running) body.appendChild(line('the trace ends before this block\'s result', 'warn'));
        else body.appendChild(textBlock('output · ' + (d.ended_by || '?') + ' in ' + dur(d.ms) + (d.state_lost ? ' · the REPL was restarted: its variables are lost' : ''), d.output, bad ? 'err' : 'out', 'output'));
        list(sp, body, reuse);
        break;
      }
      case 'sub':
        if (d.message) body.appendChild(line(d.message, 'warn'));
        body.appendChild(textBlock('prompt', d.prompt, '', 'prompt'));
        if (d.error) body.appendChild(line('✘ ' + d.error, 'bad'));
        else if (d.done) body.appendChild(textBlock('answer' + (d.call ? ' · ' + (d.call.model || '') : ''), d.answer, 'out', 'answer'));
        break;
    }
  }
  function openAll(limit) {
    var n = 0;
    function walk(key) {
      var sp = specs.get(key);
      if (!sp || n >= limit) return;
      if (!sp.el) return;
      if (!sp.open) setOpen(sp, true);
      n++;
      if (sp.more) sp.more();
      children(sp).forEach(walk);
    }
    roots.forEach(walk);
    return n;
  }
  function closeAll() {
    specs.forEach(function (sp) { if (sp.el && sp.open) setOpen(sp, false); });
  }

  // reveal opens every node from the root down to key and shows it.
  function reveal(key) {
    var chain = [];
    for (var s = specs.get(key); s; s = s.parent ? specs.get(s.parent) : null) chain.unshift(s);
    chain.forEach(function (sp, i) {
      if (!sp.el && i > 0 && chain[i - 1].more) chain[i - 1].more();
      if (!sp.el) return;
      if (!sp.open) setOpen(sp, true);
    });
    var sp = specs.get(key);
    if (!sp || !sp.el) return;
    refill(sp);
    document.querySelectorAll('.node.target').forEach(function (n) { n.classList.remove('target'); });
    sp.el.classList.add('target');
    sp.el.scrollIntoView({ block: 'start' });
    sp.el.firstChild.focus({ preventScroll: true });
  }

  // ---- search over the data ----
  var index = null;
  function buildIndex() {
    index = [];
    function add(key, field, text) { if (text) index.push({ key: key, field: field, text: text, low: text.toLowerCase() }); }
    specs.forEach(function (sp) {
      var d = sp.data;
      switch (sp.kind) {
        case 'loop': if (sp.parent) add(sp.key, 'task', d.task); add(sp.key, 'answer', d.answer); break;
        case 'iter':
          if (d.model) add(sp.key, 'model reply', d.model.text);
          (d.errors || []).forEach(function (e) { add(sp.key, 'error', e); });
          break;
        case 'cell': add(sp.key, 'code', d.code); add(sp.key, 'output', d.output); break;
        case 'sub': add(sp.key, 'prompt', d.prompt); add(sp.key, 'answer', d.answer); break;
      }
    });
  }
  function search(q) {
    Q = q.toLowerCase();
    var res = document.getElementById('results');
    res.textContent = '';
    res.dataset.query = q;
    document.querySelectorAll('.node.target').forEach(function (n) { n.classList.remove('target'); });
    if (!Q) return;
    if (!index) buildIndex();
    var hits = 0;
    for (var i = 0; i < index.length; i++) {
      var e = index[i], at = e.low.indexOf(Q);
      if (at < 0) continue;
      hits++;
      if (hits > HITS_CAP) continue;
      var b = el('button', 'hit');
      b.type = 'button';
      b.dataset.key = e.key;
      b.dataset.field = e.field;
      b.appendChild(el('div', 'where', where(specs.get(e.key)) + ' · ' + e.field));
      var from = Math.max(0, at - 50), snip = el('div', 'snip');
      marked(snip, (from > 0 ? '…' : '') + e.text.slice(from, at + Q.length + 70).replace(/\s+/g, ' '), Q);
      b.appendChild(snip);
      b.addEventListener('click', (function (key) { return function () { reveal(key); }; })(e.key));
      res.appendChild(b);
    }
    var c = el('div', 'count', hits === 0 ? 'no match' : hits + (hits === 1 ? ' match' : ' matches') + (hits > HITS_CAP ? ' (the first ' + HITS_CAP + ' listed)' : ''));
    c.id = 'hit-count';
    res.insertBefore(c, res.firstChild);
  }

  // ---- the page ----
  function render() {
    document.title = 'rlm · ' + D.title;
    var h1 = el('h1', null, 'rlm trace ');
    h1.appendChild(el('small', null, D.started ? 'run of ' + D.started : ''));
    app.appendChild(h1);
    var meta = [];
    if (D.provider) meta.push('provider ' + D.provider);
    if (D.model) meta.push('model ' + D.model);
    if (D.subcall_model) meta.push('sub-calls ' + D.subcall_model);
    for (var k in (D.extra || {})) meta.push(k + ' ' + D.extra[k]);
    if (meta.length) app.appendChild(el('div', 'meta', meta.join(' · ')));
    if (D.budget) app.appendChild(el('div', 'meta', 'budget: ' + D.budget));
    if (D.context) app.appendChild(el('div', 'meta', 'context: ' + D.context));

    if (D.notes && D.notes.length) {
      var n = el('div', 'panel notice');
      n.id = 'notice';
      n.setAttribute('role', 'alert');
      n.appendChild(el('div', 'label', 'incomplete trace'));
      n.appendChild(el('div', null, 'This trace is incomplete; the page shows what could be read.'));
      var ul = el('ul');
      D.notes.forEach(function (t) { ul.appendChild(el('li', null, t)); });
      n.appendChild(ul);
      app.appendChild(n);
    }
    var task = el('div', 'panel');
    task.id = 'task';
    task.appendChild(el('div', 'label', 'task'));
    task.appendChild(el('div', 'text', D.task || '(the trace has no run_start: task unknown)'));
    app.appendChild(task);

    var ans = el('div', 'panel');
    ans.id = 'answer';
    if (D.ended && !D.error) {
      ans.appendChild(el('div', 'label', 'answer · ' + (D.source || '') + (D.how ? ' · ' + D.how : '')));
      ans.appendChild(el('div', 'text', D.answer));
    } else {
      ans.classList.add('failed');
      ans.appendChild(el('div', 'label', D.ended ? 'no answer' : 'no answer in this trace'));
      ans.appendChild(el('div', 'text', D.error || 'the trace ends before the run did'));
    }
    if (D.totals) {
      var t = D.totals;
      ans.appendChild(el('div', 'meta totals', (D.totals_partial ? 'so far: ' : 'totals: ') +
        num(t.input_tokens) + ' input + ' + num(t.output_tokens) + ' output tokens · $' + (t.cost_usd || 0).toFixed(4) + ' · ' +
        t.calls + ' model calls · ' + t.iterations + ' iterations · ' + t.subcalls + ' sub-calls · max depth ' + t.max_depth_reached +
        ' · ' + dur(t.duration_ms)));
    }
    app.appendChild(ans);

    var bar = el('div', 'toolbar');
    var input = el('input');
    input.id = 'search';
    input.type = 'search';
    input.placeholder = 'Search code, outputs, replies and prompts (press / )';
    input.setAttribute('aria-label', 'search the trace');
    var timer = null;
    input.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { search(input.value); }, 120);
    });
    input.addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); entering = true; clearTimeout(timer); search(input.value); var f = document.querySelector('#results .hit'); if (f) reveal(f.dataset.key); }
      if (e.key === 'Escape') { input.value = ''; search(''); }
      if (e.key === 'ArrowDown') { var h = document.querySelector('#results .hit'); if (h) { h.focus(); e.preventDefault(); } }
    });
    bar.appendChild(input);
    var ex = el('button', null, 'expand all');
    ex.id = 'expand-all';
    ex.type = 'button';
    ex.addEventListener('click', function () { openAll(2000); });
    var co = el('button', null, 'collapse all');
    co.type = 'button';
    co.addEventListener('click', closeAll);
    bar.appendChild(ex);
    bar.appendChild(co);
    app.appendChild(bar);
    var res = el('div');
    res.id = 'results';
    app.appendChild(res);

    var tree = el('div');
    tree.id = 'tree';
    roots.forEach(function (k) { tree.appendChild(node(specs.get(k))); });
    app.appendChild(tree);
    if (D.items <= ITEMS_OPEN) openAll(ITEMS_OPEN * 2);
    else roots.forEach(function (k) { setOpen(specs.get(k), true); });

    var help = el('div', 'help');
    help.innerHTML = '<kbd>/</kbd> search · <kbd>Enter</kbd> go to the first match · <kbd>↑</kbd><kbd>↓</kbd> move · <kbd>→</kbd> open · <kbd>←</kbd> close · ' +
      'Generated by <code>rlm trace view</code> from ' + num(D.events) + ' events.';
    app.appendChild(help);
  }

  // ---- keyboard ----
  function visibleHeads() {
    return Array.prototype.filter.call(document.querySelectorAll('#tree .head'), function (h) { return h.offsetParent !== null; });
  }
  document.addEventListener('keydown', function (e) {
    var t = e.target;
    if (e.key === '/' && t.tagName !== 'INPUT') { e.preventDefault(); document.getElementById('search').focus(); return; }
    if (t.classList && t.classList.contains('hit')) {
      if (e.key === 'Enter') { e.preventDefault(); entering = true; reveal(t.dataset.key); return; }
      if (e.key === 'ArrowDown' && t.nextElementSibling) { t.nextElementSibling.focus(); e.preventDefault(); }
      if (e.key === 'ArrowUp') { (t.previousElementSibling && t.previousElementSibling.classList.contains('hit') ? t.previousElementSibling : document.getElementById('search')).focus(); e.preventDefault(); }
      return;
    }
    if (!(t.classList && t.classList.contains('head'))) return;
    var sp = specs.get(t.parentNode.dataset.key);
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      var hs = visibleHeads(), i = hs.indexOf(t) + (e.key === 'ArrowDown' ? 1 : -1);
      if (i >= 0 && i < hs.length) hs[i].focus();
      e.preventDefault();
    } else if (e.key === 'ArrowRight') {
      if (!sp.open) setOpen(sp, true);
      e.preventDefault();
    } else if (e.key === 'ArrowLeft') {
      if (sp.open) setOpen(sp, false);
      else if (sp.parent && specs.get(sp.parent).el) specs.get(sp.parent).el.firstChild.focus();
      e.preventDefault();
    }
  });

  render();
  document.body.dataset.ready = '1';
})();
