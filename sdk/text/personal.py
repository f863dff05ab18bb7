"""People's names in free text, found without a language model.

What leaves the agent for the event store or a hand-off channel must not name the
customer. A named-entity model would find names best, but the well-kept ones
(presidio-analyzer over spaCy, scrubadub over textblob/nltk) weigh hundreds of megabytes
and take a second to load: far beyond what the SDK may cost an agent. So names are found
by their shape, in any script Python's ``str`` methods know the case of:

- two or more capitalised words in a row: ``Mei Chen``, ``José Álvarez``, ``Seán O'Brien``,
  with lower-case particles between them (``Ludwig van Beethoven``, ``María de la Cruz``);
- a surname in capitals beside a capitalised word: ``CHEN Mei``, ``Mei CHEN``;
- "Last, First": ``Chen, Mei``, ``Álvarez, José Luis``;
- a title and one capitalised word: ``Mr. Chen``, ``Dr Álvarez``; a title with its dot and
  one word in any case, as people type in chat: ``mr. o'neill``, ``dr. chen``;
- an initial before a name: ``Ó Briain``, ``J. R. Tolkien``, ``Seán Ó Briain``.

A word people write in error text (``Too Many Requests``, ``Internal Server Error``,
``AWS Lambda``) is never part of a name: :data:`COMMON_WORDS` lists the capitalised words
of ordinary errors, so an error message without a name comes out unchanged (a test holds
a corpus of them to that). One capitalised word alone is never taken for a name.
"""

from __future__ import annotations

import functools

from .lazy_pattern import LazyPattern

#: letters joined by apostrophes or hyphens: "O'Brien", "Jean-Luc", "Álvarez"
_WORD = LazyPattern(r"[^\W\d_](?:[^\W\d_]|['’\-](?=[^\W\d_]))*")
_TITLES = frozenset(
    "mr mrs ms mx miss dr prof sir madam dame lord lady mme mlle herr frau sr sra srta".split()
)
#: titles typed in lower case name someone only with their dot ("ms" is also milliseconds,
#: "miss" a cache's): ``mr. o'neill``
_LOWER_TITLES = frozenset("mr mrs mx dr prof mme mlle".split())
_PARTICLES = frozenset("van von der den de del della la le da di du dos das bin ibn al".split())
#: capitalised words of ordinary error text and common English: never part of a name
COMMON_WORDS = frozenset(
    """
    a i about above access accepted account action active add address after again agent
    all allowed already also an and another answer any api app application are argument
    as at attempt attribute auth authentication authorization available aws azure back
    bad balance base batch be bearer been before begin being below billing blocked body
    both broken buffer build busy but by cache call called cancel cancelled cannot card
    caused certificate change channel chat check client closed cloud code column
    completion config conflict connect connection content context could count create
    created credit customer data database date day dead deadline decode default delete
    denied dependency deployment detail details dict did disconnected dns do does domain
    done down during each empty encoding end endpoint engine entity error errors event
    exceeded exception expected expectation expired external failed failure false fatal
    field file for forbidden found from function gateway get gone got gpt gpu handler
    handshake has have header health hello help here high host hour http https id if in
    incomplete info input insufficient internal invalid invoice is it item items json
    key lambda large late later length limit line list load local locked log long lookup
    low main many max maximum may memory message method min minute missing model module
    more most name network new no node none not null object of off ok on one only open
    operation or order out output over overloaded page parse parser password path
    payload payment peer per permission please policy port post precondition process
    processing protocol provider proxy quota range rate read ready reason received
    record redirect refused region remote request requested requests required reset
    resource response result retry returned root route row run runtime same schema
    second secret see send server service session set should size some sql ssl start
    status step stream success sync system table task temporary the there this time
    timed timeout to token tokens too tool total true try type unauthorized unavailable
    unexpected unknown unprocessable unsupported update upstream uri url usage use user
    valid validation value version wait warning was we were when with worker world
    would write wrong you your
    openai anthropic google gemini claude azure bedrock vertex langchain langgraph
    kafka clickhouse postgres redis mongo mysql sqlite python linux windows docker
    cpu tcp udp tls xml html csv utc gmt sdk llm jwt oauth saml iam arn rpc grpc
    monday tuesday wednesday thursday friday saturday sunday january february march
    april june july august september october november december
    """.split()
)


def _capitalised(word: str) -> bool:
    """``Chen``, ``Álvarez``, ``O'Brien``, ``Jean-Luc``: each part starts upper, then lower."""
    parts = word.replace("’", "'").replace("-", "'").split("'")
    return all(p[:1].isupper() and p[1:] == p[1:].lower() for p in parts) and any(
        c.islower() for c in word
    )


def _capitals(word: str) -> bool:
    return len(word) >= 2 and word.isupper()


def _kind(word: str) -> str:
    """``T`` title, ``t`` title in lower case, ``C`` capitalised, ``U`` capitals, ``I`` an
    initial, ``p`` particle, ``l`` another lower-case word, ``-`` anything else."""
    low = word.lower()
    if low in _TITLES and word[:1].isupper():
        return "T"
    if low in _LOWER_TITLES and word.islower():
        return "t"
    if low in COMMON_WORDS:
        return "-"
    if _capitalised(word):
        return "C"
    if _capitals(word):
        return "U"
    if len(word) == 1 and word.isupper():
        return "I"
    if low in _PARTICLES:
        return "p"
    return "l" if word.islower() else "-"


def find_names(text: str) -> list[tuple[int, int]]:
    """The spans ``(start, end)`` of ``text`` that name a person (see the module's rules)."""
    words = [(m.start(), m.end(), _kind(m.group(0))) for m in _WORD.finditer(text)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        span, i = _name_at(text, words, i)
        if span is not None:
            spans.append(span)
    return spans


def _gap(text: str, words: list[tuple[int, int, str]], i: int) -> str:
    """What separates word ``i`` from word ``i+1`` (``""`` when there is none)."""
    if i + 1 >= len(words):
        return ""
    return text[words[i][1] : words[i + 1][0]]


def _name_at(
    text: str, words: list[tuple[int, int, str]], i: int
) -> tuple[tuple[int, int] | None, int]:
    """The name that starts at word ``i`` (or ``None``) and the word to look at next."""
    start, _, kind = words[i]
    gap = _gap(text, words, i)
    if kind in "Tt" and (gap == ". " or (kind == "T" and gap == " ")):
        following = words[i + 1][2]
        if following == "l":  # "mr. o'neill": one word, whatever its case
            return (start, words[i + 1][1]), i + 2
        if kind == "T" and following in "CUI":
            end = _given_name_after(text, words, _run_end(text, words, i + 1))
            return (start, words[end][1]), end + 1
    if kind not in "CUI":
        return None, i + 1
    if _gap(text, words, i) == ", " and kind == "C" and words[i + 1][2] == "C":
        after = _gap(text, words, i + 1)  # "Chen, Mei" but not a list "A, B, C"
        if not after.startswith(",") and (i == 0 or _gap(text, words, i - 1) != ", "):
            end = _run_end(text, words, i + 1)  # "Álvarez, José Luis"
            return (start, words[end][1]), end + 1
    end = _run_end(text, words, i)
    kinds = {words[k][2] for k in range(i, end + 1)}
    if end > i and "C" in kinds:
        end = _given_name_after(text, words, end)
        return (start, words[end][1]), end + 1
    return None, end + 1


def _given_name_after(text: str, words: list[tuple[int, int, str]], end: int) -> int:
    """``end``, or the given name after it when a name ending at ``end`` is a surname
    followed by ", " and one capitalised word that is no name on its own: a salutation
    before "Last, First" (``Dear Chen, Mei``) must not leave the given name behind. Two
    names in a row (``Mei Chen, Ana Silva``) and lists (``Chen, Adyen, Worldpay``) are
    left as they are."""
    if end + 1 >= len(words) or _gap(text, words, end) != ", ":
        return end
    if words[end][2] != "C" or words[end + 1][2] != "C":
        return end
    if _run_end(text, words, end + 1) != end + 1 or _gap(text, words, end + 1).startswith(","):
        return end
    return end + 1


def _run_end(text: str, words: list[tuple[int, int, str]], end: int) -> int:
    """The last of the names that follow word ``end`` one space apart (particles between)."""
    while _gap(text, words, end) == " " or (
        words[end][2] == "I" and _gap(text, words, end) == ". "
    ):
        following = _past_particles(text, words, end + 1)
        if following is None:
            break
        end = following
    return end


def _past_particles(text: str, words: list[tuple[int, int, str]], k: int) -> int | None:
    """The name word at ``k``, or after the particles and initials from ``k`` on joined by
    single spaces (``van der Waals``, ``de la Cruz``, ``Ó Briain``, ``J. Smith``); ``None``
    when no name follows them."""
    while (words[k][2] == "p" and _gap(text, words, k) == " ") or (
        words[k][2] == "I" and _gap(text, words, k) in (" ", ". ")
    ):
        k += 1
    return k if words[k][2] in "CU" else None


def redact_names(text: str, replacement: str = "[NAME]") -> str:
    """``text`` with every name :func:`find_names` finds replaced (memoised: texts repeat)."""
    if len(text) > 2_048:
        return _redact_names(text, replacement)
    return _redact_names_cached(text, replacement)


@functools.lru_cache(maxsize=4_096)
def _redact_names_cached(text: str, replacement: str) -> str:
    return _redact_names(text, replacement)


def _redact_names(text: str, replacement: str) -> str:
    spans = find_names(text)
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        out.append(text[at:start])
        out.append(replacement)
        at = end
    out.append(text[at:])
    return "".join(out)
