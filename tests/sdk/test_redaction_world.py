"""The world's text never leaves the agent: phone numbers in international form, IBANs, AWS
secret access keys, PEM private keys, names typed in lower case after a title and names with
an accented initial, on every road (events, features, hand-off packages and channels).

Asserted on the emitted bytes: the spool segment files an agent's emitter writes, and the
FileChannel's hand-off file, in every spelling a leak can take there (as typed, in JSON's
``\\uXXXX`` escapes, as a feature word). A corpus of ordinary error messages comes out
unchanged (the false-positive rate is 0 on it).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from error_corpus import ORDINARY_ERRORS

from retrylens.errors import HandedOff
from retrylens.sdk import FileChannel, Governor, HandoffPackage
from retrylens.sdk.text.features import extract_input_features
from retrylens.sdk.text.personal import redact_names
from retrylens.sdk.text.sanitizer import redact
from retrylens.sdk.transport.emitter import Emitter
from retrylens.sdk.transport.spool import Spool

START = datetime(2024, 5, 1, tzinfo=UTC)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example key
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
#: what a leak looks like in the bytes, and the text that carries it
WORLD = {
    "uk phone": ("call back on +44 20 7946 0958 today", ["7946", "0958"]),
    "us phone": ("call back on +1 (415) 555-0132 today", ["555-0132", "5550132"]),
    "french phone": ("appeler le +33 1 23 45 67 89 demain", ["45 67 89"]),
    "indian phone": ("whatsapp +91 98765 43210 please", ["98765", "43210"]),
    "phone unbroken": ("sms to +442079460958 failed", ["2079460958"]),
    "iban grouped": ("refund to GB82 WEST 1234 5698 7654 32 bounced", ["5698 7654", "WEST 1234"]),
    "iban unbroken": ("refund to DE89370400440532013000 bounced", ["370400440532013000"]),
    "aws secret key": (f"aws_secret_access_key={AWS_SECRET} rejected", ["wJalrXUtnFEMI", "EXAMPLEKEY"]),
    "aws secret key alone": (f"signing with {AWS_SECRET} failed", ["wJalrXUtnFEMI", "bPxRfiCY"]),
    "pem private key": (f"loaded key {PEM} then failed", ["MIIEowIBAAKCAQEA", "VTLw7onLRnrq0"]),
    "lower-case title": ("refund for mr. o'neill is late", ["neill"]),
    "accented initial": ("letter for Ó Briain bounced", ["Briain", "Ó", "\\u00d3"]),
    "initial in a full name": ("refund for Seán Ó Briain is late", ["Briain", "Se\\u00e1n", "Seán"]),
}


def _fails_once_with(message: str):  # noqa: ANN202
    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise ConnectionError(message)
        return "ok"

    return work


def _spool_bytes(tmp_path: Path, message: str, goal: str) -> bytes:
    """Every byte the agent's emitter wrote to its spool for one task that failed once."""
    folder = tmp_path / "spool"
    emitter = Emitter(sink=None, spool=Spool(folder))
    gov = Governor.with_virtual_time(start=START, rng=random.Random(7), emit=emitter.emit)
    assert gov.call(_fails_once_with(message), goal=goal, agent="support") == "ok"
    emitter.close()
    blob = b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    assert b"attempt_failed" in blob, "nothing was spooled: the test would prove nothing"
    return blob


def _leaked(blob: bytes, words: list[str]) -> list[str]:
    lowered = blob.lower()
    return [w for w in words if w.encode().lower() in lowered]


@pytest.mark.parametrize("case", WORLD, ids=list(WORLD))
def test_the_worlds_personal_data_and_secrets_never_reach_the_spool(
    case: str, tmp_path: Path
) -> None:
    """In the error message and in the goal (the context snapshot and the input features)."""
    text, words = WORLD[case]
    blob = _spool_bytes(tmp_path, f"gateway said: {text}", goal=f"please handle: {text}")
    assert _leaked(blob, words) == []


@pytest.mark.parametrize(
    ("goal", "feature_words"),
    [
        ("refund for mr. o'neill is late", ["kw:neill", "kw:o'neill"]),
        (f"rotate the key {AWS_SECRET} today", ["kw:wjalrxutnfemi", "kw:bpxrficyexamplekey"]),
        ("call +44 20 7946 0958 about the refund", ["ref:"]),
    ],
)
def test_no_feature_is_made_of_a_name_a_key_or_a_phone_number(
    goal: str, feature_words: list[str]
) -> None:
    features = extract_input_features(goal)
    assert any(k.startswith("kw:") for k in features), "no keyword at all: proves nothing"
    assert [k for k in features if any(k.startswith(w) for w in feature_words)] == []


def _hand_off_to_file(target: Path, package_text: str) -> str:
    def fails() -> str:
        raise RuntimeError(f"payout failed: {package_text}")

    gov = Governor.with_virtual_time(
        start=START, rng=random.Random(7), handoff=FileChannel(target)
    )
    with pytest.raises(HandedOff):
        gov.call(fails, goal=f"pay out: {package_text}", agent="support")
    return target.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", WORLD, ids=list(WORLD))
def test_the_worlds_personal_data_and_secrets_never_reach_the_hand_off_file(
    case: str, tmp_path: Path
) -> None:
    text, words = WORLD[case]
    written = _hand_off_to_file(tmp_path / "handoffs.jsonl", text)
    assert json.loads(written)["inputs"].startswith("pay out:")
    assert _leaked(written.encode(), words) == []


NON_LATIN = {
    "greek": "Γιώργος Παπαδόπουλος",
    "cyrillic": "Анна Иванова",
    "irish": "Seán Ó Briain",
}


@pytest.mark.parametrize("script", NON_LATIN, ids=list(NON_LATIN))
def test_a_non_latin_name_in_a_packages_outputs_and_errors_never_reaches_the_file(
    script: str, tmp_path: Path
) -> None:
    """``to_dict`` cleans each string before serialising: ``json.dumps`` would have written
    the name as ``\\uXXXX`` escapes, which the name finder cannot see."""
    name = NON_LATIN[script]
    package = HandoffPackage(
        project="p", agent="a", task_id="t", reason="stopped", inputs="refund",
        outputs={"customer": name, "notes": [f"spoke with {name}"]},
        errors=[{"message": f"card declined for {name}", "attempt": 2}],
        error={"message": f"card declined for {name}"},
    )
    target = tmp_path / "handoffs.jsonl"
    FileChannel(target).send(package)
    written = target.read_text(encoding="utf-8")
    escaped = json.dumps(name)[1:-1]
    for part in name.split() + escaped.split():
        assert part not in written, f"{part!r} leaked"
    assert json.loads(written)["errors"][0]["attempt"] == 2  # the structure is kept


def test_the_raw_package_still_holds_the_name_so_the_test_above_proves_something() -> None:
    name = NON_LATIN["greek"]
    package = HandoffPackage(
        project="p", agent="a", task_id="t", reason="r", inputs="i", outputs={"customer": name}
    )
    assert package.to_dict(raw=True)["outputs"]["customer"] == name
    assert package.to_dict()["outputs"]["customer"] == "[NAME]"


@pytest.mark.parametrize("text", ORDINARY_ERRORS)
def test_an_ordinary_error_message_is_not_redacted(text: str) -> None:
    """Ids, timestamps, hex request ids, URLs and versions are none of the world's secrets."""
    assert redact_names(redact(text)) == text


def test_the_false_positive_rate_on_the_ordinary_corpus_is_zero() -> None:
    changed = [t for t in ORDINARY_ERRORS if redact_names(redact(t)) != t]
    assert len(ORDINARY_ERRORS) >= 50 and changed == []
