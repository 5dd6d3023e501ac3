"""YAML for files a user writes (application files, device profiles), read strictly.

PyYAML's SafeLoader, configured to refuse what only ever hides a mistake or an attack in a
configuration file, each with one InputError line naming the file and line:
- aliases (`*name`): an alias bomb expands a few lines into gigabytes (MemoryError);
- nesting deeper than MAX_DEPTH: the composer recurses per level (RecursionError);
- duplicate keys in one mapping: YAML says keys are unique, PyYAML keeps the last silently;
- bytes that are not UTF-8.
Nothing here parses YAML itself: the checks hook PyYAML's composer and constructor.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, CollectionStartEvent

from explorer.app.input_file import read_text
from sdf3.errors import InputError

MAX_DEPTH = 64               # far beyond any real app file or profile (they nest 4-5 levels)


class StrictLoader(yaml.SafeLoader):
    """SafeLoader without aliases, with a nesting limit and unique mapping keys."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            raise ComposerError(None, None, f"aliases (*{event.anchor}) are not accepted",
                                event.start_mark)
        if not isinstance(event, CollectionStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise ConstructorError(None, None, f"duplicate key {key!r} (first at line "
                                               f"{seen[key].line + 1})", key_node.start_mark)
                    seen[key] = key_node.start_mark
                except TypeError:       # an unhashable key; PyYAML reports it below
                    pass
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, where: str) -> Any:
    """The document in `text`; InputError naming `where` and the line for bad YAML."""
    try:
        return yaml.load(text, Loader=StrictLoader)   # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputError(f"{where}: not valid YAML{at}: {problem}") from None


def load_yaml(path: str | Path, what: str = "a YAML file") -> Any:
    """The YAML document in the regular file at `path`, read strictly (see the module
    docstring); `what` names the file's kind in refusals."""
    return parse_yaml(read_text(path, what), str(path))
