"""Why an agent run could not finish: one hierarchy telling infrastructure failures from config mistakes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    from eval_pipeline.agents._types import Completion
from eval_pipeline.suite import MIN_PIECE, REDACTED, Redactor, redact, truncate

__all__ = [
    "DETAIL_CHARS",
    "AgentError",
    "AuthenticationFailed",
    "ProtocolError",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "ReplyTruncated",
    "RequestRejected",
    "ResponseTooLarge",
    "UnknownModel",
    "redact_url",
    "require_not_cut",
    "scrub",
]


class AgentError(Exception):
    """The run could not finish for a reason outside the agent's answer: the run's status is `error`.

    Catch this (not `Exception`) around one agent run: anything else is a bug or a
    configuration mistake, and should stop the evaluation instead of being recorded per run.
    """


#: The most of what an endpoint or its transport said that an error keeps: the error is
#: stored with every run it ends, shown in reports and results files, so an endpoint's
#: 60 KB error page must not become 60 KB in each of them.
DETAIL_CHARS = 300


class ProviderError(AgentError):
    """A remote endpoint (an LLM provider or an agent under test) failed or answered unusably.

    The one owner of an HTTP error's text: whoever raises it, `detail` is kept on one line
    and cut to `DETAIL_CHARS`; the callers scrub it of the request's secrets first (a cut
    secret is still a secret).

    Attributes:
        endpoint: who was called, e.g. ``openai:gpt-4.1`` or ``http:my-agent``.
        url: the URL called, with credentials and query values removed.
        status_code: the HTTP status of the last response, None when there was none.
        attempts: how many times the request was sent (retries included), None when unknown.
        detail: what the endpoint or the transport said, with secrets removed, on one line
            of at most `DETAIL_CHARS` characters.
    """

    retryable: bool = False
    hint: str = "Check the endpoint's configuration in eval_config.yaml."

    def __init__(
        self,
        problem: str,
        *,
        endpoint: str,
        url: str,
        method: str = "POST",
        status_code: int | None = None,
        attempts: int | None = None,
        detail: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem
        self.endpoint = endpoint
        self.url = redact_url(url)
        self.method = method
        self.status_code = status_code
        self.attempts = attempts
        self.detail = (
            truncate(" ".join(scrub(detail, ()).split()), DETAIL_CHARS) if detail else None
        )
        if hint is not None:
            self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        status = f" (HTTP {self.status_code})" if self.status_code is not None else ""
        tries = ""
        if self.attempts is not None:
            tries = f" after {self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        detail = f": {self.detail}" if self.detail else ""
        return (
            f"{self.endpoint}: {self.problem}{status} from {self.method} {self.url}"
            f"{tries}{detail}. {self.hint}"
        )


class RateLimited(ProviderError):
    """HTTP 429 on every attempt: the endpoint throttled us for longer than the retry budget."""

    retryable = True
    hint = "Lower test.threads, raise the account's rate limit, or rerun later (finished runs are kept)."


class ProviderUnavailable(ProviderError):
    """A 5xx status, a refused or reset connection: the endpoint failed on its side."""

    retryable = True
    hint = "Check that the server is up and reachable, or rerun later (finished runs are kept)."


class ProviderTimeout(ProviderError):
    """No complete response within the configured timeout, on every attempt."""

    retryable = True
    hint = (
        "Raise timeout_s (the whole request) for this provider or agent, or "
        "limits.run_timeout_s (the whole run), in eval_config.yaml, or check its load."
    )


class ProtocolError(ProviderError):
    """The endpoint answered, but not in the wire format expected (not JSON, missing fields)."""

    hint = (
        "Check that the URL points at the right kind of endpoint (OpenAI Chat Completions, "
        "Anthropic Messages, or the agent protocol of docs/agent-protocol.md)."
    )


class ResponseTooLarge(ProviderError):
    """The reply passed `limits.response_max_bytes` (after decompression). Not retried: the
    same request gets the same reply."""

    hint = (
        "Raise limits.response_max_bytes in eval_config.yaml if replies this large are "
        "expected, or make the endpoint answer less."
    )


class AuthenticationFailed(ProviderError):
    """HTTP 401/403: the credentials were refused. Not retried: another try cannot help."""

    hint = (
        "Check the API key or auth header in eval_config.yaml and that the environment variable "
        "it reads holds a valid, current credential."
    )


class RequestRejected(ProviderError):
    """Another 4xx: the endpoint refused this request (unknown model, bad parameter). Not retried."""

    hint = "Fix the request the message describes (often the model id or a parameter); it is not retried."


class ReplyTruncated(AgentError):
    """The model hit its `max_tokens` limit: the reply, or a tool call's arguments, was cut.

    A cut reply is not an answer (a figure may be missing, a query half written), so the run,
    judge or extraction call ends as an `error` instead of being graded. Not retried: the same
    request is cut again.

    Attributes:
        model_id: the model that was cut, e.g. ``openai:gpt-4.1``.
        max_tokens: the limit that was sent, None when unknown (a replayed recording).
        completion: the cut completion, so a recording can keep it.
    """

    def __init__(self, model_id: str, completion: Completion, *, max_tokens: int | None) -> None:
        self.model_id = model_id
        self.max_tokens = max_tokens
        self.completion = completion
        names = sorted({call.name for call in completion.tool_calls})
        what = (
            f"the arguments of its {', '.join(names)} call were cut"
            if names
            else "its reply was cut"
        )
        limit = f"max_tokens ({max_tokens:,})" if max_tokens is not None else "max_tokens"
        super().__init__(
            f"{model_id}: the model reached {limit} and {what} (stop reason "
            f"{completion.stop_reason!r}); a cut reply is not an answer. Raise max_tokens for "
            "this model (llm.providers[].models[].max_tokens) or its provider "
            "(llm.providers[].max_tokens) in eval_config.yaml."
        )


def require_not_cut(model_id: str, completion: Completion, *, max_tokens: int | None) -> Completion:
    """`completion`, unless `max_tokens` cut it.

    Raises:
        ReplyTruncated: the provider said the token limit stopped the completion.
    """
    if completion.cut:
        raise ReplyTruncated(model_id, completion, max_tokens=max_tokens)
    return completion


class UnknownModel(ValueError):
    """A model id names no configured provider or agent: a configuration mistake, found before any run."""

    def __init__(
        self,
        model: str,
        reason: str,
        available: Sequence[str] | None,
        *,
        listed_as: str = "configured",
    ) -> None:
        # `available`: what the id could have named instead (`listed_as` says what they are);
        # None when no list would help (a malformed id).
        listed = ""
        if available is not None:
            shown = ", ".join(available) if available else "(none)"
            listed = f"; {listed_as}: {shown}"
        self.detail = f"{model!r}: {reason}{listed}"  # the line under a file and field
        super().__init__(f"model {self.detail}")
        self.model = model
        self.reason = reason
        self.available = tuple(available or ())


def redact_url(url: str) -> str:
    """The URL with user info removed and every query value replaced, so it can be shown.

    Some providers take keys as query parameters (`?key=...`, `?api-key=...`), so no query
    value is ever shown; the parameter names stay, since they help to debug.
    """
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<unparseable url>"
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    query = urlencode(
        [(key, REDACTED) for key, _ in parse_qsl(parts.query, keep_blank_values=True)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret, and every piece of 8+ characters of one, replaced by a marker.

    Endpoints sometimes echo the credential they refused, so anything an endpoint says is
    scrubbed before it goes into an error message, and before it is cut to length (a cut
    secret is still a secret). `secrets` are this request's credential header values; the
    secrets registered for the process (`register_secret`) are always included.
    """
    wanted = [secret for secret in secrets if secret]
    for secret in sorted(wanted, key=len, reverse=True):
        if 4 <= len(secret) < MIN_PIECE:  # too short for pieces: blank the whole value only
            text = text.replace(secret, REDACTED)
    return redact(Redactor(wanted).redact(text))  # this request's own first: whole values
