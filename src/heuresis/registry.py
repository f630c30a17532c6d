"""Name registries, so that the config can name mechanism kinds, CI tests, algorithms and agents.

Every interface that gets swapped registers its implementations by name: adding one is a
decorated class plus its name in the config.
"""

from __future__ import annotations

from collections.abc import Callable
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
    """

    def __init__(self, kind: str, base: type | None = None, attr: str = "name") -> None:
        super().__init__()
        self.kind = kind
        self.base = base
        self.attr = attr

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
        if name in self and self[name] is not obj:
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
