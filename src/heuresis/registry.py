"""Name registries, so that the config can name mechanism kinds, CI tests, algorithms and agents.

Every interface that gets swapped registers its implementations by name: adding one is a
decorated class plus its name in the config.  A registry with an entry-point group also holds
what installed packages declare in that group (``name = "package.module:object"``): a package of
your own adds an algorithm, a CI test or a mechanism kind without editing this one.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any, TypeVar

__all__ = ["MODEL_KINDS", "Registry"]

#: Agent kinds that send requests to a model: paid, capped, logged and replayed as LLM agents are
#: (``llm``: through litellm; ``inspect``: through an inspect_ai model).
MODEL_KINDS = frozenset({"llm", "inspect"})

T = TypeVar("T")


class Registry(dict):
    """A ``dict`` of name -> implementation with one error message for unknown names.

    Parameters
    ----------
    kind : str
        What is registered ("algorithm", "CI test", ...), used in error messages.
    base : type, optional
        When given, only subclasses of ``base`` may be registered, and each gets its registered
        name as the class attribute ``attr``.
    attr : str
        Class attribute that receives the registered name (default ``name``).
    entry_points : str, optional
        An entry-point group whose installed entries are registered under their entry names the
        first time the registry is read (a name, the known names); an entry that cannot be loaded
        is an error naming it.
    """

    def __init__(self, kind: str, base: type | None = None, attr: str = "name", entry_points: str | None = None) -> None:
        super().__init__()
        self.kind = kind
        self.base = base
        self.attr = attr
        self.entry_points = entry_points
        self._loaded = entry_points is None

    def _plugins(self) -> None:
        """Register the installed entries of the entry-point group (once)."""
        if self._loaded:
            return
        self._loaded = True
        for ep in metadata.entry_points(group=str(self.entry_points)):
            dist = getattr(ep, "dist", None)
            where = f"entry point {ep.name} = {ep.value!r} (group {self.entry_points}" + (
                f", distribution {dist.name} {dist.version})" if dist is not None else ")")
            try:
                obj = ep.load()
            except Exception as exc:
                raise ValueError(f"{self.kind} {ep.name!r}: {where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
            held = dict.get(self, ep.name)
            if held is not None and held is not obj and _origin(held) == _origin(obj):
                dict.__delitem__(self, ep.name)   # the same class, its module imported again
            if dict.__contains__(self, ep.name):   # its import registered it (a decorator), or a built-in holds the name
                if dict.__getitem__(self, ep.name) is not obj and self.base is not None:
                    raise ValueError(f"{self.kind} {ep.name!r}: {where} names another object than the one "
                                     f"registered under that name ({dict.__getitem__(self, ep.name)!r})")
                continue
            if self.base is None:
                raise ValueError(f"{self.kind} {ep.name!r}: {where} was loaded but registered nothing under "
                                 f"{ep.name!r} (register it by name where it is defined)")
            try:
                self.add(ep.name, obj)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{self.kind} {ep.name!r}: {where}: {exc}") from exc

    def __contains__(self, name: object) -> bool:
        self._plugins()
        return dict.__contains__(self, name)

    def __iter__(self):
        self._plugins()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._plugins()
        return dict.__len__(self)

    def __getitem__(self, name: Any) -> Any:
        self._plugins()
        return dict.__getitem__(self, name)

    def keys(self):
        """The names (the installed entries' included)."""
        self._plugins()
        return dict.keys(self)

    def items(self):
        """(name, implementation) pairs (the installed entries' included)."""
        self._plugins()
        return dict.items(self)

    def values(self):
        """The implementations (the installed entries' included)."""
        self._plugins()
        return dict.values(self)

    def get(self, name: Any, default: Any = None) -> Any:
        """What ``name`` names, else ``default`` (the installed entries' included)."""
        self._plugins()
        return dict.get(self, name, default)

    def add(self, name: str, obj: Any) -> Any:
        """Register ``obj`` under ``name`` and return it.

        Raises
        ------
        TypeError
            When the registry has a ``base`` and ``obj`` is not a subclass of it.
        ValueError
            When ``name`` is already registered to another object.
        """
        if self.base is not None and not (isinstance(obj, type) and issubclass(obj, self.base)):
            raise TypeError(f"{obj!r} is not a {self.base.__name__} subclass")
        if dict.__contains__(self, name) and dict.__getitem__(self, name) is not obj:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        if self.base is not None:
            setattr(obj, self.attr, name)
        self[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering a class (or function) under ``name``."""
        return lambda obj: self.add(name, obj)

    def lookup(self, name: str) -> Any:
        """Return what is registered under ``name``; a ValueError listing the known names otherwise."""
        try:
            return self[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; known: {sorted(self)}") from None


def _origin(obj: Any) -> tuple[str | None, str | None]:
    """Where ``obj`` is defined: (module, qualified name)."""
    return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
