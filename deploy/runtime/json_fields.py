"""Typed reads from the JSON objects of a file a user may edit (manifest.json): a missing
key or a value of the wrong type is one line naming the object and the key (InputError)."""
from __future__ import annotations

from typing import Any

from sdf3.errors import InputError


class Fields:
    """Typed reads from one JSON object; a bad value is one line naming `where` and the key."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def _fail(self, key: str, what: str) -> None:
        raise InputError(f"{self.where}: key {key!r} must be {what}, got {self.data.get(key)!r}")

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise InputError(f"{self.where}: missing key {key!r}")
            return default
        return self.data[key]

    def int(self, key: str, default: Any = ...) -> int:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, int) or isinstance(v, bool):
            self._fail(key, "an integer")
        return v

    def str(self, key: str, default: Any = ...) -> str:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, str):
            self._fail(key, "a string")
        return v

    def ints(self, key: str, default: Any = ...) -> tuple[int, ...]:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            self._fail(key, "a list of integers")
        return tuple(v)

    def strs(self, key: str, default: Any = ...) -> tuple[str, ...]:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self._fail(key, "a list of strings")
        return tuple(v)

    def list(self, key: str, default: Any = ...) -> list:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, list):
            self._fail(key, "a list")
        return v

    def dict(self, key: str) -> dict:
        v = self.raw(key)
        if not isinstance(v, dict):
            self._fail(key, "an object")
        return v
