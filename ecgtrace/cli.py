"""The ``ecgtrace`` command line.

Each subcommand lives in ``ecgtrace.commands.<name>`` and exposes ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``. Command modules import
only the standard library at module level, so ``ecgtrace --help`` stays fast:
neurokit2, langchain and matplotlib are imported inside ``run`` when needed.

Every :class:`~ecgtrace.errors.EcgTraceError` becomes one ``error:`` line and a
non-zero exit code, never a traceback. Output piped into a reader that stops
early (``ecgtrace compare --json | head``) ends quietly with exit code 1, no
traceback (rich does the same for tables).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Sequence

from ecgtrace import __version__
from ecgtrace.errors import EcgTraceError, environment_problem
from ecgtrace.redact import redact

#: Subcommands in the order ``--help`` lists them.
COMMANDS: tuple[str, ...] = (
    "demo",
    "synth",
    "info",
    "annotate",
    "delineate",
    "build",
    "import",
    "templates",
    "audit",
    "qa-eval",
    "compare",
    "export",
    "report",
    "view",
    "debug",
    "bias",
    "probe",
    "mock-server",
)


#: Commands whose module name differs from the command (``import`` is a Python keyword).
MODULE_NAMES: dict[str, str] = {"import": "import_"}


#: Exit code when the reader of stdout went away: 1, as rich itself exits when a table hits a closed pipe.
EXIT_BROKEN_PIPE = 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (captured output): nothing to silence
        pass


def _command_module(name: str):
    return importlib.import_module(f"ecgtrace.commands.{MODULE_NAMES.get(name, name.replace('-', '_'))}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ecgtrace",
        description="Find out whether a multimodal model really reads an ECG.",
    )
    parser.add_argument("--version", action="version", version=f"ecgtrace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = _command_module(name)
        except ModuleNotFoundError:
            continue  # a command not built yet is simply not offered
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        # a server command stops on Ctrl-C/SIGTERM by design and says so itself (HANDLES_INTERRUPT)
        sub.set_defaults(_run=module.run, _handles_interrupt=bool(getattr(module, "HANDLES_INTERRUPT", False)))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    from rich.console import Console
    from rich.markup import escape

    # user text (paths, "[5.62s - 5.81s]" options, model names) is escaped, never read as markup or emoji
    err = Console(stderr=True, highlight=False, emoji=False)

    def show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        err.print(f"[yellow]warning:[/] {escape(redact(str(message)))}", soft_wrap=True)

    warnings.showwarning = show_warning
    _SIGTERM_SEEN.clear()
    previous_sigterm = _stop_cleanly_on_sigterm()
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        if _SIGTERM_SEEN and not args._handles_interrupt:  # its KeyboardInterrupt was dropped (a finalizer): no success
            raise KeyboardInterrupt
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except EcgTraceError as exc:
        err.print(f"[bold red]error:[/] {escape(redact(str(exc)))}", soft_wrap=True)
        return exc.exit_code
    except Exception as exc:  # a full or read-only disk is the user's to fix, not a traceback; anything else is a bug
        problem = environment_problem(exc)
        if problem is None:
            raise
        err.print(f"[bold red]error:[/] {escape(redact(problem))}", soft_wrap=True)
        return EcgTraceError.exit_code
    except KeyboardInterrupt:
        err.print("[bold red]interrupted[/]: finished work is saved; run the same command again to resume")
        return 130
    finally:
        if previous_sigterm is not None:
            signal.signal(signal.SIGTERM, previous_sigterm)


#: Set when SIGTERM arrived during this main() call. The KeyboardInterrupt it raises can land where Python drops it
#: (a finalizer, a pool's done-callback); the command must still end as interrupted, never as a success (seen: exit 0).
_SIGTERM_SEEN: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    _SIGTERM_SEEN.append(signum)
    raise KeyboardInterrupt


def _stop_cleanly_on_sigterm() -> object | None:
    """SIGTERM stops a command as Ctrl-C does (workers stopped, finished work saved), not mid-write; returns the old handler."""
    try:
        return signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread (main() called from a worker thread): leave signals alone
        return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
