"""Words, not code, on the book's pages (issue 53): the registry keys, family member folders and results keys a
page shows where a reader reads (not where one types: code cells, parameters cells, code spans, the rerun
page), and words set as math. The book-tier test scans every rendered page with these; the unit test scans a
stand-in page."""

from __future__ import annotations

import re
from collections.abc import Iterable

from bs4 import BeautifulSoup

# words math may set upright or as operators: the notation's functions and the symbols' subscripts (A_eff)
MATH_WORDS = frozenset(
    {"LN", "rank", "softmax", "dim", "max", "min", "log", "Pearson", "Spearman", "argmax", "sqrt", "med", "top"}
)
# a snake_case word whose first part is a word, not a symbol's letter (d_s is notation written plainly, not code)
SNAKE = re.compile(r"(?<![\w@./-])[a-z][a-z0-9]+(?:_[a-z0-9]+)+(?:@\w+)?(?![\w/.-]*\w)")
MEMBER = re.compile(r"\bmlm-w\d+-dv\d+-seed\d+(?:-init)?\b")  # pretrain.family.Member.name (and its twin's)
_MATH = re.compile(r"\\\((.*?)\\\)|\\\[(.*?)\\\]|\$\$(.*?)\$\$", re.S)
_UPRIGHT = re.compile(r"\\(?:mathrm|operatorname|text|mathbf|mathit|mathsf|begin|end)\s*\{[^{}]*\}")


def registry_keys() -> frozenset[str]:
    """The keys a reader must never meet in prose: every measure's registry name, rolled out or not (the
    contributions registry), and the references' ('hta', 'intervention_mask'). Plain English keys ('raw',
    'flow', 'rollout', 'norm', 'effective', 'intervention') are left out: they are words too."""
    from ..contributions import MEASURES
    from ..evidence.measures import ROLLED

    words = {"raw", "flow", "rollout", "norm", "effective", "intervention"}
    keys = {k for k in MEASURES if k not in words} | {"hta", "intervention_mask"}
    return frozenset(keys | {k + ROLLED for k in MEASURES})


def _reading_text(html: str) -> str:
    """The text a reader reads on a page: its article less code (cells' inputs, code spans and blocks), scripts,
    styles, charts and math."""
    soup = BeautifulSoup(html, "html.parser")
    root = soup.find("article") or soup
    for tag in root.select("pre, code, script, style, .cell_input, .vega-chart, .math, mjx-container"):
        tag.decompose()
    return root.get_text(" ")


def code_in_prose(html: str, keys: Iterable[str] = ()) -> list[str]:
    """What on a rendered page reads as code outside code: each registry key of ``keys`` (as a whole word, case
    kept: 'GlobEnc' is the name, 'globenc' the key), each family member's folder name and each snake_case word
    (a results key, 'hw_model'), once each in page order."""
    text = _reading_text(html)
    found = [m.group() for m in SNAKE.finditer(text)] + MEMBER.findall(text)
    for key in sorted(keys, key=len, reverse=True):
        if re.search(rf"(?<![\w@-]){re.escape(key)}(?![\w@-])", text):
            found.append(key)
    return list(dict.fromkeys(found))


def words_as_math(html: str, allowed: frozenset[str] = MATH_WORDS) -> list[str]:
    """Words set in math type on a rendered page: in each TeX formula, a run of three or more italic letters
    ('norm' in $norm_{resln}$) that is not one of ``allowed``; upright text (\\mathrm{eff}) and commands are not
    italic words. Each formula with such a word, once."""
    soup = BeautifulSoup(html, "html.parser")
    out = []
    for tag in soup.select(".math"):
        for groups in _MATH.findall(tag.get_text()) or [(tag.get_text(),)]:
            tex = next((g for g in groups if g), "")
            italic = re.sub(r"\\[A-Za-z]+", " ", _UPRIGHT.sub(" ", tex))
            if any(w not in allowed for w in re.findall(r"[A-Za-z]{3,}", italic)):
                out.append(tex.strip())
    return list(dict.fromkeys(out))
