"""YAML reading that remembers line numbers and rejects duplicate keys, and tidy YAML writing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlMapping(dict):
    """A mapping from a YAML file that knows the line of each of its keys."""

    def __init__(self, *args: Any, line: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line = line
        self.key_lines: dict[Any, int] = {}


class YamlSequence(list):
    """A sequence from a YAML file that knows the line of each item."""

    def __init__(self, *args: Any, line: int | None = None) -> None:
        super().__init__(*args)
        self.line = line
        self.item_lines: list[int] = []


class DuplicateKeyError(yaml.YAMLError):
    """The same key appears twice in one mapping (PyYAML would keep the last one silently)."""

    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(
            f"duplicate key {key!r} on line {line} (first defined on line {first_line})"
        )
        self.line = line


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> YamlMapping:
    loader.flatten_mapping(node)
    mapping = YamlMapping(line=node.start_mark.line + 1)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in mapping.key_lines:
            raise DuplicateKeyError(key, mapping.key_lines[key], line)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.key_lines[key] = line
    return mapping


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> YamlSequence:
    sequence = YamlSequence(line=node.start_mark.line + 1)
    for item in node.value:
        sequence.append(loader.construct_object(item, deep=True))
        sequence.item_lines.append(item.start_mark.line + 1)
    return sequence


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str) -> Any:
    """Parse YAML text into plain values whose mappings and sequences carry line numbers.

    Raises:
        yaml.YAMLError: the text is not valid YAML, or a mapping repeats a key.
    """
    return yaml.load(text, Loader=_LineLoader)  # a SafeLoader subclass: no arbitrary objects


def yaml_error_line(error: yaml.YAMLError) -> int | None:
    """The 1-based line a YAML error points at, when it knows one."""
    if isinstance(error, DuplicateKeyError):
        return error.line
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return mark.line + 1 if mark is not None else None


def yaml_error_summary(error: yaml.YAMLError) -> str:
    """One line describing a YAML error, without PyYAML's multi-line excerpt."""
    if isinstance(error, DuplicateKeyError):
        return str(error)
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    parts = [p for p in (context, problem) if p]
    return "invalid YAML: " + (", ".join(parts) if parts else str(error).splitlines()[0])


class _TidyDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks, so SQL stays readable in test files."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        text = "\n".join(line.rstrip() for line in value.splitlines()) + "\n"
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_TidyDumper.add_representer(str, _represent_str)
_TidyDumper.add_representer(YamlMapping, _TidyDumper.represent_dict)
_TidyDumper.add_representer(YamlSequence, _TidyDumper.represent_list)


def dump_yaml(data: Any) -> str:
    """Render data as block-style YAML in insertion order, multi-line strings as `|` blocks."""
    return yaml.dump(data, Dumper=_TidyDumper, sort_keys=False, allow_unicode=True, width=100)


def read_yaml_file(path: Path) -> Any:
    """Read and parse one YAML file (see `load_yaml`)."""
    return load_yaml(path.read_text(encoding="utf-8"))
