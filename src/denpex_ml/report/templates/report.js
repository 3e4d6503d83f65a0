// denpex-ml report: pages, filters and sorts the job rows of the embedded blob; expands a job.
// Every string from the data is put in the page with textContent, never parsed as HTML.
(function () {
  "use strict";
  const F = { JOB: 0, ERR: 1, LABEL: 2, CONF: 3, RANK: 4, PHASE: 5, RANKS: 6, SECS: 7, MB: 8, ALTS: 9, REASON: 10,
    EVID: 11, ETYPE: 12, EMSG: 13, NODES: 14, TIME: 15, GUESS: 16, CUT: 17 };
  const PAGE = 100;
  let S = [], R = [], E = {}, hay = [], view = [];
  const st = { q: "", label: "", status: "", sort: "", dir: 1, page: 0 };
  const open = new Set();
  const $ = (id) => document.getElementById(id);
  const str = (i) => (i >= 0 ? S[i] : "");

  function el(tag, props, ...kids) {
    const n = document.createElement(tag);
    if (props) for (const [k, v] of Object.entries(props)) {
      if (k === "text") n.textContent = v; else if (k === "cls") n.className = v; else n.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) n.append(k);
    return n;
  }
  const pct = (p) => (p === null || p === undefined ? "–" : (100 * p).toFixed(p >= 0.995 || p < 0.005 ? 0 : 1) + "%");
  const when = (t) => (t === null ? "" : new Date(t * 1000).toISOString().slice(0, 16).replace("T", " "));

  function status(r) {
    if (r[F.ERR]) return "error";
    const l = str(r[F.LABEL]);
    return l === "unknown" ? "unknown" : l === "no-failure" ? "no-failure" : "failure";
  }

  async function load() {
    const node = $("report-data");
    let text = node.textContent;
    if (node.dataset.encoding === "gzip+base64") {
      const bin = atob(text.trim());
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      text = await new Response(stream).text();
    }
    return JSON.parse(text);
  }

  const KEYS = {
    job: (r) => r[F.JOB], label: (r) => (r[F.ERR] ? "~" + str(r[F.ETYPE]) : str(r[F.LABEL])),
    confidence: (r) => r[F.CONF], rank: (r) => r[F.RANK], phase: (r) => str(r[F.PHASE]) || null,
    ranks: (r) => r[F.RANKS], seconds: (r) => r[F.SECS], time: (r) => r[F.TIME],
  };

  function refresh() {
    const q = st.q.toLowerCase();
    view = [];
    for (let i = 0; i < R.length; i++) {
      const r = R[i];
      if (st.label && str(r[F.LABEL]) !== st.label) continue;
      if (st.status && status(r) !== st.status) continue;
      if (q && hay[i].indexOf(q) < 0) continue;
      view.push(i);
    }
    if (st.sort) {
      const key = KEYS[st.sort], dir = st.dir;
      const vals = new Map(view.map((i) => [i, key(R[i])]));
      view.sort((a, b) => {
        const x = vals.get(a), y = vals.get(b);
        if (x === y) return a - b;
        if (x === null || x === undefined || x === "") return 1;
        if (y === null || y === undefined || y === "") return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    st.page = Math.min(st.page, pages - 1);
    render();
  }

  function render() {
    const tbody = $("job-table").tBodies[0];
    const rows = [];
    const start = st.page * PAGE, stop = Math.min(view.length, start + PAGE);
    const timeCol = !!document.querySelector('#job-table th[data-sort="time"]');
    for (let k = start; k < stop; k++) {
      const i = view[k], r = R[i];
      const label = r[F.ERR] ? el("span", { cls: "error", text: str(r[F.ETYPE]) || "error" }) : el("code", { text: str(r[F.LABEL]) });
      const tr = el("tr", { cls: "job" + (open.has(i) ? " open" : ""), "data-i": String(i), "data-job": r[F.JOB] },
        el("td", { text: r[F.JOB] }), el("td", null, label),
        el("td", { cls: "num", text: pct(r[F.CONF]) }),
        el("td", { cls: "num", text: r[F.RANK] === null ? "–" : String(r[F.RANK]) }),
        el("td", { text: str(r[F.PHASE]) }),
        el("td", { cls: "num", text: r[F.RANKS] === null ? "–" : String(r[F.RANKS]) }),
        el("td", { cls: "num", text: r[F.SECS] === null ? "–" : r[F.SECS].toFixed(2) }),
        timeCol ? el("td", { text: when(r[F.TIME]) }) : null);
      rows.push(tr);
      if (open.has(i)) rows.push(detailRow(i, timeCol ? 8 : 7));
    }
    tbody.replaceChildren(...rows);
    const total = R.length;
    $("count").textContent = view.length === total ? `${total} jobs` : `${view.length} of ${total} jobs`;
    $("page-info").textContent = view.length ? `${start + 1}–${stop} of ${view.length}` : "no job matches";
    $("prev").disabled = st.page === 0;
    $("next").disabled = stop >= view.length;
    for (const th of document.querySelectorAll("#job-table th[data-sort]")) {
      th.classList.toggle("sorted-asc", th.dataset.sort === st.sort && st.dir === 1);
      th.classList.toggle("sorted-desc", th.dataset.sort === st.sort && st.dir === -1);
    }
  }

  function detailRow(i, span) {
    return el("tr", { cls: "detail", "data-detail": String(i) }, el("td", { colspan: String(span) }, detail(R[i])));
  }

  function detail(r) {
    const box = el("div", { cls: "diagnosis" });
    if (r[F.ERR]) {
      box.append(el("h3", { cls: "error", text: str(r[F.ETYPE]) || "error" }), el("p", { text: str(r[F.EMSG]) }));
      return box;
    }
    const label = str(r[F.LABEL]), entry = E[label] || {};
    box.append(el("h3", null, entry.title || label, " ", el("code", { text: "[" + label + "]" })));
    const alts = r[F.ALTS].filter((a) => str(a[0]) !== label && a[1] >= 0.005);
    if (label === "unknown") {
      const g = str(r[F.GUESS]);
      box.append(el("p", { text: "No taxonomy entry fits well" + (g ? "; the closest is " + g : "") + " (confidence that it is not: " + pct(r[F.CONF]) + ")." }));
    } else {
      box.append(el("p", { text: "Confidence " + pct(r[F.CONF]) }));
    }
    if (alts.length) box.append(el("p", { text: (label === "unknown" ? "Closest entries: " : "Also possible: ") + alts.map((a) => str(a[0]) + " " + pct(a[1])).join(", ") }));
    const rank = r[F.RANK] === null ? "not shown in the log" : "rank " + r[F.RANK];
    box.append(el("p", { text: "First failing rank: " + rank + (r[F.REASON] >= 0 ? " (" + str(r[F.REASON]) + ")" : "") }));
    const facts = [];
    if (r[F.PHASE] >= 0) facts.push("hang phase " + str(r[F.PHASE]));
    if (r[F.RANKS] !== null) facts.push(r[F.RANKS] + " ranks");
    if (r[F.MB] !== null) facts.push(r[F.MB] + " MB of logs");
    if (r[F.TIME] !== null) facts.push("time " + when(r[F.TIME]));
    if (facts.length) box.append(el("p", { cls: "hint", text: facts.join(" · ") }));
    if (r[F.NODES].length) box.append(el("p", { text: "Nodes implicated: " + r[F.NODES].map(str).join(", ") }));
    if (r[F.EVID].length) {
      box.append(el("h4", { text: "Evidence" }));
      const groups = new Map();
      for (const ev of r[F.EVID]) {
        const k = ev[0] === null ? "no rank" : "rank " + ev[0];
        if (!groups.has(k)) groups.set(k, []);
        groups.get(k).push(ev);
      }
      for (const [k, evs] of groups) {
        const ul = el("ul", { cls: "evidence", "data-rank": k });
        for (const ev of evs) ul.append(el("li", null, el("code", { text: str(ev[3]) }),
          el("span", { cls: "why", text: str(ev[1]) + ":" + ev[2] + " — " + str(ev[4]) })));
        box.append(el("div", { cls: "rank-evidence" }, el("b", { text: k }), ul));
      }
    }
    if (r[F.CUT] > 0) box.append(el("p", { cls: "hint", text: r[F.CUT] + " more evidence line(s) in the results file." }));
    if (entry.root_cause) box.append(el("h4", { text: "Root cause" }), el("p", { text: entry.root_cause }));
    if (entry.fix && entry.fix.length) {
      const ol = el("ol");
      for (const [step, cmds] of entry.fix) {
        const li = el("li", { text: step });
        if (cmds.length) li.append(el("div", { cls: "commands" }, ...cmds.map((c) => el("code", { text: c }))));
        ol.append(li);
      }
      box.append(el("h4", { text: "Fix" }), ol);
    }
    if (entry.confirm && entry.confirm.length) box.append(el("h4", { text: "Confirm" }), el("ul", null, ...entry.confirm.map((c) => el("li", { text: c }))));
    return box;
  }

  function setLabel(label) {
    st.label = label; $("label-filter").value = label; st.page = 0; refresh();
    $("jobs").scrollIntoView();
  }

  function wire() {
    let timer = 0;
    $("filter").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { st.q = e.target.value.trim(); st.page = 0; refresh(); }, 120);
    });
    $("label-filter").addEventListener("change", (e) => { st.label = e.target.value; st.page = 0; refresh(); });
    $("status-filter").addEventListener("change", (e) => { st.status = e.target.value; st.page = 0; refresh(); });
    $("prev").addEventListener("click", () => { st.page = Math.max(0, st.page - 1); render(); });
    $("next").addEventListener("click", () => { st.page += 1; render(); });
    for (const th of document.querySelectorAll("#job-table th[data-sort]")) {
      th.addEventListener("click", () => {
        st.dir = st.sort === th.dataset.sort ? -st.dir : 1;
        st.sort = th.dataset.sort; refresh();
      });
    }
    $("job-table").tBodies[0].addEventListener("click", (e) => {
      const tr = e.target.closest("tr.job");
      if (!tr) return;
      const i = Number(tr.dataset.i);
      if (open.has(i)) open.delete(i); else open.add(i);
      render();
    });
    for (const a of document.querySelectorAll("[data-label].label-link, .chart g[data-label]")) {
      a.addEventListener("click", () => setLabel(a.dataset.label));
    }
    for (const a of document.querySelectorAll(".status-link")) {
      a.addEventListener("click", () => { st.status = a.dataset.status; $("status-filter").value = st.status; st.page = 0; refresh(); });
    }
    for (const a of document.querySelectorAll(".job-link")) {
      a.addEventListener("click", () => {
        const i = R.findIndex((r) => r[F.JOB] === a.dataset.job);
        st.q = a.dataset.job; $("filter").value = st.q; st.label = ""; st.status = ""; st.page = 0;
        $("label-filter").value = ""; $("status-filter").value = "";
        if (i >= 0) open.add(i);
        refresh();
      });
    }
  }

  load().then((d) => {
    S = d.strings; R = d.rows; E = d.entries;
    hay = R.map((r) => [r[F.JOB], str(r[F.LABEL]), str(r[F.ETYPE]), str(r[F.EMSG]), str(r[F.PHASE]),
      (E[str(r[F.LABEL])] || {}).title || "", r[F.NODES].map(str).join(" ")].join("\n").toLowerCase());
    wire();
    refresh();
    document.body.dataset.ready = "1";
  }).catch((err) => {
    $("count").textContent = "could not read the report's data: " + err;
    document.body.dataset.ready = "error";
  });
})();
