"""Provider clients (openai, anthropic, any httpx client): their own retries seen and governed.

The hook on httpx's send path (:mod:`.provider_hook`), what it does with each request
(:mod:`.provider_send`, :mod:`.provider_calls`, :mod:`.plain_calls`), one physical request
typed as an attempt (:mod:`.http_attempts`), the client's resends (:mod:`.http_resends`,
:mod:`.client_retries`, :mod:`.resent_verdicts`) and ``retrylens.sdk.observe()``
(:mod:`.observing`).
"""
