"""``ecgtrace view RUN [RUN ...]``: browse runs in a local viewer (127.0.0.1), or write it as a static folder."""

from __future__ import annotations

import argparse

HELP = "Browse run folders in a local viewer on 127.0.0.1 (overview plots, sample table, turns beside the ECG, two runs compared)."
HANDLES_INTERRUPT = True  # Ctrl-C or SIGTERM is how this server is stopped: exit 0 (see ecgtrace.cli)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="audit, qa-eval or probe run folders (two or more of one kind are compared; a probe run shows one row per kept pair)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one, printed)")
    parser.add_argument("--static", default=None, metavar="DIR", help="write the viewer as a static folder DIR (open DIR/index.html) instead of serving")
    parser.add_argument("--max-images", type=int, default=1000, metavar="N",
                        help="--static: draw at most N ECG figures over all runs (default 1000; the server draws them on request)")
    parser.add_argument("--open", action="store_true", help="open the viewer in the default web browser")
    parser.add_argument("--verbose", action="store_true", help="log every request")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from ecgtrace.errors import EcgTraceError
    from ecgtrace.views.run_view import open_run
    from ecgtrace.views.viewer_site import ViewerSite

    if not 0 <= args.port <= 65535:
        raise EcgTraceError(f"--port must be 0-65535, not {args.port}")
    if args.max_images < 0:
        raise EcgTraceError("--max-images must be >= 0")
    console = Console(highlight=False, emoji=False)
    with console.status("reading the runs ..."):
        site = ViewerSite([open_run(path) for path in args.runs])
    if args.static:
        return _export(console, site, Path(args.static), args.max_images, args.open)
    return _serve(console, site, args.port, args.open, args.verbose)


def _export(console, site, out, max_images: int, open_browser: bool) -> int:  # noqa: ANN001
    from rich.markup import escape
    from rich.progress import Progress

    from ecgtrace.views.viewer_static import export_static

    total = sum(len(r.rows) for r in site.runs)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"writing {total} samples", total=len(site.runs))
        summary = export_static(site, out, max_images=max_images, progress=lambda what, done, n: progress.update(task, completed=done))
    console.print(f"wrote {escape(summary['index'])} ({summary['runs']} run(s), {summary['samples']} samples, {summary['figures']} figures)")
    if summary["figures_left_out"]:
        console.print(f"[yellow]warning:[/] {summary['figures_left_out']} figure(s) not drawn (--max-images {max_images}, or no record "
                      "and no image to draw from); raise --max-images to include more")
    if open_browser:
        import webbrowser

        webbrowser.open(Path(summary["index"]).as_uri())
    return 0


def _serve(console, site, port: int, open_browser: bool, verbose: bool) -> int:  # noqa: ANN001
    from ecgtrace.errors import EcgTraceError
    from ecgtrace.views.viewer_server import ViewerServer

    with console.status("computing overviews ..."):
        site.warm()
    try:
        server = ViewerServer(site, port, verbose=verbose)
    except OSError as exc:
        raise EcgTraceError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from None
    console.print(f"viewer at {server.url}  ({len(site.runs)} run(s), read-only; Ctrl-C stops it)", soft_wrap=True)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("viewer stopped")
    finally:
        server.server_close()
    return 0
