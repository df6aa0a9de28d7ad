"""Examinees by name: ``--model`` is looked up here, never in an if-chain.

A spec is ``name`` (``oracle``) or ``name:argument`` (``openai:gpt-4o``). The
name is found, in this order, among

1. the built-in backends (:data:`BUILTIN_MODULES`, one module each in this package),
2. backends registered at run time with :func:`register_examinee`,
3. the entry points of group :data:`ENTRY_POINT_GROUP` that installed packages declare::

       # the plugin's pyproject.toml
       [project.entry-points."ecgtrace.examinees"]
       mymodel = "mypackage.examinee:BACKEND"   # a Backend, or a factory(argument, options) -> Examinee

Built-in names cannot be taken over by a plugin: a plugin that claims one is
ignored for that name, so ``oracle`` always means the ground truth.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from ecgtrace.agents.exam.examinees.base import Backend, Examinee, ExamineeOptions
from ecgtrace.errors import ModelError

#: Entry point group through which installed packages add examinees.
ENTRY_POINT_GROUP = "ecgtrace.examinees"
#: The built-in backends, one module each (each defines ``BACKEND``), in the order help texts list them.
BUILTIN_MODULES: tuple[str, ...] = ("openai_chat", "langchain_chat", "oracle", "random_pick", "prior", "human")

_REGISTERED: dict[str, Backend] = {}


def builtin_backends() -> dict[str, Backend]:
    """The built-in backends by name (cheap: these modules import nothing heavy)."""
    out: dict[str, Backend] = {}
    for module in BUILTIN_MODULES:
        backend: Backend = importlib.import_module(f"{__package__}.{module}").BACKEND
        out[backend.name] = backend
    return out


def register_examinee(backend: Backend) -> None:
    """Add (or replace) a backend at run time; built-in names are refused."""
    if backend.name in builtin_backends():
        raise ModelError(f"examinee name {backend.name!r} is built in and cannot be replaced")
    if not backend.name or ":" in backend.name:
        raise ModelError(f"examinee name {backend.name!r} must be non-empty and hold no ':'")
    _REGISTERED[backend.name] = backend


def unregister_examinee(name: str) -> None:
    """Forget a backend added with :func:`register_examinee` (tests, notebooks)."""
    _REGISTERED.pop(name, None)


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load_entry_point(ep: Any) -> Backend:
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is the user's install problem: one line
        raise ModelError(f"examinee plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}") from None
    if isinstance(obj, Backend):
        return obj if obj.name == ep.name else Backend(ep.name, obj.factory, obj.argument, obj.summary)
    if callable(obj):
        return Backend(ep.name, obj)
    raise ModelError(f"examinee plugin {ep.name!r} ({ep.value}) is neither a Backend nor a factory")


def find_backend(name: str) -> Backend | None:
    """The backend called ``name``: built-in, registered, or from an installed plugin; None if unknown."""
    builtin = builtin_backends()
    if name in builtin:
        return builtin[name]
    if name in _REGISTERED:
        return _REGISTERED[name]
    ep = _entry_points().get(name)
    return _load_entry_point(ep) if ep is not None else None


def examinee_specs(*, plugins: bool = True) -> list[str]:
    """Every spec ``--model`` accepts, as help texts write them (``openai:<model>``, ``oracle``, ...).

    ``plugins=False`` leaves out installed plugins (no metadata scan: ``--help`` stays fast).
    """
    specs = [b.spec for b in builtin_backends().values()] + [b.spec for b in _REGISTERED.values()]
    if plugins:
        specs += [name for name in sorted(_entry_points()) if name not in builtin_backends() and name not in _REGISTERED]
    return specs


def describe_specs(*, plugins: bool = False) -> str:
    """``openai:<model>, oracle, random, prior or human`` (for help texts and errors)."""
    specs = examinee_specs(plugins=plugins)
    return specs[0] if len(specs) == 1 else f"{', '.join(specs[:-1])} or {specs[-1]}"


def make_examinee(spec: str, *, seed: int = 0, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                  timeout_s: float = 120.0, concurrency: int = 8, max_attempts: int = 4, backoff_s: float = 1.0,
                  max_tokens: int | None = None, temperature: float | None = None, max_reply_chars: int | None = None,
                  max_rpm: float | None = None, max_tpm: float | None = None) -> Examinee:
    """Build an examinee from ``--model`` (see the module docstring for where names come from).

    ``max_reply_chars`` (default :data:`~ecgtrace.agents.exam.examinees.base.MAX_REPLY_CHARS`):
    how much of each reply a run keeps and sends back in later turns. ``max_rpm``/``max_tpm``:
    the rate limits of backends that send requests (see :mod:`ecgtrace.agents.exam.rate_limit`).

    Raises:
        ModelError: unknown name, an argument where none is taken, or a plugin that fails to load.
    """
    name, colon, argument = str(spec).partition(":")
    backend = find_backend(name)
    if backend is None or (colon and backend.argument is None):
        raise ModelError(f"unknown model {spec!r}: use {describe_specs(plugins=True)}")
    options = ExamineeOptions(seed=seed, base_url=base_url, api_key_env=api_key_env, timeout_s=timeout_s, concurrency=concurrency,
                              max_attempts=max_attempts, backoff_s=backoff_s, max_tokens=max_tokens, temperature=temperature,
                              max_rpm=max_rpm, max_tpm=max_tpm)
    examinee = backend.factory(argument if colon else None, options)
    if not isinstance(examinee, Examinee):
        raise ModelError(f"examinee backend {name!r} returned {type(examinee).__name__}, not an Examinee")
    if max_reply_chars is not None:
        examinee.max_reply_chars = int(max_reply_chars)
    return examinee
