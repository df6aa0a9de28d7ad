"""Options shared by the commands that examine a model (``audit``, ``qa-eval``)."""

from __future__ import annotations

import argparse

from ecgtrace.contracts.vocabulary import EXAM_MODALITIES


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """Model, run folder, endpoint, key, modality and request limits, declared once for every examining command."""
    parser.add_argument("--model", required=True, help="openai:<model>, oracle, random, prior or human")
    parser.add_argument("--run", required=True, metavar="RUNDIR", help="run folder (created; reused to resume)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="environment variable holding the API key (default OPENAI_API_KEY); the key is never written")
    parser.add_argument("--modality", choices=EXAM_MODALITIES, default="image", help="how the ECG is shown (default image)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S", help="per-request timeout in seconds (default 120)")
    parser.add_argument("--max-attempts", type=int, default=4, help="tries per request on 429/5xx/timeouts (default 4)")
    parser.add_argument("--max-tokens", type=int, default=None, help="cap on answer tokens")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N items")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random examinee (default 0)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar or table")
