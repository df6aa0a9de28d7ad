"""``ecgtrace debug RUNDIR --sample ID``: step through one sample turn by turn."""

from __future__ import annotations

import argparse

HELP = "Step through one sample of a run turn by turn; re-ask a turn with another model or answer it yourself."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run folder written by `ecgtrace audit` or `ecgtrace qa-eval`")
    parser.add_argument("--sample", default=None, help="sample id (default: the first sample whose chain broke, else the first)")
    parser.add_argument("--turn", type=int, default=None, help="only this turn (index); with --ask/--human the turn to re-ask")
    parser.add_argument("--all", action="store_true", help="print every turn without pausing between them")
    parser.add_argument("--ask", action="store_true", help="re-ask --turn (default: where the chain broke) with --model")
    parser.add_argument("--model", default=None, help="model for --ask: any --model of `ecgtrace audit` but human (use --human)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible base URL for --model openai:<name>")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--human", action="store_true", help="answer --turn yourself, in the model's place")
    parser.add_argument("--view", action="store_true", help="open this sample in the results viewer (ecgtrace view RUN, ?sample=ID)")
    parser.add_argument("--json", action="store_true", help="print the sample (or, with --ask/--human, the re-asked turn) as JSON")


def run(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.panel import Panel

    from ecgtrace.views.debugger import load_debug_sample, options_text
    from ecgtrace.errors import EcgTraceError

    console = Console(emoji=False, highlight=False, stderr=args.json)
    if args.sample is None:
        args.sample = first_broken_sample(args.run)
        console.print(f"no --sample given: showing {args.sample}, the first sample whose chain broke (or the first one)",
                      markup=False)
    sample = load_debug_sample(args.run, args.sample)
    broke = sample.broke_at() if sample.kind == "audit" else None
    if args.json and not (args.ask or args.human or args.view):
        from ecgtrace.commands._output import print_json

        print_json({"run": str(args.run), "kind": sample.kind, "broke_at": broke, "ecg": ecg_location(sample), "sample": sample.row})
        return 0
    console.print(_header(sample, broke))
    for line in ecg_lines(sample):
        console.print(line, markup=False)
    if args.view:
        return _view(console, args)
    if args.ask or args.human:
        if args.ask and args.human:
            raise EcgTraceError("choose --ask or --human, not both")
        target = args.turn if args.turn is not None else (broke if broke is not None else 0)
        return _reask(console, sample, target, args)
    interactive = sys.stdin.isatty() and not args.all and args.turn is None
    for position, turn in enumerate(sample.turns):
        index = int(turn.get("index", position))
        if args.turn is not None and index != args.turn:
            continue
        console.print(Panel(_turn_body(turn, options_text), title=_turn_title(turn, index, broke), title_align="left",
                            border_style=_style(turn)))
        if interactive and position + 1 < len(sample.turns):
            if console.input("[dim]Enter: next turn, q: quit[/] ").strip().lower() == "q":
                break
    return 0


def first_broken_sample(run: str) -> str:
    """Id of the run's first sample (in file order) with a wrong turn after the initial one; else its first sample."""
    from ecgtrace.errors import RunError
    from ecgtrace.runlog import load_run_samples
    from ecgtrace.views.debugger import DebugSample

    header, rows = load_run_samples(run)
    if not rows:
        raise RunError(f"{run}: no finished samples to show")
    for row in rows:
        sample = DebugSample(run, header, row)  # type: ignore[arg-type]
        wrong = sample.broke_at() is not None if sample.kind == "audit" else not all(t.get("correct") for t in row["turns"])
        if wrong:
            return row["id"]
    return rows[0]["id"]


def _header(sample, broke: int | None) -> str:  # noqa: ANN001
    """``ID (audit run, af, label True): 9 of 12 asked turns correct; chain broke at turn 3`` - turns counted as the report counts them."""
    from rich.markup import escape

    row = sample.row
    asked = [t for t in sample.turns if t.get("asked", True)]
    right = sum(1 for t in asked if t.get("correct"))
    skipped = len(sample.turns) - len(asked)
    what = ", ".join(x for x in (f"{sample.kind} run", escape(str(row["diagnosis"])) if row.get("diagnosis") else "",
                                 f"label {row['label']}" if "label" in row else "", escape(str(row["task"])) if row.get("task") else "") if x)
    counts = f"{right} of {len(asked)} asked turns correct" + (f", {skipped} not asked (the chain stopped)" if skipped else "")
    verdict = "[green]every step correct[/]" if broke is None else f"[red]chain broke at turn {broke}[/]"
    if sample.kind != "audit":
        verdict = "[green]correct[/]" if right == len(asked) else "[red]wrong[/]"
    return f"[bold]{escape(row['id'])}[/] ({what})\n{counts}; {verdict}"


def ecg_location(sample) -> dict:  # noqa: ANN001
    """Where the ECG of this sample is: ``{"record", "window", "files": {kind: {"path", "exists"}}}`` (absolute paths).

    ``{"error": ...}`` when the run's dataset is no longer there to say.
    """
    from pathlib import Path

    from ecgtrace.errors import EcgTraceError

    item, base = sample.row.get("item") or {}, None
    if sample.kind == "audit":
        try:
            from ecgtrace.views.debugger import _dataset_item

            found, base = _dataset_item(sample)
            item = found.to_json()
        except EcgTraceError as exc:
            return {"error": str(exc)}
    else:
        dataset = sample.header.get("settings", {}).get("dataset_path")
        base = Path(dataset).parent if dataset else None
    files = dict(item.get("assets") or {})
    for kind, value in (item.get("modalities") or {}).items():
        if value:
            files[kind] = value[0] if isinstance(value, list) else value
    located = {}
    for kind, rel in files.items():
        if rel:
            path = ((Path(base) / rel) if base is not None else Path(rel)).resolve()
            located[kind] = {"path": str(path), "exists": path.exists()}
    return {"record": (item.get("record") or {}).get("path"), "window": item.get("window"), "files": located}


def ecg_lines(sample) -> list[str]:  # noqa: ANN001
    """:func:`ecg_location` as lines for the terminal."""
    where = ecg_location(sample)
    if "error" in where:
        return [f"ECG: not found ({where['error']})"]
    window = where["window"]
    lines = [f"ECG record: {where['record'] or '?'}" + (f", window {window['t0_s']:g}-{window['t1_s']:g} s" if window else "")]
    for kind, found in where["files"].items():
        lines.append(f"ECG {kind}: {found['path']}" + ("" if found["exists"] else " (missing)"))
    return lines


def _view(console, args: argparse.Namespace) -> int:  # noqa: ANN001
    """Serve the run in the viewer on a port chosen here, so the sample's own URL can be printed first."""
    import importlib.util
    import socket

    if importlib.util.find_spec("ecgtrace.commands.view") is None:
        console.print(f"the viewer is not part of this install; with it, run: ecgtrace view {args.run}  and open the URL it "
                      f"prints followed by ?sample={args.sample}", markup=False)
        return 0
    from urllib.parse import quote

    from ecgtrace.cli import main as cli

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    console.print(f"this sample in the viewer: http://127.0.0.1:{port}/?sample={quote(args.sample)}  (Ctrl-C stops it)", markup=False)
    return cli(["view", str(args.run), "--port", str(port)])


def _style(turn: dict) -> str:
    if not turn.get("asked", True):
        return "dim"
    return "green" if turn.get("correct") else "red"


def _turn_title(turn: dict, index: int, broke: int | None) -> str:
    from rich.markup import escape

    stage = str(turn.get("stage"))
    kind = f" / {turn['kind']}" if turn.get("kind") and stage == "grounding" else ""
    loop = f" loop {turn['loop']}" if turn.get("loop") is not None else ""
    mark = "not asked" if not turn.get("asked", True) else ("correct" if turn.get("correct") else "WRONG")
    broke_here = "  <- the chain broke here" if broke == index else ""
    return escape(f"turn {index}: {stage}{kind}{loop}  [{mark}]{broke_here}")


def _turn_body(turn: dict, options_text) -> str:  # noqa: ANN001
    from rich.markup import escape

    if turn.get("options"):
        lines = [f"[bold]Q:[/] {escape(str(turn.get('question')))}", escape(options_text(turn["options"]))]
    else:  # a recorded turn keeps the prompt exactly as it was sent
        lines = [escape(str(turn.get("prompt") or ""))]
    if not turn.get("asked", True):
        lines.append(f"[bold]truth:[/] {escape(str(turn.get('answer')))}")
        return "\n".join(lines)
    lines.append(f"[bold]model's raw answer:[/] {escape(str(turn.get('raw')))}")
    if turn.get("reasoning"):
        lines.append(f"[bold]model's reasoning:[/] {escape(str(turn['reasoning'])[:2000])}")
    parsed = turn.get("parsed")
    reason = turn.get("parse_reason")
    lines.append(f"[bold]model's answer, as parsed:[/] {escape(str(parsed))}"
                 + (f"  ({escape(str(reason))})" if reason and not turn.get("parse_ok") else ""))
    lines.append(f"[bold]truth:[/] {escape(str(turn.get('answer')))}")
    lines.append("[bold]verdict:[/] " + ("[green]correct[/]" if turn.get("correct") else "[red]wrong[/]"))
    if turn.get("error"):
        lines.append(f"[bold red]error:[/] {escape(str(turn['error']))}")
    extras = [f"{turn['latency_ms']:.0f} ms" if turn.get("latency_ms") is not None else None,
              f"tokens {turn['tokens']}" if turn.get("tokens") else None]
    if any(extras):
        lines.append("[dim]" + escape(", ".join(e for e in extras if e)) + "[/]")
    return "\n".join(lines)


def _reask(console, sample, turn_index: int, args: argparse.Namespace) -> int:  # noqa: ANN001
    from rich.table import Table
    from rich.text import Text

    from ecgtrace.views.debugger import reask_turn_sync

    examinee, who = _examinee(console, args)
    old = next((t for t in sample.turns if int(t.get("index", -1)) == turn_index), None)
    new, source = reask_turn_sync(sample, turn_index, examinee)
    changed = old is None or old.get("correct") != new.get("correct")
    if args.json:
        from ecgtrace.commands._output import print_json

        print_json({"turn": turn_index, "state_before": source, "who": who, "in_the_run": old, "now": new, "verdict_changed": changed})
        return 0
    console.print(f"[dim]state before turn {turn_index}: {source}[/]")
    table = Table(title=f"turn {turn_index} ({new['stage']}) re-asked", show_lines=True)
    table.add_column("")
    table.add_column("in the run", overflow="fold")
    table.add_column(f"now ({who})", overflow="fold")
    for field, label in (("raw", "model's raw answer"), ("parsed", "model's answer, as parsed"), ("answer", "truth"),
                         ("correct", "correct"), ("error", "error")):
        before = "" if old is None else str(old.get(field))
        table.add_row(label, Text(before), Text(str(new.get(field))))
    console.print(table)
    console.print("[yellow]the verdict changed[/]" if changed else "the verdict is the same")
    return 0


def _examinee(console, args: argparse.Namespace):  # noqa: ANN001, ANN202
    """(examinee, who) for the re-ask: you at the terminal (``--human``), or ``--model``."""
    from ecgtrace.agents.exam.examinees import HumanExaminee, make_examinee
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.views.debugger import options_text

    if args.human:
        def ask(turn: dict) -> str:
            console.print(_turn_body({**turn, "asked": False, "answer": "?"}, options_text).rsplit("\n", 1)[0])
            return console.input("[bold]your answer:[/] ")

        return HumanExaminee(ask=ask), "you"
    if not args.model:
        raise EcgTraceError("--ask needs --model (e.g. openai:<name>, oracle, random or prior)")
    if args.model == "human":
        raise EcgTraceError("to answer yourself use --human")
    from ecgtrace.agents.exam.preflight import preflight

    examinee = make_examinee(args.model, base_url=args.base_url, api_key_env=args.api_key_env, timeout_s=args.timeout, concurrency=1)
    preflight([("model", examinee)])
    return examinee, args.model
