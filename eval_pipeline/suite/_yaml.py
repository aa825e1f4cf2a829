"""YAML reading that remembers line numbers and refuses what could hurt, and tidy YAML writing.

Every YAML file the product reads goes through `load_yaml`, so every one of them gets the same
guards: duplicate keys, mapping keys that are not plain values, nesting deeper than
`MAX_DEPTH` and aliases that expand to more than `MAX_ALIAS_NODES` nodes (a "billion laughs"
file of a few hundred bytes would otherwise expand to gigabytes once something walks it).
"""

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


#: Deepest nesting of sequences and mappings a YAML file may have (real files stay below 10).
MAX_DEPTH = 64
#: Most nodes that aliases (`*name`) may add to one document when expanded.
MAX_ALIAS_NODES = 10_000


class YamlRefused(yaml.YAMLError):
    """Valid YAML the loader refuses, with the 1-based line it points at and what to do."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class DuplicateKeyError(YamlRefused):
    """The same key appears twice in one mapping (PyYAML would keep the last one silently)."""

    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(
            f"duplicate key {key!r} on line {line} (first defined on line {first_line})", line
        )


def _line(node_or_event: Any) -> int:
    return node_or_event.start_mark.line + 1


class _Limits:
    """The composer of a loader (mixed in before it), bounding nesting depth and alias
    expansion as it builds the nodes of a document."""

    def compose_document(self) -> yaml.Node:
        self._depth = 0
        self._alias_nodes = 0
        # (nodes, depth) of each finished node an alias used: the tree an alias stands for
        self._expansions: dict[int, tuple[int, int]] = {}
        return yaml.composer.Composer.compose_document(self)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = yaml.composer.Composer.compose_node(self, parent, index)
            if node.end_mark is None:  # still being composed: the alias is inside its anchor
                raise YamlRefused(
                    f"alias *{event.anchor} refers to a value that contains it; "
                    "write the value out instead",
                    _line(event),
                )
            size, depth = self._expanded(node)
            if self._depth + depth > MAX_DEPTH:
                raise YamlRefused(
                    f"alias *{event.anchor} nests the value more than {MAX_DEPTH} levels deep; "
                    "flatten the structure",
                    _line(event),
                )
            self._alias_nodes += size
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise YamlRefused(
                    f"aliases expand to more than {MAX_ALIAS_NODES:,} values; "
                    "write the values out or use fewer aliases",
                    _line(event),
                )
            return node
        if not isinstance(event, yaml.CollectionStartEvent):
            return yaml.composer.Composer.compose_node(self, parent, index)
        if self._depth >= MAX_DEPTH:
            raise _too_deep(_line(event))
        self._depth += 1
        try:
            node = yaml.composer.Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1
        return node

    def _expanded(self, node: yaml.Node) -> tuple[int, int]:
        """How many nodes `node` stands for, and how deep it nests, with aliases expanded."""
        known = self._expansions.get(id(node))
        if known is not None:
            return known
        if isinstance(node, yaml.ScalarNode):
            size, depth = 1, 0
        else:
            parts = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [part for pair in node.value for part in pair]
            )
            children = [self._expanded(part) for part in parts]
            size = 1 + sum(count for count, _ in children)
            depth = 1 + max((levels for _, levels in children), default=0)
        self._expansions[id(node)] = (size, depth)
        return size, depth


def _too_deep(line: int) -> YamlRefused:
    return YamlRefused(f"nested more than {MAX_DEPTH} levels deep; flatten the structure", line)


class _PythonLineLoader(_Limits, yaml.SafeLoader):
    """PyYAML's own parser under the limits (where PyYAML was built without libyaml)."""

    def fetch_flow_sequence_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_sequence_start()

    def fetch_flow_mapping_start(self) -> None:
        self._check_flow_level()
        super().fetch_flow_mapping_start()

    def _check_flow_level(self) -> None:
        # The scanner reads a whole run of `[` / `{` before the composer sees the first one
        # (any of them could start a key), in quadratic time: stop it early.
        if self.flow_level >= MAX_DEPTH:
            raise _too_deep(self.get_mark().line + 1)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _LibyamlLineLoader(
        _Limits,
        yaml.composer.Composer,
        CParser,
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """libyaml's parser (six times PyYAML's speed: a suite of 500 test files loads in
        25 ms, not 150) with PyYAML's composer under the limits; the composer comes before
        the parser, whose own would build the nodes without them. libyaml refuses flow
        collections nested a thousand deep itself, before the composer sees them."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _LineLoader: type = _LibyamlLineLoader
else:
    _LineLoader = _PythonLineLoader


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> YamlMapping:
    loader.flatten_mapping(node)
    mapping = YamlMapping(line=node.start_mark.line + 1)
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            kind = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
            raise YamlRefused(
                f"a mapping key must be a plain value (text or a number), got {kind}; "
                "quote the key or restructure the mapping",
                _line(key_node),
            )
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


for _loader in {_PythonLineLoader, _LineLoader}:
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str) -> Any:
    """Parse YAML text into plain values whose mappings and sequences carry line numbers.

    Raises:
        yaml.YAMLError: the text is not valid YAML, or a mapping repeats a key.
    """
    try:
        # A safe constructor: no arbitrary objects.
        return yaml.load(text, Loader=_LineLoader)
    except yaml.scanner.ScannerError as error:
        if "maximum nesting depth" in str(error.problem):  # libyaml's own limit
            raise _too_deep(yaml_error_line(error) or 1) from None
        raise


def yaml_error_line(error: yaml.YAMLError) -> int | None:
    """The 1-based line a YAML error points at, when it knows one."""
    if isinstance(error, YamlRefused):
        return error.line
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return mark.line + 1 if mark is not None else None


def yaml_error_summary(error: yaml.YAMLError) -> str:
    """One line describing a YAML error, without PyYAML's multi-line excerpt."""
    if isinstance(error, YamlRefused):
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
