"use strict";
// The kame-data review page. Every string from the data is put in the page with textContent
// (or as an SVG attribute value), never parsed as HTML: sources and LLM output are untrusted.
(() => {
  const DATA = JSON.parse(document.getElementById("review-data").textContent);
  const PX_PER_S = 72;
  const FIRST_BATCH = 8;
  const BATCH = 24;
  const SVGNS = "http://www.w3.org/2000/svg";
  const LEVEL_COLORS = ["#d7191c", "#f07c2c", "#d9a400", "#7cb342", "#1a9641", "#2b83ba"];
  const FLAG_KEY = "kame-review-flags:" + DATA.dataset.config_hash + ":" + DATA.dataset.name;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  const fmt2 = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(2));
  const secs = (ms) => (ms / 1000).toFixed(1);
  function levelBadge(level) {
    const b = el("span", "lv lv" + level, level);
    b.title = "hint level " + level;
    return b;
  }

  // ---------- summary ----------
  function hbars(fig, items, opts) {
    const W = 380, rowH = 20, right = 92, labelW = opts.labelW || 120;
    const max = opts.max || Math.max(1, ...items.map((i) => i.value || 0)), span = W - labelW - right;
    const s = svg("svg", {viewBox: `0 0 ${W} ${Math.max(1, items.length) * rowH + 4}`, class: "hbars", role: "img"});
    items.forEach((it, i) => {
      const y = i * rowH + 2, w = (span * (it.value || 0)) / max;
      let end = w;
      const label = svg("text", {x: labelW - 6, y: y + 13, "text-anchor": "end", class: "lbl"}, it.label);
      s.append(label, svg("rect", {x: labelW, y: y + 3, width: Math.max(0, w), height: rowH - 6, fill: it.color || "#5b7db1", rx: 2}));
      if (it.range) {
        const [a, b] = it.range.map((v) => labelW + (span * v) / max);
        s.append(svg("line", {x1: a, x2: b, y1: y + rowH / 2, y2: y + rowH / 2, class: "whisker"}));
        end = Math.max(end, b - labelW);
      }
      s.append(svg("text", {x: labelW + end + 5, y: y + 13, class: "val"}, it.text !== undefined ? it.text : it.value));
      label.append(svg("title", {}, it.tip || it.label + ": " + (it.text !== undefined ? it.text : it.value)));
    });
    if (!items.length) s.append(svg("text", {x: 4, y: 14, class: "lbl"}, "none"));
    fig.append(s);
  }

  function vbars(fig, edges, counts) {
    const W = 380, H = 120, pad = 22, side = 16, n = counts.length, max = Math.max(1, ...counts);
    const s = svg("svg", {viewBox: `0 0 ${W} ${H + pad}`, class: "vbars", role: "img"});
    const bw = (W - 2 * side) / Math.max(1, n);
    counts.forEach((c, i) => {
      const h = (H - 14) * c / max, x = side + i * bw;
      const r = svg("rect", {x: x + 1, y: H - h, width: Math.max(1, bw - 2), height: h, fill: "#5b7db1", rx: 1});
      r.append(svg("title", {}, `${edges[i]}–${edges[i + 1]} s: ${c}`));
      s.append(r);
      if (c) s.append(svg("text", {x: x + bw / 2, y: H - h - 3, "text-anchor": "middle", class: "val"}, c));
    });
    const step = Math.max(1, Math.ceil(n / 8));
    for (let i = 0; i <= n; i += step) s.append(svg("text", {x: side + i * bw, y: H + 14, "text-anchor": "middle", class: "lbl"}, edges[i]));
    s.append(svg("line", {x1: side, x2: W - side, y1: H, y2: H, class: "axis"}));
    fig.append(s);
  }

  function renderSummary() {
    const S = DATA.summary, D = DATA.dataset;
    document.getElementById("title").textContent = DATA.title;
    document.getElementById("dataset").textContent = `${D.path}  ·  config ${D.config_hash}`;
    const facts = document.getElementById("facts");
    const fact = (label, value) => {
      const f = el("div", "fact");
      f.append(el("div", "v", value), el("div", "k", label));
      facts.append(f);
    };
    fact("dialogues", S.dialogues);
    fact("cards on this page", DATA.dialogues.length);
    fact("oracle events", S.events);
    fact("level 5 inside a user turn", S.early_truth);
    fact("minutes of audio", (S.seconds / 60).toFixed(1));
    fact("rejects", S.reject_total);
    fact("simulator", D.model || "–");
    fact("audio", DATA.audio.mode);
    fact("generated", DATA.generated);
    hbars(document.getElementById("c-similarity"), S.levels.map((l) => ({
      label: "level " + l.level, value: l.f1_mean || 0, color: LEVEL_COLORS[l.level], range: l.f1_q ? [l.f1_q[0], l.f1_q[2]] : null,
      text: l.events ? `${fmt2(l.f1_mean)}  (n=${l.events})` : "no events",
      tip: l.events ? `level ${l.level}: mean ${fmt2(l.f1_mean)}, quartiles ${l.f1_q.map(fmt2).join(" / ")}, ${l.events} events` : `level ${l.level}: no events`,
    })), {max: 1, labelW: 70});
    hbars(document.getElementById("c-rouge"), S.levels.map((l) => ({
      label: "level " + l.level, value: l.rouge_mean || 0, color: LEVEL_COLORS[l.level], range: l.rouge_q ? [l.rouge_q[0], l.rouge_q[2]] : null,
      text: l.events ? `${fmt2(l.rouge_mean)}  (n=${l.events})` : "no events",
      tip: l.events ? `level ${l.level}: mean ${fmt2(l.rouge_mean)}, quartiles ${l.rouge_q.map(fmt2).join(" / ")}, ${l.events} events` : `level ${l.level}: no events`,
    })), {max: 1, labelW: 70});
    hbars(document.getElementById("c-source-sim"), Object.entries(S.similarity_by_source || {}).flatMap(([k, v]) => [
      {label: k + " F1", value: v.token_f1, text: `${fmt2(v.token_f1)}  (n=${v.events})`, tip: `${k}: token-F1 ${fmt2(v.token_f1)} over ${v.events} events`},
      {label: k + " RL", value: v.rouge_l, color: "#8c6bb1", text: fmt2(v.rouge_l), tip: `${k}: ROUGE-L ${fmt2(v.rouge_l)} over ${v.events} events`},
    ]), {max: 1, labelW: 120});
    hbars(document.getElementById("c-levels"), S.levels.map((l) => ({label: "level " + l.level, value: l.events, color: LEVEL_COLORS[l.level]})), {labelW: 70});
    vbars(document.getElementById("c-durations"), S.durations.edges, S.durations.counts);
    hbars(document.getElementById("c-sources"), Object.entries(S.per_source).map(([k, v]) => ({label: k, value: v})), {});
    hbars(document.getElementById("c-rejects"), Object.entries(S.rejects).map(([k, v]) => ({label: k, value: v, color: "#b5655b"})), {labelW: 140});
    const tbody = document.querySelector("#reject-list tbody");
    for (const r of S.reject_rows) {
      const tr = el("tr");
      for (const k of ["stage", "id", "reason", "detail"]) tr.append(el("td", k, r[k]));
      tbody.append(tr);
    }
    document.querySelector("#reject-list summary").textContent =
      `Rejected items (${S.reject_total}${S.reject_total > S.reject_rows.length ? ", first " + S.reject_rows.length + " listed" : ""})`;
  }

  // ---------- flags ----------
  const flags = new Map();  // id -> note
  try {
    const saved = JSON.parse(localStorage.getItem(FLAG_KEY) || "{}");
    for (const [k, v] of Object.entries(saved)) if (typeof v === "string") flags.set(k, v);
  } catch (e) { /* storage unavailable (private mode): flags live in this tab only */ }
  function persistFlags() {
    try { localStorage.setItem(FLAG_KEY, JSON.stringify(Object.fromEntries(flags))); } catch (e) { /* see above */ }
    document.getElementById("flag-count").textContent = `${flags.size} flagged`;
  }
  function flagsDocument() {
    return {
      format: "kame-data-review-flags/1",
      dataset: {name: DATA.dataset.name, config_hash: DATA.dataset.config_hash, path: DATA.dataset.path},
      saved: new Date().toISOString(),
      flagged: [...flags].map(([id, note]) => ({id, note})),
    };
  }
  function saveFlags() {
    const blob = new Blob([JSON.stringify(flagsDocument(), null, 2) + "\n"], {type: "application/json"});
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "flags-" + String(DATA.dataset.name).replace(/[^A-Za-z0-9_.-]+/g, "_") + ".json";
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
  }

  // ---------- cards ----------
  const cards = [];
  function ensureAudio(c) {
    if (c.audio.src || c.d.audio < 0) return;
    // Audio blocks follow this script; until the parser is done one may be incomplete.
    if (document.readyState === "loading") { c.wantAudio = true; return; }
    const block = document.getElementById("audio-" + c.d.audio);
    if (!block) return;
    c.audio.src = "data:" + DATA.audio.mime + ";base64," + JSON.parse(block.textContent);
  }

  function renderCard(d, index) {
    const c = {d, index, markers: [], rows: [], words: [], replyRows: [], selected: -1};
    const root = el("article", "card");
    root.id = "card-" + index;
    root.dataset.index = index;
    c.root = root;

    const head = el("div", "card-head");
    const title = el("div", "card-title");
    title.append(el("span", "card-id", d.id), el("span", "tag", d.source), el("span", "tag cat", d.category),
      el("span", "muted", `variant ${d.variant} · ${d.duration.toFixed(1)} s · ${d.words.length} words · ${d.events.length} events`));
    const flagBox = el("label", "flag");
    const cb = el("input");
    cb.type = "checkbox";
    cb.className = "flag-cb";
    const note = el("input", "flag-note");
    note.type = "text";
    note.placeholder = "why? (saved with the flag)";
    cb.checked = flags.has(d.id);
    note.value = flags.get(d.id) || "";
    note.hidden = !cb.checked;
    root.classList.toggle("flagged", cb.checked);
    cb.addEventListener("change", () => {
      if (cb.checked) flags.set(d.id, note.value); else flags.delete(d.id);
      note.hidden = !cb.checked;
      root.classList.toggle("flagged", cb.checked);
      persistFlags();
    });
    note.addEventListener("input", () => { if (cb.checked) { flags.set(d.id, note.value); persistFlags(); } });
    flagBox.append(cb, document.createTextNode(" flag"));
    head.append(title, flagBox, note);
    c.flagCb = cb; c.note = note;

    const audio = el("audio", "player");
    audio.controls = true;
    audio.preload = "metadata";
    c.audio = audio;
    if (d.audio < 0) audio.hidden = true;

    // timeline: markers row and one lane per speaker, users first
    const speakers = [];
    for (const t of d.turns) if (!speakers.some((s) => s.speaker === t.speaker)) speakers.push({speaker: t.speaker, role: t.role});
    for (const w of d.words) if (!speakers.some((s) => s.speaker === w[0])) speakers.push({speaker: w[0], role: ""});
    speakers.sort((a, b) => (a.role === "user" ? 0 : 1) - (b.role === "user" ? 0 : 1));
    const tlWrap = el("div", "tl-wrap");
    const labels = el("div", "tl-labels");
    labels.append(el("div", "tl-label ruler-label", "s"), el("div", "tl-label mk-label", "oracle"));
    const scroll = el("div", "tl-scroll");
    const tl = el("div", "tl");
    tl.style.width = Math.ceil(d.duration * PX_PER_S + 8) + "px";
    const ruler = el("div", "ruler");
    for (let s = 0; s <= d.duration; s++) {
      const tick = el("span", "tick", s);
      tick.style.left = s * PX_PER_S + "px";
      ruler.append(tick);
    }
    const mkRow = el("div", "mk-row");
    d.events.forEach((e, i) => {
      const m = el("button", "mk lv" + e.level + (e.early ? " early" : ""));
      m.type = "button";
      m.style.left = (e.t / 1000) * PX_PER_S - 5 + "px";
      m.title = `${secs(e.t)} s · level ${e.level} · ratio ${fmt2(e.ratio)} · F1 ${fmt2(e.f1)} · ROUGE-L ${fmt2(e.rouge)}` +
        (e.early ? " · the true reply before the user has finished" : "");
      m.setAttribute("aria-label", "oracle event at " + secs(e.t) + " s, level " + e.level);
      m.dataset.i = i;
      m.addEventListener("click", () => select(c, i, true));
      c.markers.push(m);
      mkRow.append(m);
    });
    tl.append(ruler, mkRow);
    if (d.events.some((e) => "arrival" in e)) {
      // a latency model's timing: where each reply reached the front-end (docs/design.md, "Oracle arrival")
      labels.append(el("div", "tl-label mk-label", "arrival"));
      const arRow = el("div", "mk-row arrival-row");
      d.events.forEach((e, i) => {
        if (e.arrival === null || e.arrival === undefined) return;
        const m = el("button", "mk arrival lv" + e.level);
        m.type = "button";
        m.style.left = (e.arrival / 1000) * PX_PER_S - 5 + "px";
        m.title = `asked at ${secs(e.t)} s, first chunk at ${secs(e.arrival)} s · ${e.served}`;
        m.setAttribute("aria-label", "oracle reply arrived at " + secs(e.arrival) + " s");
        m.addEventListener("click", () => select(c, i, true));
        arRow.append(m);
      });
      tl.append(arRow);
    }
    const laneOf = {};
    for (const s of speakers) {
      labels.append(el("div", "tl-label lane-label", `${s.speaker} ${s.role}`));
      const lane = el("div", "lane lane-" + (s.role || "other"));
      laneOf[s.speaker] = lane;
      tl.append(lane);
    }
    d.words.forEach((w, i) => {
      const span = el("span", w[4] ? "w bc" : "w", w[1]);
      span.style.left = w[2] * PX_PER_S + "px";
      span.style.width = Math.max(3, (w[3] - w[2]) * PX_PER_S - 1) + "px";
      span.title = `${w[1]}  ${w[2].toFixed(2)}–${w[3].toFixed(2)} s` + (w[4] ? "  (backchannel)" : "");
      c.words.push(span);
      (laneOf[w[0]] || tl).append(span);
    });
    const playhead = el("div", "playhead");
    tl.append(playhead);
    scroll.append(tl);
    tlWrap.append(labels, scroll);
    c.scroll = scroll;
    audio.addEventListener("timeupdate", () => {
      playhead.style.transform = `translateX(${audio.currentTime * PX_PER_S}px)`;
      if (!audio.paused) {
        let i = -1;
        for (let k = 0; k < d.events.length && d.events[k].t <= audio.currentTime * 1000; k++) i = k;
        if (i >= 0 && i !== c.selected) select(c, i, false);
      }
    });

    // the selected event: its prediction beside the true reply
    const cmp = el("div", "compare");
    const cmpHead = el("div", "cmp-head", "Click an oracle marker (or a ladder row) to compare its prediction with the true reply.");
    const pred = el("div", "cmp-box pred");
    const truth = el("div", "cmp-box truth");
    pred.append(el("div", "cmp-k", "prediction"), el("div", "cmp-v"));
    truth.append(el("div", "cmp-k", "true reply"), el("div", "cmp-v"));
    const hint = el("div", "cmp-hint");
    const boxes = el("div", "cmp-boxes");
    boxes.append(pred, truth);
    cmp.append(cmpHead, boxes, hint);
    c.cmp = {head: cmpHead, pred: pred.lastChild, truth: truth.lastChild, hint, root: cmp};

    // turns
    const turns = el("div", "turns");
    for (const t of d.turns) {
      const row = el("div", "turn turn-" + t.role);
      row.append(el("span", "turn-who", `${t.speaker} ${t.role}`), el("span", "turn-time", `${t.start.toFixed(2)}–${t.end.toFixed(2)} s`),
        el("span", "turn-voice", t.voice), el("span", "turn-text", t.text));
      if (t.quality) row.append(el("span", "turn-q", t.quality));
      turns.append(row);
    }
    if (d.acoustics) turns.append(el("div", "acoustics", d.acoustics));

    // ladder
    const table = el("table", "ladder");
    const thead = el("thead");
    const hr = el("tr");
    for (const h of ["t (s)", "level", "ratio", "prediction", "hint shown", "F1", "ROUGE-L"]) hr.append(el("th", "", h));
    thead.append(hr);
    const tbody = el("tbody");
    let lastReply = -1;
    d.events.forEach((e, i) => {
      if (e.reply !== lastReply) {
        const rr = el("tr", "reply-row");
        const td = el("td", "", "");
        td.colSpan = 7;
        td.append(el("span", "reply-k", "true reply: "), el("span", "reply-v", d.replies[e.reply]));
        rr.append(td);
        c.replyRows.push({row: rr, events: []});
        tbody.append(rr);
        lastReply = e.reply;
      }
      const tr = el("tr", e.early ? "ev early" : "ev");
      tr.dataset.level = e.level;
      const lvTd = el("td", "c");
      lvTd.append(levelBadge(e.level));
      if (e.early) lvTd.append(el("span", "early-tag", "early"));
      const f1 = el("td", "num f1", fmt2(e.f1));
      f1.classList.add(e.f1 >= 0.6 ? "hi" : e.f1 >= 0.3 ? "mid" : "lo");
      const rouge = el("td", "num f1", fmt2(e.rouge));
      rouge.classList.add(e.rouge >= 0.6 ? "hi" : e.rouge >= 0.3 ? "mid" : "lo");
      const hintTd = el("td", e.hint ? "hint" : "hint none");
      const hintText = el("div", "clamp", e.hint || "—");
      if (e.hint) hintText.title = e.hint;
      hintTd.append(hintText);
      tr.append(el("td", "num", secs(e.t)), lvTd, el("td", "num", fmt2(e.ratio)), el("td", "pred", e.prediction), hintTd, f1, rouge);
      tr.addEventListener("click", () => select(c, i, true));
      c.replyRows[c.replyRows.length - 1].events.push(i);
      c.rows.push(tr);
      tbody.append(tr);
    });
    table.append(thead, tbody);
    const tableWrap = el("div", "ladder-wrap");
    tableWrap.append(table);

    root.append(head, audio, tlWrap, cmp, turns, tableWrap);
    cards.push(c);
    return root;
  }

  function select(c, i, seek) {
    const d = c.d, e = d.events[i];
    if (c.selected >= 0) {
      c.markers[c.selected].classList.remove("sel");
      c.rows[c.selected].classList.remove("sel");
    }
    c.selected = i;
    c.markers[i].classList.add("sel");
    c.rows[i].classList.add("sel");
    c.root.classList.add("has-sel");
    c.cmp.head.textContent = "";
    c.cmp.head.append(document.createTextNode(`at ${secs(e.t)} s  `), levelBadge(e.level),
      document.createTextNode(`  spoken ratio ${fmt2(e.ratio)}  ·  token-F1 ${fmt2(e.f1)}  ·  ROUGE-L ${fmt2(e.rouge)}`));
    c.cmp.pred.textContent = e.prediction;
    c.cmp.truth.textContent = d.replies[e.reply];
    c.cmp.hint.textContent = e.hint ? "hint shown to the simulator: " + e.hint : "no hint shown (level 0: history only)";
    const reply = new Set(d.reply_words[e.reply]);
    d.words.forEach((w, k) => {
      const cl = c.words[k].classList;
      cl.toggle("heard", w[3] * 1000 <= e.t);
      cl.toggle("reply", reply.has(k));
    });
    if (seek) {
      ensureAudio(c);
      c.audio.currentTime = e.t / 1000;
      const x = (e.t / 1000) * PX_PER_S;
      if (x < c.scroll.scrollLeft || x > c.scroll.scrollLeft + c.scroll.clientWidth - 40) c.scroll.scrollLeft = x - c.scroll.clientWidth / 2;
    }
  }

  // ---------- filters ----------
  const fSource = document.getElementById("f-source"), fCategory = document.getElementById("f-category");
  const fLevel = document.getElementById("f-level"), fFlagged = document.getElementById("f-flagged"), fId = document.getElementById("f-id");
  function options(select, values) {
    for (const v of values) { const o = el("option", "", v); o.value = v; select.append(o); }
  }
  options(fSource, [...new Set(DATA.dialogues.map((d) => d.source))].sort());
  options(fCategory, [...new Set(DATA.dialogues.map((d) => d.category))].sort());
  options(fLevel, ["0", "1", "2", "3", "4", "5"]);
  function applyFilters() {
    const src = fSource.value, cat = fCategory.value, lv = fLevel.value, onlyFlagged = fFlagged.checked, idq = fId.value.trim().toLowerCase();
    let shown = 0;
    for (const c of cards) {
      const d = c.d;
      const ok = (!src || d.source === src) && (!cat || d.category === cat) && (!onlyFlagged || flags.has(d.id)) &&
        (!idq || d.id.toLowerCase().includes(idq)) && (!lv || d.events.some((e) => String(e.level) === lv));
      c.root.hidden = !ok;
      if (ok) shown++;
      c.rows.forEach((r, i) => { r.hidden = !!lv && String(d.events[i].level) !== lv; });
      c.markers.forEach((m, i) => m.classList.toggle("dim", !!lv && String(d.events[i].level) !== lv));
      for (const rr of c.replyRows) rr.row.hidden = !!lv && !rr.events.some((i) => String(d.events[i].level) === lv);
    }
    document.getElementById("shown").textContent = `${shown} of ${DATA.dialogues.length} shown`;
  }
  for (const f of [fSource, fCategory, fLevel, fFlagged]) f.addEventListener("change", applyFilters);
  fId.addEventListener("input", applyFilters);
  document.getElementById("save-flags").addEventListener("click", saveFlags);
  document.getElementById("clear-flags").addEventListener("click", () => {
    if (flags.size && !confirm(`Clear all ${flags.size} flags?`)) return;
    flags.clear();
    for (const c of cards) { c.flagCb.checked = false; c.note.hidden = true; c.note.value = ""; c.root.classList.remove("flagged"); }
    persistFlags();
    applyFilters();
  });

  // ---------- go ----------
  renderSummary();
  persistFlags();
  const container = document.getElementById("cards");
  const observer = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
    for (const en of entries) if (en.isIntersecting) { ensureAudio(cards[+en.target.dataset.index]); observer.unobserve(en.target); }
  }, {rootMargin: "600px 0px"}) : null;
  let next = 0;
  function renderBatch(n) {
    const frag = document.createDocumentFragment();
    const end = Math.min(DATA.dialogues.length, next + n);
    for (; next < end; next++) frag.append(renderCard(DATA.dialogues[next], next));
    container.append(frag);
  }
  function observeAll(from) { if (observer) for (let i = from; i < cards.length; i++) observer.observe(cards[i].root); }
  renderBatch(FIRST_BATCH);
  observeAll(0);
  applyFilters();
  performance.mark("kame:first-cards");
  function rest() {
    const from = next;
    renderBatch(BATCH);
    observeAll(from);
    if (next < DATA.dialogues.length) { setTimeout(rest, 0); return; }
    applyFilters();
    performance.mark("kame:all-cards");
    document.body.dataset.ready = "1";
  }
  if (next < DATA.dialogues.length) setTimeout(rest, 0); else { performance.mark("kame:all-cards"); document.body.dataset.ready = "1"; }
  document.addEventListener("DOMContentLoaded", () => {
    for (const c of cards) if (c.wantAudio) { c.wantAudio = false; ensureAudio(c); }
  });
})();
