"""Benchmark `eval-pipeline import-csv`: seconds per CSV size, to show the import stays linear.

Run: python benchmarks/import_csv.py [--rows 5000 20000 100000]

Each size is a fresh suite and a Calibrate CSV of reply tests (one user message, one
evaluator) imported through `import_csv`, the function the CLI calls. Linear means the
seconds per 1,000 rows stay about the same as the file grows.
"""

from __future__ import annotations

import argparse
import csv
import json
import tempfile
import time
from pathlib import Path

from eval_pipeline.suite import import_csv


def write_csv(path: Path, rows: int) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "conversation_history", "polite", "polite/criteria"])
        for i in range(rows):
            history = json.dumps([{"role": "user", "content": f"Question number {i}?"}])
            writer.writerow([f"test {i}", history, "true", "The reply is polite."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000, 20_000, 100_000])
    args = parser.parse_args()
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder) / "suite"
            (root / "cases").mkdir(parents=True)
            source = Path(folder) / "tests.csv"
            write_csv(source, rows)
            start = time.perf_counter()
            written = import_csv(source, root, into="imported")
            seconds = time.perf_counter() - start
            assert len(written) == rows
            print(
                f"{rows:>7} rows: {seconds:6.1f} s ({1000 * seconds / rows:.2f} s per 1,000 rows)"
            )


if __name__ == "__main__":
    main()
