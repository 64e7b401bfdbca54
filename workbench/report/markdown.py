"""A result as a markdown document: title, verdict, sources, summary, every table, notes."""
from __future__ import annotations

from .result import Result
from .tables import cell_text


def markdown_table(frame) -> str:
    def cell(value) -> str:
        return cell_text(value).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |\n|" + "---|" * len(frame.columns) + "\n"
    return header + "".join("| " + " | ".join(cell(v) for v in row) + " |\n"
                            for row in frame.itertuples(index=False))


def to_markdown(result: Result) -> str:
    out = [f"# {result.title}", "", f"**Verdict: {result.verdict}**", ""]
    out += [f"- {side}: `{path}`" for side, path in result.sources.items()]
    if result.summary:
        out += ["", "## Summary", ""] + [f"- {line}" for line in result.summary]
    for name, frame in result.tables.items():
        out += ["", f"## {name}", "", markdown_table(frame)]
    if result.notes:
        out += ["", "## Notes", ""] + [f"- {note}" for note in result.notes]
    out.append(f"\n<sub>schema {result.schema}</sub>")
    return "\n".join(out) + "\n"
