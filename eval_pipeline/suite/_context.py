"""What the built-in agent is told about the warehouse besides the question: context files, dbt docs and synced docs."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.suite._config import SuiteConfig
from eval_pipeline.suite._errors import Problem

_DBT_DOC_SUFFIXES = (".yml", ".yaml", ".md")
_SYNCED_DOC_SUFFIX = ".md"


@dataclass(frozen=True)
class ContextFile:
    path: Path
    label: str
    text: str

    def _part(self, key: str) -> str | None:
        """The value of a `key=value` folder in the file's label (nao sync's layout)."""
        for part in self.label.split("/")[:-1]:
            name, equals, value = part.partition("=")
            if equals and name == key:
                return value
        return None

    def documents(self, table: str, schema: str) -> bool:
        """Whether this synced doc describes the table: it lies in the table's `table=<name>`
        folder (and in its `schema=<name>` folder, when the layout has one)."""
        folder_table, folder_schema = self._part("table"), self._part("schema")
        if folder_table is None or folder_table.lower() != table.lower():
            return False
        return folder_schema is None or folder_schema.lower() == schema.lower()


@dataclass(frozen=True)
class AgentContext:
    """The context given to the built-in agent; its hash keys agent runs.

    `files` go into its system prompt; `dbt_docs` describe the warehouse's models; `synced_docs`
    (a nao project's `databases/`, written by `nao sync`) are shown with the table each
    describes when the agent asks for it.
    """

    files: tuple[ContextFile, ...]
    dbt_docs: tuple[ContextFile, ...]
    synced_docs: tuple[ContextFile, ...] = ()

    @property
    def all_files(self) -> tuple[ContextFile, ...]:
        return (*self.files, *self.dbt_docs, *self.synced_docs)

    @property
    def hash(self) -> str:
        digest = hashlib.sha256()
        for item in self.all_files:
            digest.update(f"{item.label}\0{item.text}\0".encode())
        return digest.hexdigest()[:16]

    @property
    def prompt_text(self) -> str:
        """The context files as the built-in agent's system prompt gives them."""
        return "\n\n".join(f"## {f.label}\n{f.text.strip()}" for f in self.files) or "(none)"

    @property
    def stored_text(self) -> str:
        """What a stored run's system message holds in place of `prompt_text`: a reference
        to the context, whose text is stored once (`agent_contexts`), not once per run."""
        return context_reference(self.hash) if self.files else self.prompt_text

    def docs_of(self, table: str, schema: str) -> list[ContextFile]:
        """The synced docs that describe the table, in their stable order."""
        return [doc for doc in self.synced_docs if doc.documents(table, schema)]


def context_reference(context_hash: str) -> str:
    """The text standing for the context files `context_hash` in a stored system message."""
    return f"[the context files of context {context_hash}, stored once in agent_contexts]"


def with_context_text(
    messages: list[dict[str, Any]], context_hash: str, prompt_text: str | None
) -> list[dict[str, Any]]:
    """A stored run's messages with its system message as it was sent: the reference to its
    context replaced by the context's `prompt_text` (unchanged when that is unknown, or the
    run was stored whole, before the reference)."""
    if prompt_text is None:
        return messages
    reference = context_reference(context_hash)
    return [
        {**m, "content": m["content"].replace(reference, prompt_text, 1)}
        if m.get("role") == "system" and isinstance(m.get("content"), str)
        else m
        for m in messages
    ]


def dbt_doc_files(dbt_project: Path) -> list[Path]:
    """The dbt files that document models (schema YAML and doc blocks), in a stable order."""
    models = dbt_project / "models"
    if not models.is_dir():
        return []
    return sorted(p for p in models.rglob("*") if p.is_file() and p.suffix in _DBT_DOC_SUFFIXES)


#: Bytes of text per token, roughly, in English prose and SQL: for a size's token estimate.
BYTES_PER_TOKEN = 4


def context_size_problems(config: SuiteConfig) -> list[Problem]:
    """The context files, when together they pass `limits.context_max_bytes`: named with
    their sizes (the largest first), so a 55 MB RULES.md is refused before it is read into
    every request of every run, rather than refused by each provider in turn."""
    limit = config.limits.context_max_bytes
    sizes = sorted(
        ((path, path.stat().st_size) for path in config.context if path.is_file()),
        key=lambda item: -item[1],
    )
    total = sum(size for _, size in sizes)
    if total <= limit:
        return []
    allowed = (
        f"the context files may hold {limit:,} bytes together (limits.context_max_bytes, "
        f"about {limit // BYTES_PER_TOKEN:,} tokens), and every request of every run carries "
        "them: cut the file to what the agent needs, or raise limits.context_max_bytes in "
        "eval_config.yaml for a model that reads that much"
    )
    path, size = sizes[0]
    label = (
        path.relative_to(config.root).as_posix() if path.is_relative_to(config.root) else str(path)
    )
    if size > limit:
        return [Problem(label, None, f"is {_size(size)}; {allowed}")]
    shown = ", ".join(f"{p.name} {_size(s)}" for p, s in sizes)
    return [
        Problem(label, None, f"the context files are {_size(total)} together ({shown}); {allowed}")
    ]


def _size(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB ({size:,} bytes, about {size // BYTES_PER_TOKEN:,} tokens)"


def load_agent_context(config: SuiteConfig) -> AgentContext:
    """Read the configured context files, the dbt project's model documentation and the
    synced docs folder (a nao project's `databases/`)."""
    files = tuple(_read(path, config.root) for path in config.context)
    docs: tuple[ContextFile, ...] = ()
    warehouse = config.warehouse
    if warehouse is not None and warehouse.dbt_project is not None:
        project = warehouse.dbt_project
        docs = tuple(_read(path, project) for path in dbt_doc_files(project))
    synced: tuple[ContextFile, ...] = ()
    if config.synced_docs is not None and config.synced_docs.is_dir():
        # A sync tool's output, not the user's writing: a stray byte is shown, not fatal.
        synced = tuple(
            _read(path, config.root, errors="replace")
            for path in synced_doc_files(config.synced_docs)
        )
    return AgentContext(files=files, dbt_docs=docs, synced_docs=synced)


def _read(path: Path, base: Path, *, errors: str = "strict") -> ContextFile:
    """A context file labelled by its path below `base` (its full path when outside it)."""
    label = path.relative_to(base).as_posix() if path.is_relative_to(base) else str(path)
    return ContextFile(path, label, path.read_text(encoding="utf-8", errors=errors))


def synced_doc_files(folder: Path) -> list[Path]:
    """The Markdown files a sync tool wrote under `folder`, in a stable order."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix == _SYNCED_DOC_SUFFIX)
