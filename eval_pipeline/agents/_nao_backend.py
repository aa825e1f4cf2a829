"""nao's own agent under test (`nao:<provider>:<model_id>`): each run sent to a running nao backend, as `nao test` sends it.

`nao test` (nao-core 0.3.x) signs in with an email and password (`POST /api/auth/sign-in/email`,
a better-auth session cookie back), then posts each test to `POST /api/test/run` with the
model, the prompt and the reference SQL; the backend runs nao's agent loop, then its own
verification (a DuckDB query over the agent's query results, compared by the client). Here the
reply becomes an `AgentRun` like any other: the `execute_sql` calls' SQL and rows are the run's
queries, so our data check grades them; nao's verification and the verdict nao's comparison
gives it are kept beside ours in `AgentRun.answerer_details`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.cookiejar
import os
from collections.abc import Mapping
from typing import Any

import httpx

from eval_pipeline.agents._errors import (
    AgentError,
    AuthenticationFailed,
    ProtocolError,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    UnknownModel,
)
from eval_pipeline.agents._nao_reply import read_reply
from eval_pipeline.agents._retry import DEFAULT_RETRY_POLICY, RetryPolicy, send_with_retry
from eval_pipeline.agents._types import AgentRun
from eval_pipeline.agents._wire import BodyReader
from eval_pipeline.suite import Case, MissingSecret, ModelCosts, SuiteConfig, Templated, Tolerance

__all__ = [
    "DEFAULT_BACKEND_URL",
    "NAO_PREFIX",
    "PASSWORD_VARIABLE",
    "USERNAME_VARIABLE",
    "NaoBackendAgent",
    "NaoSession",
    "nao_backend_url",
    "nao_model",
]

#: The prefix of a model id naming nao's agent: `nao:openai:gpt-4.1`, `nao:openaiCompatible/vllm:qwen3`.
NAO_PREFIX = "nao"
#: Where `nao test` sends its runs when `BACKEND_URL` is not set (`nao chat`'s default port).
DEFAULT_BACKEND_URL = "http://localhost:5005"
#: The environment variables `nao test` reads the account from (its `-u` / `--password`).
USERNAME_VARIABLE, PASSWORD_VARIABLE = "NAO_USERNAME", "NAO_PASSWORD"
SIGN_IN_PATH = "/api/auth/sign-in/email"
RUN_PATH = "/api/test/run"

_START_HINT = (
    "Start nao's backend (`nao chat` in the nao project), or point nao_backend.url in "
    "eval_config.yaml (or BACKEND_URL) at the one running; finished runs are kept."
)
_HINTS: dict[type[ProviderError], str] = {
    ProviderUnavailable: _START_HINT,
    ProviderTimeout: "Raise nao_backend.timeout_s in eval_config.yaml, or check the backend's load.",
    ProtocolError: (
        "Check that nao_backend.url (or BACKEND_URL) is nao's chat server (nao-core 0.3.x), "
        "not another service."
    ),
    AuthenticationFailed: (
        f"Check {USERNAME_VARIABLE} / {PASSWORD_VARIABLE} (or -u / --password): the account "
        "must exist on this backend (sign up in its web page once)."
    ),
}
_RUN_FAILED_HINT = (
    "nao's backend could not finish this run: its log says why (often its LLM provider); "
    "rerun once it is fixed, finished runs are kept."
)


def nao_model(model_id: str) -> tuple[str, str] | None:
    """`nao:<provider>:<model_id>` → nao's (provider, model id); None for another kind of id.

    The provider is nao's spelling (`openai`, `anthropic`, `openaiCompatible/vllm`), sent to
    the backend as it is, as `nao test -m <provider>:<model_id>` sends it.

    Raises:
        UnknownModel: a `nao:` id without a provider or a model after it.
    """
    prefix, colon, rest = model_id.partition(":")
    if prefix != NAO_PREFIX or not colon:
        return None
    provider, colon, model = rest.partition(":")
    if not colon or not provider or not model:
        raise UnknownModel(
            model_id,
            "expected `nao:<provider>:<model_id>` in nao's spelling, e.g. nao:openai:gpt-4.1 "
            "or nao:openaiCompatible/vllm:qwen3",
            None,
        )
    return provider, model


def nao_backend_url(config: SuiteConfig, environ: Mapping[str, str] | None = None) -> str:
    """The backend's URL: `nao_backend.url`, else `BACKEND_URL`, else nao's default."""
    env = os.environ if environ is None else environ
    url = config.nao_backend.url or env.get("BACKEND_URL") or DEFAULT_BACKEND_URL
    return url.rstrip("/")


def _renamed(error: ProviderError, *, endpoint: str, hint: str | None = None) -> ProviderError:
    """`error` for `endpoint`, with what to do about it on nao's backend."""
    return type(error)(
        error.problem,
        endpoint=endpoint,
        url=error.url,
        method=error.method,
        status_code=error.status_code,
        attempts=error.attempts,
        detail=error.detail,
        hint=hint or _HINTS.get(type(error)) or error.hint,
    )


class NaoSession:
    """One signed-in session on a nao backend, shared by the runs of every model sent to it.

    The credentials are read from the environment (`NAO_USERNAME`, `NAO_PASSWORD`, which the
    command line's `-u` / `--password` set) when the first run signs in, registered as secrets
    (so no text this process stores or prints holds them) and kept nowhere else; the session
    cookie is sent as a header and never kept in the client's jar. A sign-in that fails is
    not tried again by later runs, so a wrong password costs one request, not one per run.

    Args:
        client: the pooled client of this backend.
        url: the backend's URL.
        policy: the retry policy of the sign-in (connection failures, 5xx).
        environ: where the credentials are read from; None means `os.environ`.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        *,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self._client = client
        # Cookies would otherwise pile up in the client and ride along after a new sign-in.
        client.cookies.jar.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self._policy = policy
        self._environ = dict(environ) if environ is not None else None
        self._lock = asyncio.Lock()
        self._cookie: str | None = None
        self._generation = 0
        self._failure: ProviderError | None = None

    def __repr__(self) -> str:
        return f"NaoSession(url={self.url!r}, signed_in={self._cookie is not None})"

    async def cookie(self, *, endpoint: str) -> tuple[str, int]:
        """The session's `Cookie` header and its generation; signs in on first use."""
        async with self._lock:
            if self._cookie is None:
                await self._sign_in(endpoint)
            assert self._cookie is not None
            return self._cookie, self._generation

    async def renew(self, generation: int, *, endpoint: str) -> None:
        """Sign in again after a 401 on a session of `generation` (once per generation,
        whichever run saw it first)."""
        async with self._lock:
            if generation == self._generation:
                self._cookie = None
                await self._sign_in(endpoint)

    async def _sign_in(self, endpoint: str) -> None:
        if self._failure is not None:
            raise _renamed(self._failure, endpoint=endpoint, hint=self._failure.hint)
        try:
            email, password = self._credentials(endpoint)
        except AuthenticationFailed as error:
            self._failure = error
            raise
        try:
            self._cookie = await self._request_cookie(endpoint, email, password)
        except ProviderError as error:
            self._failure = _renamed(error, endpoint=endpoint)
            raise self._failure from None
        self._generation += 1

    def _credentials(self, endpoint: str) -> tuple[str, str]:
        try:
            return tuple(  # type: ignore[return-value]
                Templated("{{ env('" + name + "') }}", "nao's backend").resolve(self._environ)
                for name in (USERNAME_VARIABLE, PASSWORD_VARIABLE)
            )
        except MissingSecret:
            raise AuthenticationFailed(
                "no account to sign in with",
                endpoint=endpoint,
                url=self.url + SIGN_IN_PATH,
                detail=f"{USERNAME_VARIABLE} or {PASSWORD_VARIABLE} is not set",
                hint=f"Export {USERNAME_VARIABLE} and {PASSWORD_VARIABLE}, or pass -u and --password.",
            ) from None

    async def _request_cookie(self, endpoint: str, email: str, password: str) -> str:
        response = await send_with_retry(
            self._client,
            "POST",
            self.url + SIGN_IN_PATH,
            endpoint=endpoint,
            json={"email": email, "password": password},
            policy=self._policy,
        )
        # Sent as the `Cookie` header, which is never logged and is scrubbed from messages.
        cookies = [(cookie.name, cookie.value) for cookie in response.cookies.jar if cookie.value]
        if not cookies:
            raise ProtocolError(
                "the sign-in succeeded but set no session cookie",
                endpoint=endpoint,
                url=self.url + SIGN_IN_PATH,
                status_code=response.status_code,
            )
        return "; ".join(f"{name}={value}" for name, value in cookies)


class NaoBackendAgent:
    """nao's agent behind a nao backend, for one model: one `POST /api/test/run` per run.

    Args:
        model_id: `nao:<provider>:<model_id>`.
        session: the signed-in session of the backend (shared by its models).
        client: the backend's pooled client (its deadline is `nao_backend.timeout_s`).
        costs: the model's prices, sent as nao sends those of its config (None: the
            backend's own).
        tolerance: the suite's number comparison, for nao's verdict of its verification.
        policy: the retry policy; a run itself is sent once, as `nao test` sends it (a
            5xx there is nao's agent failing, which a resend would pay for again).
    """

    def __init__(
        self,
        model_id: str,
        session: NaoSession,
        client: httpx.AsyncClient,
        *,
        costs: ModelCosts | None = None,
        tolerance: Tolerance | None = None,
        policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        parsed = nao_model(model_id)
        if parsed is None:
            raise UnknownModel(model_id, "not nao's agent (`nao:<provider>:<model_id>`)", None)
        self.model_id = model_id
        self.provider, self.nao_model_id = parsed
        self.session = session
        self._client = client
        self._costs = costs
        self._tolerance = tolerance
        self._policy = dataclasses.replace(policy, max_attempts=1)

    def __repr__(self) -> str:
        return f"NaoBackendAgent({self.model_id!r}, url={self.session.url!r})"

    def request(self, case: Case) -> dict[str, Any]:
        """The body `nao test` posts for `case`."""
        body: dict[str, Any] = {
            "model": {"provider": self.provider, "modelId": self.nao_model_id},
            "prompt": case.prompt,
        }
        if case.sql:
            body["sql"] = case.sql
        if case.database:
            body["databaseId"] = case.database
        costs = self._costs
        if costs is not None:
            priced = {
                "inputNoCache": costs.input_no_cache,
                "inputCacheRead": costs.input_cache_read,
                "output": costs.output,
            }
            if serialized := {k: v for k, v in priced.items() if v is not None}:
                body["meta"] = {"costs": serialized}
        return body

    async def run(self, case: Case, *, attempt: int, run: AgentRun) -> None:
        """Send `case` to nao's backend and fill `run` with its reply; see `Agent.run`.

        Raises:
            ProviderError: the backend is down, refused the account (after signing in
                again once), failed the run (5xx), timed out, or answered off its API.
            AgentError: the test is a conversation, which nao's test API cannot take.
        """
        if case.is_conversation:
            raise AgentError(
                f"{self.model_id}: nao's {RUN_PATH} takes one prompt, and test "
                f"{case.name!r} is a conversation; evaluate it with another model"
            )
        body = self.request(case)
        response = await self._send(body)
        try:
            reader = BodyReader(response, endpoint=self.model_id)
            reply = read_reply(reader, case, self._tolerance)
        except ProtocolError as error:
            raise _renamed(error, endpoint=self.model_id) from None
        run.final_text = reply["text"]
        run.messages = [
            {"role": "user", "content": case.prompt},
            {"role": "assistant", "content": reply["text"]},
        ]
        run.tool_calls, run.queries = reply["tool_calls"], reply["queries"]
        run.usage, run.cost_usd = reply["usage"], reply["cost_usd"]
        run.turns = 1
        run.answerer_details = {"nao": reply["details"]}

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        url = self.session.url + RUN_PATH
        for renewed in (False, True):
            cookie, generation = await self.session.cookie(endpoint=self.model_id)
            try:
                return await send_with_retry(
                    self._client,
                    "POST",
                    url,
                    endpoint=self.model_id,
                    json=body,
                    headers={"Cookie": cookie},
                    policy=self._policy,
                )
            except AuthenticationFailed as error:
                if renewed or error.status_code != 401:
                    raise _renamed(error, endpoint=self.model_id) from None
                # The session expired or the backend restarted: sign in again, once.
                await self.session.renew(generation, endpoint=self.model_id)
            except ProviderError as error:
                run_failed = isinstance(error, ProviderUnavailable) and error.status_code
                hint = _RUN_FAILED_HINT if run_failed else None
                raise _renamed(error, endpoint=self.model_id, hint=hint) from None
        raise AssertionError("unreachable")  # pragma: no cover
