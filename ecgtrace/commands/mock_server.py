"""``ecgtrace mock-server``: a local OpenAI-compatible endpoint for trying ``audit`` and ``qa-eval`` without a model.

It is the server the test suite uses (:mod:`ecgtrace.agents.exam.mock_server`),
shipped in the package so a user who installed ecgtrace from a wheel has it
too: 127.0.0.1 only, no key needed, and it answers either as the oracle of an
audit set (``--items``; every chain right, which shows what a perfect run looks
like end to end through a real HTTP client) or with one fixed text
(``--answer``). ``--fault-rate`` injects 429s, 500s, timeouts and garbage, to
see retries and recorded failures.
"""

from __future__ import annotations

import argparse

HELP = "Serve a mock OpenAI-compatible endpoint on 127.0.0.1 (oracle of an audit set, or a fixed answer) to try audit without a model."
HANDLES_INTERRUPT = True  # Ctrl-C or SIGTERM is how this server is stopped: exit 0 (see ecgtrace.cli)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--items", default=None, metavar="AUDIT", help="audit.jsonl (or its folder): answer every turn as its oracle")
    parser.add_argument("--answer", default="I cannot tell.", metavar="TEXT", help="fixed answer when --items is not given")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one, printed)")
    parser.add_argument("--model", default="mock", help="model name the server lists and answers (default mock)")
    parser.add_argument("--delay", type=float, default=0.0, metavar="S", help="seconds before each answer (default 0)")
    parser.add_argument("--fault-rate", type=float, default=0.0, metavar="P",
                        help="share of requests that get a 429, a 500, a timeout or garbage (default 0)")


def run(args: argparse.Namespace) -> int:
    import time

    from ecgtrace.agents.exam.mock_server import MockOpenAI, policy_for
    from ecgtrace.errors import EcgTraceError

    if not 0.0 <= args.fault_rate <= 1.0:
        raise EcgTraceError(f"--fault-rate must be between 0 and 1, got {args.fault_rate:g}")
    if args.delay < 0 or not 0 <= args.port < 65536:
        raise EcgTraceError("--delay must be >= 0 and --port between 0 and 65535")
    policy = policy_for(args.items, args.answer)
    try:
        server = MockOpenAI(policy, delay_s=args.delay, fault_rate=args.fault_rate, models=(args.model,)).start(args.port)
    except OSError as exc:
        raise EcgTraceError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc})") from None
    answers = f"as the oracle of {args.items}" if args.items else f"{args.answer!r} to every question"
    print(f"mock OpenAI-compatible server listening on {server.url} (model {args.model!r}, answers {answers}); Ctrl-C stops it",
          flush=True)
    print(f"try: ecgtrace audit {args.items or 'DATASET/audit.jsonl'} --model openai:{args.model} --base-url {server.url} "
          "--modality text --run runs/mock", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
