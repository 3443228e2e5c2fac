// The orch board's page: it draws the views orch serve sends on its event
// stream (one JSON view per message, the newest first). It builds the DOM
// with textContent only: plan names are checked, but statuses and reasons
// are whatever a worker wrote.
'use strict';

const token = new URLSearchParams(location.search).get('token') || '';
let view = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) {
    if (k === undefined || k === null || k === '') continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function ms(t) {
  if (!t || t.startsWith('0001-')) return 0;
  return Date.parse(t) || 0;
}

function dur(d) {
  if (d < 0) d = 0;
  const s = Math.floor(d / 1000);
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm' + String(s % 60).padStart(2, '0') + 's';
  const h = Math.floor(m / 60);
  return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
}

function ago(t) {
  const at = ms(t);
  return at ? dur(Date.now() - at) : '';
}

function clock(t) {
  const at = ms(t);
  return at ? new Date(at).toLocaleTimeString() : '';
}

// outcomeClass maps a bar's outcome to its colour.
function outcomeClass(b) {
  if (b.running) return 'o-running';
  switch (b.outcome) {
    case 'done': case 'verified': case 'integrated': case 'verifying': return 'o-done';
    case 'failed': case 'timed-out': case 'conflict': case 'refuted': return 'o-failed';
    case 'blocked': case 'needs-input': return 'o-blocked';
    case 'taken back': return 'o-taken';
  }
  return '';
}

function state(s) {
  return el('span', { class: 'state s-' + s }, s);
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function render() {
  const v = view;
  if (!v) return;
  $('meta').textContent = [v.session && 'session ' + v.session, v.isolation, 'frame ' + v.seq,
    v.rejected ? v.rejected + ' events rejected' : ''].filter(Boolean).join(' · ');
  $('note').hidden = !v.note;
  $('note').textContent = v.note || '';
  const probs = v.problems || [];
  $('problems').hidden = probs.length === 0;
  $('problems').replaceChildren(...probs.map((p) => el('li', {}, p)));

  const att = v.attention || [];
  $('attention').replaceChildren(...(att.length ? att.map((a) => el('li', { class: 'alert k-' + a.kind, 'data-kind': a.kind },
    el('span', { class: 'kind' }, a.kind), a.plan ? el('code', {}, a.plan) : '', a.worker ? ' on ' + a.worker : '',
    ': ', a.text, a.since ? el('span', { class: 'quiet elapsed', 'data-since': a.since }, ' (' + ago(a.since) + ')') : ''))
    : [el('li', { class: 'quiet' }, 'nothing')]));

  fill($('workers').tBodies[0], (v.workers || []).map((w) => el('tr', { class: w.alert ? 'alert' : '', 'data-worker': w.id },
    el('td', {}, w.id), el('td', {}, state(w.state)), el('td', {}, w.plan ? el('code', {}, w.plan) : ''),
    el('td', { class: 'elapsed', 'data-since': w.since }, ago(w.since)),
    el('td', {}, w.last || ''),
    el('td', {}, [w.profile, w.headless ? 'headless' : w.pane, w.host].filter(Boolean).join(' · ')),
    el('td', {}, w.reason || ''))));

  fill($('plans').tBodies[0], (v.plans || []).map((p) => el('tr', { class: p.alert ? 'alert' : '', 'data-plan': p.name, 'data-state': p.state },
    el('td', {}, el('code', {}, p.name)), el('td', {}, state(p.state)), el('td', {}, p.attempt || ''),
    el('td', {}, p.worker || ''), el('td', {}, (p.depends_on || []).join(', '), p.waiting ? el('div', { class: 'quiet' }, p.waiting) : ''),
    el('td', {}, p.gates || ''), el('td', {}, p.verdict || ''), el('td', {}, p.tokens || ''),
    el('td', {}, p.reason || p.status || ''),
    el('td', { class: 'elapsed', 'data-since': p.updated }, p.updated ? ago(p.updated) + ' ago' : ''))));

  $('callbacks').replaceChildren(...(v.callbacks || []).map((c) => el('li', { 'data-kind': c.kind },
    el('time', {}, clock(c.time)), el('code', {}, c.line))));
  if (!(v.callbacks || []).length) $('callbacks').replaceChildren(el('li', { class: 'quiet' }, 'none yet'));

  drawTimeline();
}

// drawTimeline lays out the bars against the browser's clock: a running
// bar ends now.
function drawTimeline() {
  const tl = view.timeline || { rows: [] };
  const rows = (tl.rows || []).filter((r) => r.bars.length);
  const box = $('timeline');
  if (!rows.length) {
    box.replaceChildren(el('p', { class: 'quiet' }, 'no attempts yet'));
    $('critical').textContent = '';
    return;
  }
  const now = Date.now();
  const start = ms(tl.start);
  let end = ms(tl.end);
  for (const r of rows) for (const b of r.bars) if (b.running) end = Math.max(end, now);
  const span = Math.max(end - start, 1000);
  const out = rows.map((r) => el('div', { class: 'tl-row', 'data-worker': r.worker },
    el('span', { class: 'tl-worker' }, r.worker),
    el('div', { class: 'tl-track' }, ...r.bars.map((b) => {
      const s = ms(b.start), e = b.running ? now : ms(b.end) || now;
      const label = (b.critical ? '★ ' : '') + b.plan + (b.attempt > 1 ? ' #' + b.attempt : '');
      const bar = el('div', {
        class: ['bar', outcomeClass(b), b.critical ? 'crit' : ''].filter(Boolean).join(' '),
        'data-plan': b.plan, 'data-attempt': b.attempt, 'data-outcome': b.running ? 'running' : b.outcome,
        title: `${b.plan} attempt ${b.attempt} on ${r.worker}: ${b.running ? 'running (' + b.outcome + ')' : b.outcome}, ${dur(e - s)}${b.critical ? ', on the critical path' : ''}`,
      }, label);
      bar.style.left = ((s - start) / span * 100) + '%';
      bar.style.width = ((e - s) / span * 100) + '%';
      return bar;
    }))));
  const axis = el('div', { class: 'tl-axis' });
  const mark = (d) => (span < 10000 ? (d / 1000).toFixed(1) + 's' : dur(d));
  for (let i = 0; i <= 4; i++) axis.append(el('span', {}, i === 0 ? clock(tl.start) : '+' + mark(span * i / 4)));
  box.replaceChildren(...out, axis);
  const crit = view.critical || [];
  $('critical').textContent = crit.length ? 'critical path: ' + crit.join(' → ') : '';
}

// tick is the page's display clock: once a second it redraws the elapsed
// times and the running bars from the browser's clock. It asks the server
// nothing; what the fleet does arrives only on the event stream.
function tick() {
  if (!view) return;
  for (const e of document.querySelectorAll('.elapsed[data-since]')) {
    const t = e.getAttribute('data-since');
    if (!ms(t)) continue;
    const a = ago(t);
    e.textContent = e.closest('#attention') ? ' (' + a + ')' : e.closest('#plans') ? a + ' ago' : a;
  }
  const tl = view.timeline;
  if (tl && (tl.rows || []).some((r) => r.bars.some((b) => b.running))) drawTimeline();
}

function setConn(on, text) {
  const c = $('conn');
  c.className = 'conn ' + (on ? 'on' : 'off');
  c.textContent = text;
}

function connect() {
  const es = new EventSource('events?token=' + encodeURIComponent(token));
  es.onopen = () => setConn(true, 'live');
  // The stream ends when orch serve stops. The page does not try again:
  // the next orch serve has a new token, and prints its own URL.
  es.onerror = () => {
    es.close();
    setConn(false, 'disconnected');
    $('note').hidden = false;
    $('note').textContent = 'orch serve stopped (or this page lost it): what is shown is as it last was. ' +
      'A new orch serve prints a new URL (also in .orch/board.url).';
  };
  es.onmessage = (m) => {
    view = JSON.parse(m.data);
    document.body.dataset.seq = view.seq;
    render();
  };
}

connect();
setInterval(tick, 1000);
