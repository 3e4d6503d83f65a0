"""How the HTML report scales: a results file of N synthetic rows -> ``write_report`` -> Chromium.

    python -m bench.report_html                   # 100 000 rows, build + browser
    python -m bench.report_html --rows 10000 --no-browser

Measures, on a results file of ``--rows`` synthetic rows (realistic shapes: 3-8 evidence lines of
about 160 characters, three alternatives, suspects on a tenth, 2% error rows, a time column over
30 days): the JSONL size, ``write_report`` wall time (reading, aggregating, encoding) and the page
size; then, in the system Chromium (``/usr/bin/chromium`` via Playwright, as the browser tests),
the time from opening the file to the first page of the job table, and the time of a filter and a
sort over every row. The target of issue #15: < 10 s to render and < 20 MB for 100 000 rows.
Writes ``<out>/report_html.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench.browser import CHROMIUM, launch
from bench.common import MB, REPO, machine_notes, progress


def make_rows(n: int, seed: int = 0) -> list[Any]:
    """``n`` synthetic result rows (dicts with the batch columns plus ``time``)."""
    from denpex_ml.batch.results import JobResult
    from denpex_ml.taxonomy import load_taxonomy

    rng = random.Random(seed)
    tax = load_taxonomy()
    labels = tax.ids
    titles = {e.id: e.title for e in tax}
    t0 = 1_790_000_000
    words = [
        "NCCL",
        "watchdog",
        "timeout",
        "CUDA",
        "error",
        "rank",
        "collective",
        "allreduce",
        "SeqNum",
        "NumelIn",
        "ProcessGroup",
        "failed",
    ]
    rows: list[Any] = []
    for i in range(n):
        job = f"cluster-{i % 7}/2026-11-{1 + i % 28:02d}/job-{1_000_000 + i}"
        when = t0 + rng.randrange(30 * 86400)
        if rng.random() < 0.02:
            r = JobResult.failed(
                job, "ArchiveError", f"{job}.tar.gz: truncated gzip stream at byte {rng.randrange(10**6)}"
            )
            rows.append({**r.to_dict(), "time": when})
            continue
        label = rng.choice(labels)
        alts = [label, *rng.sample(labels, 2)]
        ranks = rng.choice([8, 64, 512])
        evidence = [
            {
                "rank": rng.randrange(ranks),
                "source": f"rank{rng.randrange(ranks)}.log",
                "line": rng.randrange(100_000),
                "text": f"[E{rng.randrange(10**6)} ProcessGroupNCCL.cpp:{rng.randrange(2000)}] "
                + " ".join(rng.choice(words) + str(rng.randrange(10**4)) for _ in range(14)),
                "why": rng.choice(["root-cause fingerprint of " + label, "error or warning line (x2)", "symptom"]),
            }
            for _ in range(rng.randint(3, 8))
        ]
        r = JobResult(
            job,
            label=label,
            title=titles[label],
            confidence=round(rng.uniform(0.3, 1.0), 4),
            abstained=label == "unknown",
            alternatives=[{"label": a, "probability": round(rng.random(), 4)} for a in alts],
            initiating_rank=rng.randrange(ranks),
            initiating_reason="root-cause evidence (" + label + ")",
            evidence=evidence,
            suspects=[{"host": f"host-{rng.randrange(200)}", "gpu": rng.randrange(8)}] if rng.random() < 0.1 else [],
            ranks=ranks,
            lines=rng.randrange(10**6),
            bytes=rng.randrange(10**8),
            seconds=round(rng.uniform(0.05, 30.0), 3),
            model="default@bench",
        )
        rows.append({**r.to_dict(), "time": when})
    return rows


def browser_times(path: Path) -> dict[str, float]:
    """Seconds to the first rendered page, to a filter over every row, and to a sort."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            t = time.perf_counter()
            page.goto(path.as_uri(), timeout=120_000)
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            expect(page.locator("#job-table tbody tr.job")).to_have_count(100)
            render = time.perf_counter() - t
            t = time.perf_counter()
            page.select_option("#label-filter", index=1)
            expect(page.locator("#count")).to_contain_text(" of ")
            filt = time.perf_counter() - t
            page.select_option("#label-filter", index=0)
            t = time.perf_counter()
            page.click('th[data-sort="confidence"]')
            expect(page.locator('th[data-sort="confidence"]')).to_have_class(re.compile("sorted-asc"))
            sort = time.perf_counter() - t
            heap = page.evaluate("() => performance.memory ? performance.memory.usedJSHeapSize : 0")
        finally:
            browser.close()
    return {"render_s": render, "filter_s": filt, "sort_s": sort, "js_heap_mb": heap / MB}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report_html", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="synthetic result rows [100000]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-browser", action="store_true", help="only build the report")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="output folder [bench/out]")
    args = ap.parse_args(argv)
    from denpex_ml.report import write_report

    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / f"report-bench-{args.rows}.jsonl"
    html = args.out / f"report-bench-{args.rows}.html"
    progress("report", f"writing {args.rows} synthetic rows to {results}")
    rows = make_rows(args.rows, args.seed)
    with results.open("w", encoding="utf-8") as fh:  # JSONL with an extra time column, as a pipeline adds it
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    del rows
    progress("report", "write_report")
    t = time.perf_counter()
    info = write_report(results, html)
    build = time.perf_counter() - t
    out: dict[str, Any] = {
        "rows": args.rows,
        "results_mb": results.stat().st_size / MB,
        "build_s": build,
        "html_mb": info.bytes / MB,
        "evidence_chars_per_job": info.evidence_chars,
        "machine": machine_notes(),
    }
    if not args.no_browser:
        if not CHROMIUM.exists():
            progress("report", f"no {CHROMIUM}: apt-get install -y --no-install-recommends chromium")
        else:
            progress("report", "opening it in headless Chromium")
            out.update(browser_times(html))
    (args.out / "report_html.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    print("| rows | results MB | write_report s | report MB | evidence chars/job | render s | filter s | sort s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")

    def f(k: str) -> str:
        return f"{out[k]:.2f}" if k in out else "—"

    print(
        f"| {args.rows} | {f('results_mb')} | {f('build_s')} | {f('html_mb')} | {out['evidence_chars_per_job']} "
        f"| {f('render_s')} | {f('filter_s')} | {f('sort_s')} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
