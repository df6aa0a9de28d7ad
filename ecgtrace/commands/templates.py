"""``ecgtrace templates list | validate FILE | preview FILE --record R``: QA templates without code."""

from __future__ import annotations

import argparse

HELP = "List, validate and preview QA templates (and validate diagnosis graph files)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="list templates")
    listing.add_argument("--templates", default=None, metavar="DIR", help="template folder (default: built-in)")
    listing.add_argument("--json", action="store_true", help="print the templates as JSON instead of a table")
    validate = sub.add_parser("validate", help="validate a template (or diagnosis graph) YAML file")
    validate.add_argument("files", nargs="+", metavar="FILE")
    preview = sub.add_parser("preview", help="write the items a template gives on one record, to stdout")
    preview.add_argument("file", metavar="FILE")
    preview.add_argument("--record", required=True, metavar="R")
    preview.add_argument("--seed", type=int, default=0)
    preview.add_argument("--fs", type=float, default=None, metavar="HZ", help="sampling rate of annotation-only records")


def _looks_like_diagnosis(data: object) -> bool:
    return isinstance(data, dict) and "task" not in data and "stems" not in data and any(k in data for k in ("criteria", "start", "labels"))


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(emoji=False, highlight=False)
    action = {"list": _list, "validate": _validate, "preview": _preview}[args.action]
    return action(args, console)


def _list(args: argparse.Namespace, console) -> int:  # noqa: ANN001
    from ecgtrace.rubrics.template_schema import load_templates, template_files

    templates = load_templates(args.templates)
    files = {p.stem: p for p in template_files(args.templates)}
    folder = next(iter(files.values())).parent if files else args.templates
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json({"folder": str(folder), "templates": [{"id": t.id, "task": t.task, "version": t.version, "scope": t.scope,
                                                          "description": t.description, "file": str(files.get(t.id, ""))} for t in templates]})
        return 0
    _print_listing(console, templates, folder)
    return 0


def _print_listing(console, templates, folder) -> None:  # noqa: ANN001
    """One row per template: its id over a dim line with task, version and scope, then the description (wrapped)."""
    from rich.markup import escape
    from rich.text import Text

    from ecgtrace.commands._output import add_columns, new_table

    table = new_table(f"{len(templates)} templates in {folder}")
    add_columns(table, ("template", "what it asks"), left=("template", "what it asks"))
    for t in templates:
        cell = Text(t.id)
        cell.append(f"\n{t.task}, v{t.version}, {t.scope}", style="dim")
        table.add_row(cell, escape(str(t.description)))
    console.print(table)


def _validate_diagnosis(path: str, console) -> None:  # noqa: ANN001
    from ecgtrace.errors import RubricError
    from ecgtrace.rubrics.diagnosis_schema import validate_diagnosis_file

    problems = validate_diagnosis_file(path)
    if problems:
        for problem in problems[1:]:
            console.print(f"[red]error:[/] {problem}", highlight=False, soft_wrap=True)
        raise RubricError(problems[0])
    console.print(f"[green]ok[/] {path} (diagnosis graph)", highlight=False)


def _validate(args: argparse.Namespace, console) -> int:  # noqa: ANN001
    """Schema first (file:line errors), then the task registry: a task with rules but no implementation fails too."""
    import importlib.util

    from ecgtrace.agents.holter.tasks import check_registry, get_task
    from ecgtrace.rubrics.loading import read_yaml
    from ecgtrace.rubrics.template_schema import load_template

    check_registry()
    for path in args.files:
        data, _ = read_yaml(path)
        if _looks_like_diagnosis(data) and importlib.util.find_spec("ecgtrace.rubrics.diagnosis_schema") is not None:
            _validate_diagnosis(path, console)
            continue
        template = load_template(path)
        get_task(template.task)
        console.print(f"[green]ok[/] {path}: {template.id} ({template.task}, v{template.version}, {len(template.stems)} stems)", highlight=False)
    return 0


def _preview(args: argparse.Namespace, console) -> int:  # noqa: ANN001
    """The items a template gives on one record (annotations come from, and stay in, the user's cache)."""
    from ecgtrace.agents.holter import annotator, planner, verifier, writer
    from ecgtrace.agents.holter.facts import load_facts
    from ecgtrace.jsonio import to_json_text
    from ecgtrace.rubrics.template_schema import load_template

    template = load_template(args.file)
    ref = annotator.load_record(args.record, fs_hz=args.fs)
    facts = load_facts(annotator.annotate(ref, fs_hz=args.fs)["path"])
    entries = planner.plan(facts, [template], args.seed)
    items = writer.write_items(facts, template, entries[0]["targets"] if entries else [], seed=args.seed)
    kept, dropped = verifier.verify(facts, items)
    for item in kept:
        shown = {k: item[k] for k in ("id", "question", "answer", "answer_type", "window", "evidence")}
        shown["distractors"] = item.get("_distractors")
        print(to_json_text(shown))
    for drop in dropped:
        console.print(f"[yellow]dropped[/] {drop['id']}: {drop['reason']}", highlight=False)
    console.print(f"{len(kept)} items, {len(dropped)} dropped", highlight=False)
    return 0
