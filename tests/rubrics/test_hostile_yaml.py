"""Hostile YAML knowledge files: refused quickly with ``file:line`` errors, never expanded, hung on or half-trusted (issue 17)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ecgtrace.cli import main
from ecgtrace.errors import RubricError
from ecgtrace.rubrics.loading import read_yaml
from ecgtrace.rubrics.template_schema import builtin_dir, load_template, load_templates

TEMPLATE = (builtin_dir("templates") / "closed_count.yaml").read_text(encoding="utf-8")


def _laughs(levels: int) -> str:
    """The "billion laughs": each level a list of nine aliases of the one before (9**levels strings, a few hundred bytes)."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    names = "abcdefghijklmnop"
    for level in range(1, levels):
        lines.append(f"{names[level]}: &{names[level]} [" + ", ".join([f"*{names[level - 1]}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _write(folder: Path, name: str, text: str | bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_billion_laughs_is_refused_in_milliseconds(tmp_path, capsys):
    path = _write(tmp_path, "laughs.yaml", _laughs(9))  # before: no answer in 60 s (7 levels: 38 s, 2.1 GB)
    assert path.stat().st_size < 600
    started = time.monotonic()
    with pytest.raises(RubricError, match=r"laughs.yaml:\d+: invalid YAML: expands to more than 100000 nodes"):
        read_yaml(path)
    assert time.monotonic() - started < 1
    for argv in (["templates", "validate", str(path)], ["templates", "list", "--templates", str(tmp_path)]):
        assert main(argv) == 2
        assert "expands to more than" in capsys.readouterr().err


def test_a_few_aliases_are_still_fine(tmp_path):
    text = TEMPLATE.replace("event_kinds: [pac, pvc, v_couplet, vt, svt, pause]", "event_kinds: &kinds [pac, pvc]\n_kinds_again: *kinds")
    data, _ = read_yaml(_write(tmp_path, "ok.yaml", text))
    assert data["_kinds_again"] == ["pac", "pvc"]


def test_deep_and_self_referencing_yaml_is_refused(tmp_path):
    deep = _write(tmp_path, "deep.yaml", "stems: " + "[" * 5000 + "]" * 5000 + "\n")  # before: RecursionError
    with pytest.raises(RubricError, match=r"deep.yaml:1: invalid YAML: nested deeper than 64 levels"):
        read_yaml(deep)
    selfref = _write(tmp_path, "self.yaml", "id: &x [1, *x]\n")
    with pytest.raises(RubricError, match=r"self.yaml:1: invalid YAML: an alias refers to the node that contains it"):
        read_yaml(selfref)
    chained = _write(tmp_path, "chained.yaml", "a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: &b " + "[" * 40 + "*a" + "]" * 40 + "\n")
    with pytest.raises(RubricError, match="deeper than 64 levels once aliases are followed"):
        read_yaml(chained)


def test_duplicate_keys_and_non_finite_numbers_are_refused(tmp_path):
    dup = _write(tmp_path, "dup.yaml", TEMPLATE + "max_items: 3\n")  # before: the second max_items silently won
    dup_line, first_line = TEMPLATE.count("\n") + 1, TEMPLATE.splitlines().index(next(l for l in TEMPLATE.splitlines() if l.startswith("max_items:"))) + 1
    with pytest.raises(RubricError, match=rf"dup.yaml:{dup_line}: invalid YAML: duplicate key 'max_items' \(first on line {first_line}\)"):
        load_template(dup)
    for value in (".nan", ".inf", "-.Inf"):
        path = _write(tmp_path, "nan.yaml", TEMPLATE.replace("window_s: 30", f"window_s: {value}"))
        with pytest.raises(RubricError, match=r"nan.yaml:7: invalid YAML: .* is not a finite number"):
            load_template(path)


def test_a_merge_key_override_is_not_a_duplicate(tmp_path):
    data, _ = read_yaml(_write(tmp_path, "merge.yaml", "base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n"))
    assert data["use"] == {"x": 1, "y": 3}


def test_a_non_utf8_template_names_its_line(tmp_path, capsys):
    path = _write(tmp_path, "latin.yaml", TEMPLATE.encode("utf-8").replace(b"How many", b"How m\xe9ny"))
    with pytest.raises(RubricError, match=r"latin.yaml:5: not UTF-8 text \(byte 0xe9\)"):
        load_template(path)
    assert main(["templates", "validate", str(path)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_fifo_or_a_huge_file_is_not_read(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(RubricError, match="not a regular file"):
        read_yaml(fifo)
    huge = _write(tmp_path, "huge.yaml", "x: " + "a" * (2 << 20) + "\n")
    with pytest.raises(RubricError, match="a knowledge file is at most"):
        read_yaml(huge)


@pytest.mark.parametrize("params, message", [
    ("offsets: abc", "params.offsets: must be a non-empty list of non-zero integers, got 'abc'"),
    ("offsets: []", "must be a non-empty list"),
    ("offsets: [1, 0]", "non-zero integers"),
    ("offsets: [1.5]", "non-zero integers"),
    ("shifts_ms: [100]", "params.shifts_ms: not a parameter of rule 'count_offsets' \\(it reads offsets\\)"),
])
def test_distractor_params_are_checked_by_validate_not_found_by_a_crash(tmp_path, params, message):
    path = _write(tmp_path, "t.yaml", TEMPLATE.replace("offsets: [-1, 1, 2]", params))
    with pytest.raises(RubricError, match=message):  # before: validate passed, preview and build crashed
        load_template(path)


def test_every_builtin_template_still_loads():
    assert len(load_templates()) >= 13
