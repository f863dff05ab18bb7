"""Redaction measured on text whose answer is known: what it removes, what it leaves alone.

    python bench/redaction_corpus.py [--repeat N] [--smoke] [--json]

* ``false_positive_rate``: the share of the ordinary error corpus
  (``tests/sdk/error_corpus.py``: HTTP, provider, Python, cloud and database errors with
  ids, timestamps, hex request ids, URLs and versions) that redaction (secrets and names,
  as an event leaves the agent) changes at all; ``changed`` lists them.
* ``leak_rate``: the share of planted items (phone numbers in international form, IBANs,
  AWS keys, PEM blocks, tokens of every prefix, lower-case titles, accented initials, each
  in a sentence) whose secret part survives.
* ``us_per_text``: CPU per text of :func:`retrylens.sdk.text.redaction.redact` uncached (the
  server's case for a new message) with its pre-filter and with every pattern run, on the
  ordinary corpus (most of which the pre-filter passes at once) and on the planted one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "sdk"))

from error_corpus import ORDINARY_ERRORS  # noqa: E402

from retrylens.sdk.text import redaction  # noqa: E402
from retrylens.sdk.text.personal import redact_names  # noqa: E402

#: (text, the part that must not survive)
PLANTED = [
    ("call back on +44 20 7946 0958 today", "7946 0958"),
    ("call back on +1 (415) 555-0132 today", "555-0132"),
    ("appeler le +33 1 23 45 67 89 demain", "45 67 89"),
    ("whatsapp +91 98765 43210 please", "98765 43210"),
    ("sms to +442079460958 failed", "2079460958"),
    ("refund to GB82 WEST 1234 5698 7654 32 bounced", "5698 7654"),
    ("refund to DE89370400440532013000 bounced", "370400440532013000"),
    ("iban FR1420041010050500013M02606 closed", "20041010050500013M02606"),
    ("signing with wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY failed", "bPxRfiCYEXAMPLEKEY"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("key -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEA"),
    ("push refused for github_pat_11ABCDE2F0aBcDeFgHiJkLmN_oPqRsTuVwXyZ0123456789", "11ABCDE2F0aBcDeFg"),
    ("push refused for ghp_7Hq2Wm9Xk4Lp1Zr8Tn5Vb3Yc6Gd0Fs2Aj4Ke", "7Hq2Wm9Xk4Lp1Zr8Tn5Vb3"),
    ("s3 refused AKIAZ7QW3ER5TY1UI9OP and ASIAZ7QW3ER5TY1UI9OQ", "Z7QW3ER5TY1UI9O"),
    ("401 for Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZWkifQ.q8Zt3Kp", "eyJzdWIiOiJtZWkifQ"),
    ("charge declined for card 4111 1111 1111 1111", "4111 1111 1111 1111"),
    ("login failed with password=hunter2xyz!", "hunter2xyz"),
    ("refund for mr. o'neill is late", "neill"),
    ("letter for Ó Briain bounced", "Briain"),
    ("refund for Seán Ó Briain is late", "Seán"),
]


def _clean(text: str) -> str:
    return redact_names(redaction._redact(text, None))


def _all_patterns(text: str) -> str:
    for pattern, replacement in redaction.REDACTIONS:
        text = pattern.sub(replacement, text)
    for pattern, check in redaction.CHECKED:
        text = pattern.sub(check, text)
    return text


def _us_per_text(fn, texts: list[str], repeat: int) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(repeat):
            for text in texts:
                fn(text)
        best = min(best, time.process_time() - started)
    return round(best / (repeat * len(texts)) * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=50, help="passes over each corpus per timing")
    parser.add_argument("--smoke", action="store_true", help="one pass (the suite's size)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    changed = [t for t in ORDINARY_ERRORS if _clean(t) != t]
    leaked = [t for t, secret in PLANTED if secret in _clean(t)]
    planted = [t for t, _ in PLANTED]
    results = {
        "ordinary_texts": len(ORDINARY_ERRORS),
        "false_positive_rate": round(len(changed) / len(ORDINARY_ERRORS), 4),
        "changed": changed,
        "planted_texts": len(PLANTED),
        "leak_rate": round(len(leaked) / len(PLANTED), 4),
        "leaked": leaked,
        "passed_by_pre_filter": sum(not redaction.may_hold_secrets(t) for t in ORDINARY_ERRORS),
        "us_per_text": {
            "ordinary_pre_filtered": _us_per_text(lambda t: redaction._redact(t, None), ORDINARY_ERRORS, repeat),
            "ordinary_every_pattern": _us_per_text(_all_patterns, ORDINARY_ERRORS, repeat),
            "planted_pre_filtered": _us_per_text(lambda t: redaction._redact(t, None), planted, repeat),
            "planted_every_pattern": _us_per_text(_all_patterns, planted, repeat),
        },
    }
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:>22}: {value}")


if __name__ == "__main__":
    main()
