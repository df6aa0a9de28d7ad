"""Load YAML knowledge files into pydantic models with precise error messages.

Templates, diagnosis graphs and judge rubrics are written by people, so an
error must name the file, the line and the field, e.g.::

    rubrics/templates/count.yaml:14: stems.0: field required

YAML is parsed with ``yaml.safe_load`` semantics only (no Python tags, no code), by a
loader that also refuses what no knowledge file needs: files over 1 MiB, nesting over
64 levels, alias expansion over 100,000 nodes ("billion laughs"), self-referencing
aliases, duplicate keys and NaN/infinite numbers (:class:`BoundedLoader`).
"""

from __future__ import annotations

import math
import os
import stat
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


#: A knowledge file is a page or two of YAML; anything this large is refused before parsing.
MAX_YAML_BYTES = 1 << 20
#: Nesting deeper than this (after following aliases) is refused: no template or graph needs it.
MAX_YAML_DEPTH = 64
#: Nodes after following every alias ("billion laughs" expands a 500-byte file to billions).
MAX_YAML_NODES = 100_000


class _Refused(yaml.YAMLError):
    """A document this loader will not build (too deep, too large, self-referencing, duplicate keys, NaN)."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses what no knowledge file needs and an attacker would send.

    Nesting deeper than :data:`MAX_YAML_DEPTH`, duplicate keys in one mapping
    (YAML says last wins: a silent override), and ``.nan`` / ``.inf`` numbers
    (every threshold must be finite). Alias expansion is bounded separately by
    :func:`check_expansion`, on the composed node graph, before anything is built.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise _Refused(f"duplicate key {key!r} (first on line {seen[key]}); YAML would silently keep the last",
                               key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_finite_float(self, node: yaml.ScalarNode) -> float:
        value = self.construct_yaml_float(node)
        if not math.isfinite(value):
            raise _Refused(f"{node.value!r} is not a finite number", node.start_mark)
        return value


BoundedLoader.add_constructor("tag:yaml.org,2002:float", BoundedLoader.construct_finite_float)


def check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that references itself, or that expands (aliases followed) past the bounds.

    Sizes and depths are computed once per node (memoized, iteratively), so a
    billion-laughs file costs microseconds to refuse instead of gigabytes to build.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        kids = _children(node)
        if children_done:
            active.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[key] > MAX_YAML_NODES:
                raise _Refused(f"expands to more than {MAX_YAML_NODES} nodes (aliases of aliases?)", node.start_mark)
            if depth[key] > MAX_YAML_DEPTH:
                raise _Refused(f"nested deeper than {MAX_YAML_DEPTH} levels once aliases are followed", node.start_mark)
            continue
        if key in size:
            continue
        if key in active:
            raise _Refused("an alias refers to the node that contains it (self-reference)", node.start_mark)
        active.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
        for k in kids:
            if id(k) in active:
                raise _Refused("an alias refers to the node that contains it (self-reference)", k.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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


def _read_text(file_path: Path) -> str:
    """The file's text: a regular file of at most :data:`MAX_YAML_BYTES`, UTF-8."""
    try:
        info = file_path.stat()
    except OSError as exc:
        raise RubricError(f"{file_path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise RubricError(f"{file_path}: not a regular file")
    if info.st_size > MAX_YAML_BYTES:
        raise RubricError(f"{file_path}: {info.st_size} bytes; a knowledge file is at most {MAX_YAML_BYTES} bytes")
    try:
        with open(file_path, "rb") as handle:
            data = handle.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise RubricError(f"{file_path}: cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RubricError(f"{file_path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8") from None


def read_yaml(path: str | os.PathLike[str]) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Parse a YAML file safely (:class:`BoundedLoader`); return the data and a map from key path to line number."""
    file_path = Path(path)
    text = _read_text(file_path)
    loader = BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            check_expansion(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RubricError(f"{file_path}{where}: invalid YAML: {problem}") from None
    finally:
        loader.dispose()
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
