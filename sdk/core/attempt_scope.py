"""The governed attempt in progress, as a context variable any SDK module may read.

The governor's loop sets it around each attempt (the fast first try or a task run's
attempt); :func:`retrylens.sdk.current_run` reads it, and so does the provider hook
(:mod:`~retrylens.sdk.integrations.providers.provider_hook`): a provider request made while it is set belongs to a governed
attempt, so the governor, not the provider client, decides whether it is retried.
An adapter that records model calls as attempts of its own while its framework makes the
call (pydantic-ai's ``run_governed``, the LangChain callback handler, the tenacity hooks)
sets :data:`recorded` instead: the retries the provider client would make are decided by
the governor, each an attempt of the adapter's task (:mod:`~retrylens.sdk.integrations.providers.client_retries`), and
:func:`retrylens.sdk.observe` leaves the call to the adapter, so it is not counted twice.
Outside governed calls, :data:`operation` is the observed provider call in progress
(:func:`retrylens.sdk.observe`): the provider hook reports each request to it.
It lives here, apart from the governor, so that reading it imports nothing else.
"""

from __future__ import annotations

import contextvars
from typing import Any

#: the TaskRun or FirstTry of the governed attempt in progress, else None
current: contextvars.ContextVar[Any] = contextvars.ContextVar("retrylens_run", default=None)
#: truthy while an adapter records the model calls made in this context (observe() skips
#: them): ``True``, or a :class:`~retrylens.sdk.integrations.providers.client_retries.ClientRetries` through which the
#: governor decides the provider client's retries, each an attempt of the adapter's task
recorded: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "retrylens_adapter_records", default=False
)
#: the observed provider call (an operation of :mod:`~retrylens.sdk.integrations.providers.observing`) in progress, else None
operation: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "retrylens_provider_operation", default=None
)
