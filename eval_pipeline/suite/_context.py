"""What the built-in agent is told about the warehouse besides the question: context files and dbt docs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from eval_pipeline.suite._config import SuiteConfig

_DBT_DOC_SUFFIXES = (".yml", ".yaml", ".md")


@dataclass(frozen=True)
class ContextFile:
    path: Path
    label: str
    text: str


@dataclass(frozen=True)
class AgentContext:
    """The context given to the built-in agent; its hash keys agent runs."""

    files: tuple[ContextFile, ...]
    dbt_docs: tuple[ContextFile, ...]

    @property
    def hash(self) -> str:
        digest = hashlib.sha256()
        for item in (*self.files, *self.dbt_docs):
            digest.update(f"{item.label}\0{item.text}\0".encode())
        return digest.hexdigest()[:16]


def dbt_doc_files(dbt_project: Path) -> list[Path]:
    """The dbt files that document models (schema YAML and doc blocks), in a stable order."""
    models = dbt_project / "models"
    if not models.is_dir():
        return []
    return sorted(p for p in models.rglob("*") if p.is_file() and p.suffix in _DBT_DOC_SUFFIXES)


def load_agent_context(config: SuiteConfig) -> AgentContext:
    """Read the configured context files and the dbt project's model documentation."""
    files = tuple(
        ContextFile(
            path,
            path.relative_to(config.root).as_posix()
            if path.is_relative_to(config.root)
            else str(path),
            path.read_text(encoding="utf-8"),
        )
        for path in config.context
    )
    docs: tuple[ContextFile, ...] = ()
    warehouse = config.warehouse
    if warehouse is not None and warehouse.dbt_project is not None:
        docs = tuple(
            ContextFile(
                path,
                path.relative_to(warehouse.dbt_project).as_posix(),
                path.read_text(encoding="utf-8"),
            )
            for path in dbt_doc_files(warehouse.dbt_project)
        )
    return AgentContext(files=files, dbt_docs=docs)
