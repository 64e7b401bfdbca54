"""What ships must stand on its own: no citation of files that live outside the repository."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("workbench", "checklists", "converters", "datasets", "docs", "benchmarks", "scripts")
OUTSIDE = re.compile(r"DESIGN(\.md| ?§)|\.\./shared/")


def test_code_and_docs_cite_no_file_outside_the_repository():
    offenders = []
    for folder in SHIPPED:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ".yaml", ".yml", ".sh", ".txt"}:
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if OUTSIDE.search(line):
                        offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}")
    assert not offenders, "\n".join(offenders)
