"""Regular expressions that spell out, for the OpenAPI document, which dates and times a query takes.

A generated client (and schemathesis) only knows what the schema states. A ``format:
date-time`` alone would promise every RFC 3339 instant of any year, while the engine's
``DateTime64``/``Date`` columns have ranges and the API also takes an ISO date-time without
offset (read as UTC). So the time parameters are declared as strings with these patterns,
which are *exact*: a string matches if and only if it is a real calendar date (leap years
included) in the range, so a schema-valid value is always accepted and everything else is
a 422. They use only ``[0-9]``-style classes, which mean the same in ECMA-262 (what
OpenAPI tools read), Python and Rust (pydantic-core's engine).
"""

from __future__ import annotations

_DAY_31 = "(0[1-9]|[12][0-9]|3[01])"
_DAY_30 = "(0[1-9]|[12][0-9]|30)"
_DAY_28 = "(0[1-9]|1[0-9]|2[0-8])"
#: any month and day that exists in every year (so not 02-29)
_MONTH_DAY = f"((0[13578]|1[02])-{_DAY_31}|(0[469]|11)-{_DAY_30}|02-{_DAY_28})"

#: years 1970..2199 and the leap years among them (2100 is not one)
_YEARS_TO_2199 = "(19[7-9][0-9]|2[01][0-9][0-9])"
_LEAP_TO_2199 = "(19(7[26]|8[048]|9[26])|20([02468][048]|[13579][26])|21([02468][48]|[2468]0|[13579][26]))"
#: years 1970..2148 and their leap years, then 2149 up to 06-05 (ClickHouse ``Date`` ends 2149-06-06)
_YEARS_TO_2148 = "(19[7-9][0-9]|20[0-9][0-9]|21[0-3][0-9]|214[0-8])"
_LEAP_TO_2148 = "(19(7[26]|8[048]|9[26])|20([02468][048]|[13579][26])|21(0[48]|[13][26]|[24][048]))"
_LAST_DAYS = f"2149-(0[135]-{_DAY_31}|04-{_DAY_30}|02-{_DAY_28}|06-0[1-5])"

_DATE_TO_2199 = f"({_YEARS_TO_2199}-{_MONTH_DAY}|{_LEAP_TO_2199}-02-29)"
_TIME = r"T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
_OFFSET = "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"

#: ``YYYY-MM-DD[Thh:mm[:ss[.fraction]][Z|±hh:mm]]``, years 1970..2199; no offset means UTC
DATETIME_PATTERN = f"^{_DATE_TO_2199}({_TIME}{_OFFSET}?)?$"
#: ``YYYY-MM-DD`` from 1970-01-01 to 2149-06-05
DATE_PATTERN = f"^({_YEARS_TO_2148}-{_MONTH_DAY}|{_LEAP_TO_2148}-02-29|{_LAST_DAYS})$"

#: what a pattern means, said in words: a 422 names this instead of echoing the expression
MEANING = {
    DATETIME_PATTERN: "must be an ISO-8601 date-time YYYY-MM-DD[Thh:mm[:ss[.fraction]][Z|±hh:mm]] "
                      "of a real day in the years 1970-2199",
    DATE_PATTERN: "must be a date YYYY-MM-DD of a real day from 1970-01-01 to 2149-06-05",
}
