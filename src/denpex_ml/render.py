"""Plain-text rendering of taxonomy entries (and later diagnoses) for the terminal."""

from __future__ import annotations

from rich.console import Group
from rich.markdown import Markdown
from rich.panel import Panel

from denpex_ml.taxonomy.schema import Entry

__all__ = ["entry_markdown", "render_entry"]


def entry_markdown(entry: Entry) -> str:
    """The entry as Markdown: what an on-call engineer reads to act."""
    out = [
        f"# {entry.title}",
        f"`{entry.id}` · {entry.category.value} · {', '.join(entry.tags)}",
        "",
        entry.summary,
        "",
    ]
    if entry.symptoms:
        out += ["## Symptoms", *[f"- {s}" for s in entry.symptoms], ""]
    out += ["## Root cause", entry.root_cause, ""]
    if entry.fix:
        out.append("## Fix")
        for i, step in enumerate(entry.fix, 1):
            out.append(f"{i}. {step.step}")
            out += [f"   - `{c}`" for c in step.commands]
        out.append("")
    if entry.confirm:
        out += ["## How to confirm", *[f"- [ ] {c}" for c in entry.confirm], ""]
    if entry.fingerprints:
        out.append("## Fingerprints")
        out += [f"- *{fp.role.value}* ({fp.source}, w={fp.weight:g}): `{fp.pattern}`" for fp in entry.fingerprints]
        out.append("")
    if entry.prevention:
        out += ["## Prevention", *[f"- {p}" for p in entry.prevention], ""]
    if entry.affected:
        out += ["## Affected", *[f"- {a}" for a in entry.affected], ""]
    if entry.related:
        out += ["## Related", *[f"- `{r.id}`: {r.note}" for r in entry.related], ""]
    if entry.references:
        out += ["## References", *[f"- [{r.title}]({r.url})" for r in entry.references], ""]
    return "\n".join(out)


def render_entry(entry: Entry) -> Panel:
    return Panel(Group(Markdown(entry_markdown(entry))), title=entry.id, expand=True)
