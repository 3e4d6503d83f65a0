// denpex-ml serve: sends the pasted text and files to POST /classify and draws the answer.
// Every string from the answer is put in the page with textContent, never parsed as HTML.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  function el(tag, props, ...kids) {
    const n = document.createElement(tag);
    if (props) for (const [k, v] of Object.entries(props)) {
      if (k === "text") n.textContent = v; else if (k === "cls") n.className = v; else n.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) n.append(k);
    return n;
  }
  const pct = (p) => (100 * p).toFixed(p >= 0.995 || p < 0.005 ? 0 : 1) + "%";

  function showError(type, message) {
    const box = $("error");
    box.replaceChildren(el("b", { text: type + ": " }), document.createTextNode(message));
    box.hidden = false;
    $("result").hidden = true;
  }

  function render(d) {
    const out = $("result");
    const parts = [];
    parts.push(el("p", { cls: "headline", id: "headline" }, el("b", { id: "title", text: d.title }), " ",
      el("code", { id: "label", text: "[" + d.label + "]" })));
    if (d.abstained && d.unknown_reason === "detector" && d.outside_probability != null) {
      parts.push(el("p", { id: "outside", text: "Judged outside the taxonomy (" + pct(d.outside_probability) + ")" + (d.best_guess ? "; the closest entry is " + d.best_guess : "") + "." }));
    } else if (d.abstained) {
      parts.push(el("p", { text: "No taxonomy entry fits well" + (d.best_guess ? "; the closest is " + d.best_guess : "") + "." }));
    } else {
      parts.push(el("p", { id: "confidence", text: "Confidence " + pct(d.confidence) }));
    }
    const alts = d.alternatives.filter((a) => a.label !== d.label && a.probability >= 0.005).slice(0, 4);
    if (alts.length) parts.push(el("p", { text: (d.abstained ? "Closest entries: " : "Also possible: ") + alts.map((a) => a.label + " " + pct(a.probability)).join(", ") }));
    const rank = d.initiating_rank === null ? "not shown in the log" : "rank " + d.initiating_rank;
    parts.push(el("p", { id: "first-rank", text: "First failing rank: " + rank + (d.initiating_reason ? " (" + d.initiating_reason + ")" : "") }));
    if (d.hang && d.hang.is_hang) {
      const h = d.hang, facts = ["phase " + h.phase];
      if (h.stuck) facts.push("stuck in " + h.stuck);
      if (h.suspects.length) facts.push("ranks the others wait for: " + h.suspects.join(", "));
      if (h.absent.length) facts.push("absent: " + h.absent.join(", "));
      parts.push(el("p", { cls: "hint", text: "Hang: " + facts.join(" · ") }));
    }
    if (d.advice) {
      const a = d.advice;
      parts.push(el("h4", { text: "The log cannot fully separate" }), el("p", { text: a.competing.map((c) => c.label + " " + pct(c.probability)).join(", ") }));
      if (a.observed && a.observed.length) parts.push(el("p", { cls: "hint", text: "This log shows:" }), el("ul", null, ...a.observed.map((t) => el("li", { text: t }))));
      if (a.tell_apart.length) parts.push(el("ul", null, ...a.tell_apart.map((t) => el("li", { text: t }))));
      if (a.collect.length) parts.push(el("h4", { text: "Collect next" }), el("ul", null, ...a.collect.map((c) => el("li", null, c.name + ": ", el("code", { text: c.how }), el("span", { cls: "why", text: " (" + c.why + ")" })))));
    }
    if (d.evidence.length) {
      parts.push(el("h4", { text: "Evidence" }));
      const groups = new Map();
      for (const ev of d.evidence) {
        const k = ev.rank === null ? ev.stream : "rank " + ev.rank;
        if (!groups.has(k)) groups.set(k, []);
        groups.get(k).push(ev);
      }
      const box = el("div", { id: "evidence" });
      for (const [k, evs] of groups) {
        box.append(el("b", { text: k }), el("ul", { cls: "evidence", "data-rank": k },
          ...evs.map((ev) => el("li", null, el("code", { text: ev.text }), el("span", { cls: "why", text: ev.source + ":" + ev.line + " — " + ev.why })))));
      }
      parts.push(box);
    }
    if (d.timeline && d.timeline.ranks.length) {
      parts.push(el("h4", { text: "Last lines before the failure, per rank" }));
      const states = new Map(((d.hang && d.hang.ranks) || []).map((r) => [String(r.rank), r]));
      const box = el("div", { id: "timeline" });
      for (const t of d.timeline.ranks) {
        const st = states.get(t.stream);
        const head = el("div", { cls: "rank-head" }, t.rank === null ? t.stream : "rank " + t.rank,
          el("span", { cls: "state", text: " · " + t.lines_read + " lines read" + (st ? " · " + st.state + (st.collective ? " in " + st.collective : "") : "") }));
        const lines = el("div", { cls: "timeline", "data-stream": t.stream },
          ...t.lines.map((ln) => el("div", { cls: "tl-line" + (ln.evidence ? " ev" : ""), title: ln.evidence || "" },
            el("span", { cls: "tl-where", text: ln.source + ":" + ln.line + (ln.time ? " " + ln.time : "") + " " }), ln.text)));
        box.append(head, lines);
      }
      if (d.timeline.more) box.append(el("p", { cls: "hint", text: d.timeline.more + " more streams not shown." }));
      parts.push(box);
    }
    parts.push(el("h4", { text: "Root cause" }), el("p", { id: "root-cause", text: d.root_cause }));
    if (d.fix.length) {
      parts.push(el("h4", { text: "Fix" }), el("ol", null, ...d.fix.map((f) => el("li", null, f.step,
        f.commands.length ? el("div", { cls: "commands" }, ...f.commands.map((c) => el("code", { text: c }))) : null))));
    }
    if (d.confirm.length) parts.push(el("h4", { text: "Confirm" }), el("ul", null, ...d.confirm.map((c) => el("li", { text: c }))));
    const inp = d.input || { files: [], lines: 0, ranks: 0, warnings: [] };
    parts.push(el("p", { cls: "hint", text: inp.lines + " lines, " + inp.ranks + " ranks read from " + (inp.files.join(", ") || "the pasted text") + "." }));
    for (const w of inp.warnings) parts.push(el("p", { cls: "warn", text: "warning: " + w }));
    out.replaceChildren(...parts);
    out.hidden = false;
    $("error").hidden = true;
  }

  async function submit(ev) {
    ev.preventDefault();
    const body = new FormData();
    body.append("text", $("log").value);
    for (const f of $("files").files) body.append("files", f, f.name);
    $("busy").hidden = false;
    $("diagnose").disabled = true;
    $("result").hidden = true;
    $("error").hidden = true;
    try {
      const res = await fetch("/classify", { method: "POST", body });
      let data = null;
      try { data = await res.json(); } catch (e) { data = null; }
      if (!res.ok || data === null || data.error) {
        const err = (data && data.error) || { type: "HTTP " + res.status, message: res.statusText || "the server did not answer with a diagnosis" };
        showError(err.type, err.message);
      } else {
        render(data);
      }
    } catch (e) {
      showError("connection", "could not reach the denpex-ml server (" + e.message + ")");
    } finally {
      $("busy").hidden = true;
      $("diagnose").disabled = false;
    }
  }

  function wire() {
    $("upload").addEventListener("submit", submit);
    const drop = $("drop"), input = $("files");
    const shown = () => { $("chosen").textContent = Array.from(input.files).map((f) => f.name).join(", "); };
    input.addEventListener("change", shown);
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      drop.classList.remove("over");
      if (e.dataTransfer && e.dataTransfer.files.length) { input.files = e.dataTransfer.files; shown(); }
    });
    document.body.dataset.ready = "1";
  }
  wire();
})();
