"""Load YAML knowledge files into pydantic models with precise error messages.

Templates, diagnosis graphs and judge rubrics are written by people, so an
error must name the file, the line and the field, e.g.::

    rubrics/templates/count.yaml:14: stems.0: field required

YAML is parsed with ``yaml.safe_load`` semantics only (no Python tags, no code).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ecgtrace.errors import RubricError

ModelT = TypeVar("ModelT", bound=BaseModel)


def builtin_dir(kind: str) -> Path:
    """Folder of the built-in YAML files of ``kind`` (``templates``, ``diagnoses``, ``judges``)."""
    return Path(str(resources.files("ecgtrace.rubrics") / kind))


def _line_index(node: yaml.Node, path: tuple[Any, ...], index: dict[tuple[Any, ...], int]) -> None:
    index[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            index[path + (key,)] = key_node.start_mark.line + 1
            _line_index(value_node, path + (key,), index)
            index[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for position, child in enumerate(node.value):
            _line_index(child, path + (position,), index)


def read_yaml(path: str | os.PathLike[str]) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse a YAML file safely; return the data and a map from key path to line number."""
    file_path = Path(path)
    try:
        text = file_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RubricError(f"{file_path}: cannot read ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RubricError(f"{file_path}{where}: invalid YAML: {problem}") from None
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _line_index(node, (), lines)
    return data, lines


def line_of(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    """Line of the deepest known prefix of ``loc`` (pydantic locations may go deeper than YAML keys)."""
    for end in range(len(loc), -1, -1):
        if tuple(loc[:end]) in lines:
            return lines[tuple(loc[:end])]
    return None


def rubric_error(path: str | os.PathLike[str], lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...], message: str) -> RubricError:
    """Build the one-line ``file:line: field: reason`` error used for every knowledge file."""
    line = line_of(lines, loc)
    where = f"{path}:{line}" if line else str(path)
    field = ".".join(str(part) for part in loc) or "(top level)"
    return RubricError(f"{where}: {field}: {message}")


def load_model(path: str | os.PathLike[str], model: type[ModelT]) -> ModelT:
    """Parse ``path`` and validate it as ``model``; errors name file, line and field."""
    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise RubricError(f"{path}:1: (top level): expected a mapping, found {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(part for part in first["loc"] if not (isinstance(part, str) and part.startswith("function-")))
        raise rubric_error(path, lines, loc, first["msg"]) from None
