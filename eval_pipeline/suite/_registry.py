"""A registry of adapters found by name: the built-in ones, those a package declares as Python
entry points, and those registered in this process.

The built-ins are named the way an entry point names its object (`module:attribute`) and
imported on first use, so a lower layer (the suite reads test files) can list the grading
checks it parses without importing the grading code, and a package outside this repository
adds one the same way (`[project.entry-points."eval_pipeline.checks"]` in its pyproject).
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Generic, TypeVar

from eval_pipeline.suite._errors import Problem, SuiteError, describe_error

Adapter = TypeVar("Adapter")


class ExtensionError(SuiteError):
    """An adapter could not be loaded or is not one: named by its entry point, nothing run."""


class Registry(Generic[Adapter]):
    """The adapters of one kind (grading checks, agent kinds), each by its name.

    Args:
        group: the entry-point group packages add to, e.g. `eval_pipeline.checks`.
        builtins: the built-in adapters, name → `module:attribute` (an instance, or a class
            taken without arguments), in the order they are listed and reported.
        name_of: an adapter's name (a check's name in test files, an agent kind's prefix).
        accepts: whether an object is an adapter of this kind; an entry point naming
            anything else is refused, by name, when the registry loads.
    """

    def __init__(
        self,
        group: str,
        builtins: Mapping[str, str],
        *,
        name_of: Callable[[Adapter], str],
        accepts: Callable[[object], bool],
    ) -> None:
        self.group = group
        self._builtins = dict(builtins)
        self._name_of = name_of
        self._accepts = accepts
        self._loaded: dict[str, Adapter] | None = None
        self._added: dict[str, Adapter] = {}
        self._lock = threading.Lock()

    def all(self) -> tuple[Adapter, ...]:
        """Every adapter: the built-ins in their order, then the entry points' by name, then
        those registered in this process.

        Raises:
            ExtensionError: an entry point that does not import, names no adapter, or
                takes a name already taken; it is named with the object it points at.
        """
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return (*self._loaded.values(), *self._added.values())

    def get(self, name: str) -> Adapter | None:
        return next((a for a in self.all() if self._name_of(a) == name), None)

    def register(self, adapter: Adapter) -> Adapter:
        """Add `adapter` in this process (a test, a notebook); a name already taken by a
        built-in or an entry point is refused, one registered here before is replaced."""
        if not self._accepts(adapter):
            raise TypeError(f"{adapter!r} is not an adapter of {self.group}")
        name = self._name_of(adapter)
        taken = {self._name_of(a) for a in self.all()} - set(self._added)
        if name in taken:
            raise ValueError(f"{self.group}: the name {name!r} is taken already")
        with self._lock:
            self._added[name] = adapter
        return adapter

    def unregister(self, name: str) -> None:
        """Remove an adapter `register` added (nothing when there is none)."""
        with self._lock:
            self._added.pop(name, None)

    def _load(self) -> dict[str, Adapter]:
        loaded: dict[str, Adapter] = {}
        problems: list[Problem] = []
        found = [
            EntryPoint(name, value, self.group) for name, value in self._builtins.items()
        ] + sorted(_installed().select(group=self.group), key=lambda point: point.name)
        for point in found:
            where = f"entry point {point.name} = {point.value!r} ({self.group})"
            try:
                adapter = _instance(point)
            except Exception as error:  # whatever the package raised on import
                problems.append(Problem(where, None, f"cannot be loaded: {describe_error(error)}"))
                continue
            if not self._accepts(adapter):
                problems.append(Problem(where, None, f"is not one ({type(adapter).__name__})"))
                continue
            name = self._name_of(adapter)
            if name in loaded:
                problems.append(Problem(where, None, f"takes the name {name!r}, taken already"))
                continue
            loaded[name] = adapter
        if problems:
            raise ExtensionError(
                problems, headline=f"an extension of {self.group} is broken; nothing was run"
            )
        return loaded


@functools.cache
def _installed() -> EntryPoints:
    """Every installed entry point, read once for all the registries: reading them means
    reading each installed package's metadata (10-15 ms in this project's environment)."""
    return entry_points()


def _instance(point: EntryPoint) -> object:
    module, _, attribute = point.value.partition(":")
    target: object = importlib.import_module(module.strip())
    for part in attribute.strip().split(".") if attribute else ():
        target = getattr(target, part)
    return target() if isinstance(target, type) else target
