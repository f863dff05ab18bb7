r"""Event text shown as text: the one way a page puts stored words into Streamlit or a chart.

Why: most Streamlit elements read their string as Markdown (titles, captions, alerts,
expander and widget labels, tooltips), and a Plotly label reads a subset of HTML. Names,
messages and reasons come from agents and tenants, so ``![x](http://host/p.png)`` in an
error message made Chromium fetch a remote image, ``[docs](http://…)`` became a link, and a
backtick in an agent name broke out of its code span. Every stored value that reaches a
page goes through :func:`plain` (into Markdown) or :func:`chart` (into a Plotly label):

- :func:`plain` backslash-escapes every ASCII punctuation character, which CommonMark
  defines as that literal character (so no link, image, emphasis, code span, HTML, math or
  ``:color[…]`` directive survives), puts an invisible word joiner (U+2060) into ``://``,
  ``www.`` and before ``@`` (GitHub-flavoured autolinks are found in the text *after* the
  escapes are read: Chromium showed ``http\:\/\/host`` as a link), and folds line breaks
  into spaces (a line starting with four spaces or ``#`` would otherwise become a block);
- :func:`chart` writes ``&``, ``<`` and ``>`` as entities, which Plotly decodes into text
  nodes instead of reading ``<a href>``, ``<b>`` or ``<br>`` as markup.

Tables (``st.dataframe``), ``st.text``, ``st.code`` and ``st.json`` show strings as they
are and need neither.
"""

from __future__ import annotations

import re
import string

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_LINE_BREAKS = re.compile(r"\s*[\r\n\u2028\u2029]+\s*")
#: Where a GFM autolink (``http://``, ``https://``, ``www.``, ``user@host``) would start.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"
_CHART = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def plain(value: object) -> str:
    """``value`` as a piece of Markdown that Streamlit shows exactly as the characters it has.

    ``plain("![x](http://h/p.png)")`` → ``\\!\\[x\\]\\(http\\:⁠\\/\\/h\\/p\\.png\\)`` (a word joiner
    after the colon). ``None`` shows as an empty string.
    """
    text = _LINE_BREAKS.sub(" ", "" if value is None else str(value))
    return _PUNCTUATION.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, text))


def chart(value: object) -> str:
    """``value`` as a Plotly label (axis category, trace name, bar or hover text) that shows as written."""
    return ("" if value is None else str(value)).translate(_CHART)
