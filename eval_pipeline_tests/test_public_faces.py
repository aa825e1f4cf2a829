"""Tests and benchmarks use the packages' public faces; a private import says why it must.

A package's face is its `__init__.py`'s `__all__`; its `_x.py` modules are its own. A test that
imports one is tied to how the package is built today, not to what it promises. The few that
test an internal algorithm as a unit, where going through the face would lose precision, say so
on the import line with a "# the unit itself: <why>" comment; any other private import fails
here, so their number cannot grow back unnoticed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = (REPO / "eval_pipeline_tests", REPO / "benchmarks")
JUSTIFIED = "# the unit itself:"
# An import in the text of a script a test runs in a process of its own.
IN_A_SCRIPT = re.compile(r"^\s*(?:from|import)\s+(eval_pipeline\.[\w.]+)")


def _checked_files() -> list[Path]:
    files = []
    for folder in CHECKED:
        for path in sorted(folder.rglob("*.py")):
            files.append(path)
    return files


def _is_private(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "eval_pipeline" and any(p.startswith("_") for p in parts[1:])


def private_imports(source: str) -> list[tuple[int, str, bool]]:
    """Each import of a private module or name of eval_pipeline: (line, what, justified)."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            if _is_private(node.module):
                what = [node.module]
            else:
                what = [n for n in names if _is_private(n)]
        elif isinstance(node, ast.Import):
            what = [a.name for a in node.names if _is_private(a.name)]
        else:
            continue
        statement = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        found += [(node.lineno, w, JUSTIFIED in statement) for w in what]
    seen = {line for line, _, _ in found}
    for number, text in enumerate(lines, start=1):
        script = IN_A_SCRIPT.match(text)
        if number not in seen and script and _is_private(script.group(1)):
            found.append((number, script.group(1), JUSTIFIED in text))
    return sorted(found)


def test_the_scan_finds_every_spelling_of_a_private_import():
    source = "\n".join(
        [
            "from eval_pipeline.grading._compare import same_cells",
            "from eval_pipeline.viewer import _data as data",
            "import eval_pipeline.store._locks",
            "from eval_pipeline.agents._transport import (  # the unit itself: retries",
            "    LimitedClient,",
            ")",
            "from eval_pipeline.grading import compare_results",
            "from eval_pipeline_tests.cli.console import _helper",
            'SCRIPT = """',
            "from eval_pipeline.cli._ui import run_until_signalled",
            '"""',
        ]
    )
    assert private_imports(source) == [
        (1, "eval_pipeline.grading._compare", False),
        (2, "eval_pipeline.viewer._data", False),
        (3, "eval_pipeline.store._locks", False),
        (4, "eval_pipeline.agents._transport", True),
        (10, "eval_pipeline.cli._ui", False),
    ]


def test_tests_and_benchmarks_import_only_public_faces_or_say_why():
    unjustified = [
        f"{path.relative_to(REPO)}:{line}: {what}"
        for path in _checked_files()
        for line, what, justified in private_imports(path.read_text(encoding="utf-8"))
        if not justified
    ]
    assert not unjustified, (
        "import these from the package's face (its __init__.py), test them through it, or "
        f"say on the import line why the unit itself is tested ({JUSTIFIED} ...):\n"
        + "\n".join(unjustified)
    )
