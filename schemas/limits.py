"""Size bounds of a retry event.

An agent that logs a whole conversation into every event turns observability into a
storage bill and a privacy incident; these bounds are part of the schema contract.
"""

from __future__ import annotations

#: Serialized event size limit (UTF-8 JSON bytes), enforced by the SDK and the consumer.
MAX_EVENT_BYTES = 64 * 1024
MAX_ID_CHARS = 128
MAX_NAME_CHARS = 128
MAX_ERROR_MESSAGE_CHARS = 2048
MAX_REASON_CHARS = 512
MAX_INPUT_FEATURES = 64
MAX_FEATURE_KEY_CHARS = 64
MAX_FEATURE_VALUE_CHARS = 256
MAX_MESSAGE_DIGESTS = 256
MAX_LAST_MESSAGES = 5
MAX_MESSAGE_CHARS = 2000
MAX_SIDE_EFFECTS = 32
MAX_ATTEMPT = 10_000
#: Counters (tokens, latency, message counts) are stored as UInt32.
MAX_COUNT = 2**32 - 1
#: Cost of one event, USD. The rollups keep costs as nano-dollars in an Int64 (at most
#: ~9.2e9 USD a row): a larger cost made ClickHouse refuse the whole insert.
MAX_COST_USD = 1_000_000.0
#: Integer feature values are stored as Int64.
MIN_FEATURE_INT = -(2**63)
MAX_FEATURE_INT = 2**63 - 1
