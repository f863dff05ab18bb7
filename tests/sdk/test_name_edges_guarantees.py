"""Where a name starts and where it stops, read on the emitted event's message and context.

tests/sdk/test_sdk_redaction.py holds each shape of a name (unicode, "Last, First",
capitals, titles, particles) to "never reaches events"; these hold the edges of each
shape: what is a name's last word, what is no name at all, and that the text beside a
name is kept as the agent wrote it. A governor built with default settings emits the
failed attempt; the test reads its flushed bytes back.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from retrylens.schemas import EventKind
from retrylens.sdk import Governor
from retrylens.testing import capture_events

START = datetime(2024, 5, 1, tzinfo=UTC)


def _emitted(message: str, goal: str = "look the order up") -> tuple[str, list[str]]:
    """The failed attempt's message and context emitted for a call whose first try raises
    ``message``: the context holds the goal."""

    def work(attempt) -> str:  # noqa: ANN001
        if attempt.number == 1:
            raise ConnectionError(message)
        return "ok"

    with capture_events() as captured:
        gov = Governor.with_virtual_time(start=START, rng=random.Random(7), emit=captured.emit)
        assert gov.call(work, goal=goal, agent="a") == "ok"
        (failed,) = captured.of_kind(EventKind.ATTEMPT_FAILED)
    assert failed.error_detail is not None and failed.context_snapshot is not None
    context = [m.content for m in failed.context_snapshot.last_messages]
    return failed.error_detail.message.removeprefix("ConnectionError: "), context


#: message -> what the emitted event says
EDGES = {
    # a surname in capitals has two letters or more; one capital letter is no surname
    "two-letter surname in capitals": ("refund failed for Mei LI", "refund failed for [NAME]"),
    "one capital letter is no surname": ("fell back to Plan B", "fell back to Plan B"),
    "words in capitals alone are no name": ("sync to SAP ERP failed", "sync to SAP ERP failed"),
    # a word with a capital inside is a product's, not a name's
    "a product name in camel case": (
        "GitHub Actions runner lost",
        "GitHub Actions runner lost",
    ),
    "a capital inside a word, whatever its script": (
        "GİtHub Actions runner lost",
        "GİtHub Actions runner lost",
    ),
    # a title's name runs over its names and single spaces only; the next name is found after
    "a title's name stops at a word that is no name": (
        "refund failed: Mr. Chen was not found",
        "refund failed: [NAME] was not found",
    ),
    "a title and two names": (
        "refund failed: Dr Mei Chen is away",
        "refund failed: [NAME] is away",
    ),
    "a title's name stops at punctuation": (
        "ask Mr. Chen; Stripe has the receipt",
        "ask [NAME]; Stripe has the receipt",
    ),
    "a name right after a title's name": (
        "refunds for Mr. Chen, José Álvarez",
        "refunds for [NAME], [NAME]",
    ),
    # "Last, First" needs exactly ", ": other punctuation between two words makes no name
    "a colon between capitalised words": (
        "charge failed at Stripe: Visa declined",
        "charge failed at Stripe: Visa declined",
    ),
    "a full stop between capitalised words": (
        "moved to Zendesk. Stripe declined",
        "moved to Zendesk. Stripe declined",
    ),
    "Last, First after a colon": ("refund failed: Chen, Mei", "refund failed: [NAME]"),
    "Last, First after a salutation": ("refund failed: Dear Chen, Mei", "refund failed: [NAME]"),
    "Last, First after a title": ("refund failed for Dr Chen, Mei", "refund failed for [NAME]"),
    "a name, then a list": (
        "refunds for Mei Chen, Stripe, Adyen",
        "refunds for [NAME], Stripe, Adyen",
    ),
    "Last, First with two given names": (
        "refund failed for Álvarez, José Luis",
        "refund failed for [NAME]",
    ),
    "Last, First, then another name": (
        "refunds for Chen, Mei Ling, Ana Silva",
        "refunds for [NAME], [NAME]",
    ),
    # and two capitalised words: not capitals, nor a word that is no name, on either side
    "a capitalised word, then capitals": (
        "charge failed at Stripe, SAP notified",
        "charge failed at Stripe, SAP notified",
    ),
    "capitals, then a capitalised word": (
        "sync failed at SAP, Stripe notified",
        "sync failed at SAP, Stripe notified",
    ),
    "a capitalised word, then a word that is no name": (
        "charge failed at Stripe, declined by the bank",
        "charge failed at Stripe, declined by the bank",
    ),
    "two names apart": ("refunds for Mei Chen, Ana Silva", "refunds for [NAME], [NAME]"),
    "a name right after a word that is none": (
        "ticket from Zendesk: Mei Chen called",
        "ticket from Zendesk: [NAME] called",
    ),
    "a list of capitalised words": (
        "payment tried Stripe, Adyen, Worldpay",
        "payment tried Stripe, Adyen, Worldpay",
    ),
    # particles belong to a name only with one space on each side and a name after them
    "two particles between names": ("call Ludwig Mies van der Rohe", "call [NAME]"),
    "a particle before a comma": (
        "no seat for José Álvarez de, Madrid",
        "no seat for [NAME] de, Madrid",
    ),
    "particles before a word that is no name": (
        "refund for Mei Chen de la tienda",
        "refund for [NAME] de la tienda",
    ),
    "a particle before a line break": (
        "no seat for José Álvarez de\nMadrid",
        "no seat for [NAME] de\nMadrid",
    ),
}


@pytest.mark.parametrize("case", EDGES, ids=list(EDGES))
def test_a_name_is_redacted_to_its_edges_and_the_text_beside_it_is_kept(case: str) -> None:
    message, expected = EDGES[case]
    assert _emitted(message)[0] == expected


#: goal -> what the emitted context says: a name opening the text is found like any other,
#: and a text without a word is kept
OPENING = {
    "a name": ("Mei Chen wants a refund", "[NAME] wants a refund"),
    "Last, First": ("Chen, Mei wants a refund", "[NAME] wants a refund"),
    "a list": ("Stripe, Adyen, Worldpay all declined", "Stripe, Adyen, Worldpay all declined"),
    "no word at all": ("12345 67890", "12345 67890"),
}


@pytest.mark.parametrize("case", OPENING, ids=list(OPENING))
def test_a_name_opening_the_goal_is_redacted_in_the_emitted_context(case: str) -> None:
    goal, expected = OPENING[case]
    assert _emitted("connection reset by peer", goal=goal)[1] == [expected]
