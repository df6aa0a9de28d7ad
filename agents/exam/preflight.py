"""Before a run asks anything: is the endpoint there, does it serve the model, does it take the key?

Every command that examines a model (``audit``, ``qa-eval``, ``debug --ask``,
and any later one) calls :func:`preflight` with its examinees before it
creates a run folder. A dead endpoint, a wrong model name or a bad key then
stops the command with one ``error:`` line naming the URL and the cause,
instead of a run in which every turn fails and scores 0%.

An examinee says what to check through :meth:`Examinee.preflight`
(:mod:`ecgtrace.agents.exam.examinees.base`): the built-in baselines check
nothing; ``openai:<model>`` calls :func:`check_openai_endpoint`:

1. ``GET {base_url}/models``: a connection error means unreachable, a 401/403
   a refused key; a list that holds the model settles it.
2. Otherwise (no model list, or a list without the name: llama.cpp and
   proxies answer names they do not list) one chat request of one token:
   a 404 or a 400 about the model means a wrong name; any answer, or a 400
   about something else, means the server takes the model.

429s, 5xx and timeouts are retried like turns are (``max_attempts``, doubling
``backoff_s``); connection refusals are not: a server that is not there does
not come back in a few seconds. The key is read from the environment and
never appears in a message.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from ecgtrace.errors import ModelError

OPENAI_URL = "https://api.openai.com/v1"
#: Words of a 400/404 body that mean the server does not know the model (vLLM, Ollama, LM Studio, OpenAI).
_UNKNOWN_MODEL = ("does not exist", "not found", "unknown model", "invalid model", "model_not_found", "no such model")
_SHOWN_MODELS = 8


def endpoint_url(base_url: str | None) -> str:
    """The URL requests go to: ``base_url`` without a trailing slash, or OpenAI's."""
    return (base_url or OPENAI_URL).rstrip("/")


def _cause(exc: BaseException) -> str:
    """The innermost transport error, e.g. ``ConnectError: [Errno 111] Connection refused``."""
    inner: BaseException = exc
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    text = str(inner).strip().splitlines()[0] if str(inner).strip() else ""
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def _status_text(exc: Any) -> str:
    """``HTTP 401: Incorrect API key provided`` from an ``openai.APIStatusError``."""
    message = ""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
    if not message:
        message = str(getattr(exc, "message", "") or exc)
    return f"HTTP {exc.status_code}: {message.splitlines()[0][:160] if message else ''}".rstrip(": ")


def _key_problem(url: str, api_key_env: str, exc: Any) -> ModelError:
    unset = "" if os.environ.get(api_key_env) else f"; {api_key_env} is not set"
    return ModelError(f"{url} refused the API key from ${api_key_env} ({_status_text(exc)}{unset}); "
                      f"set {api_key_env} to a key this server accepts, or name another variable with --api-key-env")


def _with_retries(call: Any, *, url: str, what: str, timeout_s: float, max_attempts: int, backoff_s: float) -> Any:
    """``call()`` with 429/5xx/timeouts retried; connection refusals and other errors are raised at once."""
    import openai

    for attempt in range(1, max(1, max_attempts) + 1):
        try:
            return call()
        except openai.APITimeoutError:
            if attempt == max_attempts:
                raise ModelError(f"{url} did not answer {what} within {timeout_s:g} s ({attempt} tries); "
                                 "check --base-url, or raise --timeout for a slow server") from None
        except openai.APIConnectionError as exc:
            raise ModelError(f"cannot reach {url} ({_cause(exc)}); is the server running? check --base-url") from None
        except openai.APIStatusError as exc:
            transient = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            if not transient:
                raise
            if attempt == max_attempts:
                raise ModelError(f"{url} answered {what} with {_status_text(exc)} after {attempt} tries; "
                                 "the server is overloaded or failing: try again later") from None
        time.sleep(min(30.0, backoff_s * 2 ** (attempt - 1)))
    raise AssertionError("unreachable")  # pragma: no cover


def _listed_models(client: Any, url: str, api_key_env: str, retry: dict[str, Any]) -> list[str] | None:
    """The model ids the server lists, or None when it has no model list."""
    import openai

    try:
        page = _with_retries(lambda: client.models.list(), url=url, what="GET /models", **retry)
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise _key_problem(url, api_key_env, exc) from None
    except openai.APIStatusError:
        return None  # 404/405/501: a server without the route; the one-token request decides
    return [str(m.id) for m in page.data]


#: The one-token request a preflight sends: it asks no item, so runs (and tests) can tell it from the examination.
PREFLIGHT_PROMPT = "Reply with the word OK."


def _one_token(client: Any, model: str, url: str, api_key_env: str, listed: list[str] | None, retry: dict[str, Any]) -> str:
    import openai

    def ask() -> Any:
        return client.chat.completions.create(model=model, max_tokens=1,
                                              messages=[{"role": "user", "content": PREFLIGHT_PROMPT}])

    try:
        _with_retries(ask, url=url, what="a one-token request", **retry)
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise _key_problem(url, api_key_env, exc) from None
    except openai.APIStatusError as exc:
        text = _status_text(exc).lower()
        about_model = "model" in text and any(word in text for word in _UNKNOWN_MODEL)
        if exc.status_code == 404 or about_model:
            if about_model or listed:
                raise ModelError(f"{url} does not serve model {model!r} ({_status_text(exc)}){_serves(listed)}; check --model") from None
            raise ModelError(f"{url} has no OpenAI chat API (POST /chat/completions got {_status_text(exc)}); "
                             "--base-url usually ends in /v1") from None
        return f"{url} answered a one-token request for {model!r} with {_status_text(exc)}; it knows the model"
    if listed is not None:
        return f"{url} answered {model!r}, which is not in its model list{_serves(listed)}"
    return f"{url} answered a one-token request for {model!r}"


def _serves(listed: list[str] | None) -> str:
    if not listed:
        return ""
    more = f", ... ({len(listed)} in all)" if len(listed) > _SHOWN_MODELS else ""
    return f"; it serves {', '.join(listed[:_SHOWN_MODELS])}{more}"


def check_openai_endpoint(model: str, *, base_url: str | None, api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 30.0,
                          max_attempts: int = 2, backoff_s: float = 1.0) -> str:
    """Check that ``base_url`` is up, serves ``model`` and takes the key in ``$api_key_env``.

    Args:
        model: the model name requests will carry.
        base_url: OpenAI-compatible endpoint (None: OpenAI's).
        api_key_env: environment variable holding the key (a placeholder is sent when it is unset).
        timeout_s: per-request timeout (s).
        max_attempts: tries on 429/5xx/timeouts.
        backoff_s: first wait between tries (s), doubling.

    Returns:
        One line saying what was found (for a progress message).

    Raises:
        ModelError: unreachable, timed out, refused key, unknown model, no chat API, or failing after retries;
            the message names the URL and the cause.
    """
    import openai

    url = endpoint_url(base_url)
    client = openai.OpenAI(base_url=url, api_key=os.environ.get(api_key_env) or "not-needed", timeout=timeout_s, max_retries=0)
    retry = {"timeout_s": timeout_s, "max_attempts": max_attempts, "backoff_s": backoff_s}
    try:
        listed = _listed_models(client, url, api_key_env, retry)
        if listed is not None and model in listed:
            return f"{url} serves {model!r}"
        return _one_token(client, model, url, api_key_env, listed, retry)
    finally:
        client.close()


def preflight(examinees: Iterable[tuple[str, Any]]) -> list[str]:
    """Check every ``(role, examinee)`` (role: ``model``, ``judge``) before a run; returns what each check found.

    Raises:
        ModelError: ``<role> <name>: <cause>`` for the first examinee whose endpoint fails.
    """
    notes = []
    for role, examinee in examinees:
        check = getattr(examinee, "preflight", None)
        if check is None:
            continue
        try:
            note = check()
        except ModelError as exc:
            raise ModelError(f"{role} {getattr(examinee, 'name', '?')}: {exc}") from None
        if note:
            notes.append(f"{role} {getattr(examinee, 'name', '?')}: {note}")
    return notes
