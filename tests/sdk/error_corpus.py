"""Ordinary error messages as agents meet them (HTTP, provider SDKs, Python, cloud, databases).

None of them holds a secret or a person's data, so redaction must give each back unchanged:
ids, timestamps, hex request ids, URLs, version numbers, ports, sizes and durations are
the shapes a careless pattern takes for a phone number, an IBAN, a key or a name.
``tests/sdk/test_redaction_world.py`` holds the SDK and the server to that, and
``bench/redaction_corpus.py`` prints the false-positive rate.
"""

from __future__ import annotations

ORDINARY_ERRORS: list[str] = [
    # HTTP and provider clients
    "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization "
    "org-Q8zT3kPq on tokens per min (TPM): Limit 30000, Used 29876, Requested 1204. Please "
    "try again in 2.408s.', 'type': 'tokens', 'param': None, 'code': 'rate_limit_exceeded'}}",
    "Error code: 500 - {'error': {'message': 'The server had an error while processing your "
    "request. Sorry about that! You can retry your request, or contact us through our help "
    "center if the error persists. (Please include the request ID "
    "req_7f3a9c2e41b84d0f9a6e5c1b2d3e4f50 in your message.)', 'type': 'server_error'}}",
    "Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error', 'message': "
    "'Overloaded'}, 'request_id': 'req_011CUx4kD8v2QmT9aB3cE5fG'}",
    "anthropic.APIStatusError: Error code: 413 - request_too_large: Request exceeds the "
    "maximum size of 32000000 bytes",
    "openai.APIConnectionError: Connection error. (request id: 4f1e2d3c-5b6a-4798-8a9b-0c1d2e3f4a5b)",
    "httpx.ReadTimeout: timed out after 600.0s (POST https://api.openai.com/v1/chat/completions)",
    "httpx.ConnectError: [Errno 111] Connection refused (http://127.0.0.1:8080/v1/messages)",
    "httpx.HTTPStatusError: Server error '502 Bad Gateway' for url "
    "'https://api.example.com/v2/orders/10293847/refunds?page=2&limit=50'",
    "HTTPSConnectionPool(host='api.anthropic.com', port=443): Max retries exceeded with url: "
    "/v1/messages (Caused by ReadTimeoutError(\"HTTPSConnectionPool(host='api.anthropic.com', "
    "port=443): Read timed out. (read timeout=600)\"))",
    "503 Service Unavailable: upstream connect error or disconnect/reset before headers. "
    "reset reason: connection termination",
    "404 Not Found: GET /api/v3/customers/cus_4f8a9b2c1d3e/invoices/in_1PqR2sT3uV4wX5yZ",
    "Google API error 400: Request contains an invalid argument. (model: gemini-1.5-pro-002, "
    "location: us-central1)",
    "ClientResponseError: 504, message='Gateway Timeout', url=URL('https://search.internal:9443/q')",
    "grpc._channel._InactiveRpcError: status = StatusCode.UNAVAILABLE, details = "
    "\"failed to connect to all addresses; last error: UNKNOWN: ipv4:10.12.4.7:50051: "
    "Failed to connect to remote host: Connection refused\"",
    "x-request-id: 9b2c7e41f3a84d6e8c0a1b2c3d4e5f60, retry-after: 20, x-ratelimit-remaining: 0",
    "received 429 at 2024-05-01T12:34:56.789+00:00; retry after Wed, 01 May 2024 12:35:16 GMT",
    "stripe.error.CardError: Your card was declined. Request req_Nc8dF3kLm2PqRs (ch_3PqR2sT3uV4wX5yZ1aBcDeFg)",
    # Python and libraries
    "Traceback (most recent call last): File \"/app/agent/tools.py\", line 214, in lookup "
    "KeyError: 'order_id'",
    "json.decoder.JSONDecodeError: Expecting ',' delimiter: line 1 column 4097 (char 4096)",
    "pydantic_core._pydantic_core.ValidationError: 2 validation errors for RefundRequest "
    "amount Input should be greater than 0 [type=greater_than, input_value=-12.5, "
    "input_type=float] For further information visit https://errors.pydantic.dev/2.12/v/greater_than",
    "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
    "RecursionError: maximum recursion depth exceeded while calling a Python object",
    "ModuleNotFoundError: No module named 'langchain_community.tools.tavily_search'",
    "asyncio.exceptions.TimeoutError after 30.0 s in task Task-1842 (coro=<fetch_page() running>)",
    "ImportError: cannot import name 'ChatOpenAI' from 'langchain_openai' (version 0.3.28+local.2)",
    "OSError: [Errno 28] No space left on device: '/var/lib/retrylens/spool/000000000042.seg'",
    "MemoryError: unable to allocate 2.15 GiB for an array with shape (17179869184,) and data type uint8",
    "AssertionError: expected 12 rows, got 11 (batch 7c1e9f0a, shard 3 of 16)",
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 1048: invalid continuation byte",
    # databases, queues, cloud
    "psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "
    "\"orders_pkey\" DETAIL: Key (id)=(884213377) already exists.",
    "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked",
    "redis.exceptions.ConnectionError: Error 111 connecting to 10.0.3.17:6379. Connection refused.",
    "clickhouse_connect.driver.exceptions.DatabaseError: Code: 241. DB::Exception: Memory "
    "limit (total) exceeded: would use 14.91 GiB (attempt to allocate chunk of 4219482 bytes), "
    "maximum: 14.40 GiB. (MEMORY_LIMIT_EXCEEDED) (version 24.8.4.13 (official build))",
    "KafkaTimeoutError: Failed to update metadata after 60.0 secs.",
    "botocore.exceptions.ClientError: An error occurred (ThrottlingException) when calling the "
    "InvokeModel operation (reached max retries: 4): Too many requests, please wait before "
    "trying again. RequestId: 6f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b",
    "botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the "
    "GetObject operation: Access Denied (bucket: prod-agent-artifacts, key: runs/2024/05/01/"
    "7e3f9a1c/output.json)",
    "S3 upload failed: arn:aws:s3:::prod-agent-artifacts/runs/2024-05-01/7e3f9a1c.tar.gz "
    "(ETag mismatch: expected 9e107d9d372bb6826bd81d3542a419d6, got e4d909c290d0fb1ca068ffaddf22cbd0)",
    "git clone failed at commit 3f786850e387550fdab836ed7e6dc881de23001b (exit status 128)",
    "docker: Error response from daemon: pull access denied for registry.internal:5000/agent, "
    "repository does not exist (sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824)",
    "Kubernetes pod agent-worker-7d9f8b6c5-x2k4p OOMKilled (exit code 137) at 2024-05-01 12:00:03 UTC",
    "certificate verify failed: unable to get local issuer certificate (_ssl.c:1006)",
    # numbers that look like something else
    "order totals 12345 67890 13579 24680 11111 22222 33333 44444",
    "invoice INV-2024-000123 amount 1234.56 EUR due 2024-06-30, PO 4500012345",
    "tracking number 1Z999AA10123456784 not found at carrier UPS",
    "batch of 10000 events took 1234567 us (+12.5% over the baseline of 1097393 us)",
    "latency p50=12ms p99=+340ms over SLO, window 2024-05-01T00:00:00Z/2024-05-02T00:00:00Z",
    "offset +3600 s from UTC, timezone +05:30, drift +0.004 s",
    "version 2.31.0+cu121 is not compatible with torch 2.3.1+cpu",
    "SKU AB12-CD34-EF56 out of stock in warehouse DE01; reorder point 250",
    "model ft:gpt-4o-mini-2024-07-18:acme::9qRsTuVw not found",
    "file checksum sha1=da39a3ee5e6b4b0d3255bfef95601890afd80709 differs from the manifest",
    "Deadline Exceeded after 30s: 14 of 20 steps done (step 15 of run 8842 timed out)",
    "phone 1234 5678 9012 3456 7890 ids",
    "The read operation timed out",
    "Retry-After: 2",
    "AWS Lambda function timed out after 30.00 seconds (RequestId: 8f14e45f-ceea-467f-a0e6-ab2c3d4e5f60)",
    "Context Window Exceeded: maximum context length is 128000 tokens, you requested 131072 tokens",
]
