"""How verdicts read on a page: the quantity an estimate measures, the notation of the claims table typeset
as MyST math, and the anchor each verdict gets in its chapter (numbers print through
:func:`identifiability.base.digits.fmt`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.digits import fmt


@dataclass(frozen=True)
class Quantity:
    """What an estimate (or a baseline) measures: in words, as a symbol (LaTeX, typeset on pages; charts
    show the words) and its unit ('' for a share, a rate or a correlation, whose words say so)."""

    words: str
    symbol: str = ""
    unit: str = ""
    integer: bool = False  # a count or a length: printed whole

    def value(self, x: float | None) -> str:
        """'34 tokens', '-0.287'."""
        return fmt(x, self.integer) + (f" {self.unit}" if self.unit and x is not None else "")

    def named(self) -> str:
        """'smallest input length with alternatives in every head, $d_s^{\\min}$' (Markdown, math typeset)."""
        words = math_text(self.words)
        return f"{words}, ${self.symbol}$" if self.symbol else words


def quantity_of(d: dict | Quantity | None) -> Quantity | None:
    """A quantity read back from a results file (a dict), or as given."""
    if d is None or isinstance(d, Quantity):
        return d
    return Quantity(**d)


def layers(numbers: Sequence[int]) -> str:
    """'layer 4' or 'layers 4, 5 and 6': never a Python list."""
    n = [str(x) for x in numbers]
    if not n:
        return "no layer"
    return f"layer {n[0]}" if len(n) == 1 else f"layers {', '.join(n[:-1])} and {n[-1]}"


def anchor(claim: str) -> str:
    """The HTML id of a claim's verdict on its chapter's page ('verdict-c4'): the claims page links to it."""
    return f"verdict-{claim.lower()}"


def unanchored(sentence: str) -> str:
    """A verdict's sentence (as :meth:`identifiability.book.notebook.Chapter.sentence` returns it) without its
    anchor, for a second showing on the same page: an HTML id names one element."""
    return re.sub(rf'^<span id="{re.escape(anchor(""))}[^"]*"></span>', "", sentence)


# --------------------------------------------------------------------------------------------------
# ASCII notation of the claims table -> MyST math
# --------------------------------------------------------------------------------------------------

# a name with one subscript and/or superscript (d_s, A_eff, e_i^l, QK^T); a known function called or applied
_NAME = r"[A-Za-z]+'?(?:_\{?[A-Za-z0-9]+\}?(?:\^[A-Za-z0-9]+)?|\^[A-Za-z0-9]+)'?(?![\w{])"
_FUNCS = ("LN", "softmax", "sqrt", "rank", "dim", "max", "min", "log", "Pearson", "Spearman", "argmax")
_TOKEN = re.compile(
    r"(?P<code>`[^`]*`|\w*_\w*_\w*)"  # code spans and snake_case names stay as they are
    r"|(?P<key>\b[a-z]{3,}_[a-z]\w*(?:@\w+)?)"  # a registry key (grad_input, norm_resln@rolled): code, not math
    rf"|(?P<name>\b{_NAME})|(?P<func>\b(?:{'|'.join(_FUNCS)})(?=\(|\s+(?:LN\b|[A-Za-z]_|[A-Z]\b)))"
    r"|(?P<num>\b\d+(?:\.\d+)?(?:e-?\d+)?\b)|(?P<op>>=|<=|!=|[=<>+*/|-])|(?P<open>[(\[])|(?P<close>[)\]])"
    r"|(?P<comma>,)|(?P<space> +)|(?P<letter>\b(?:A'|[A-Z]|[dklnr])(?![\w']))|(?P<other>.)",
    re.S,
)
_LATEX = {
    ">=": r"\geq ",
    "<=": r"\leq ",
    "!=": r"\neq ",
    "*": r"\cdot ",
    "LN": r"\mathrm{LN}",
    "softmax": r"\mathrm{softmax}",
    "rank": r"\operatorname{rank}",
    "dim": r"\dim",
    "max": r"\max",
    "min": r"\min",
    "log": r"\log",
    "Pearson": r"\mathrm{Pearson}",
    "Spearman": r"\mathrm{Spearman}",
    "argmax": r"\operatorname{argmax}",
}
_MATH = {"name", "func", "num", "op", "open", "close", "comma", "space", "letter"}
_COMPARE = {"=", "<", ">", ">=", "<=", "!="}
_VALUE = {"name", "num", "letter"}


def _latex_name(name: str) -> str:
    """d_s -> d_s, A_eff -> A_{\\mathrm{eff}}, e_i^l -> e_i^l, QK^T -> QK^\\top."""

    def sub(m: re.Match) -> str:
        mark, body = m.group(1), m.group(2).strip("{}")
        if mark == "^" and body == "T":
            return r"^\top"
        if len(body) > 1 and body.isalpha():
            return f"{mark}{{\\mathrm{{{body}}}}}"
        return f"{mark}{{{body}}}" if len(body) > 1 else f"{mark}{body}"

    return re.sub(r"([_^])(\{?[A-Za-z0-9]+\}?)", sub, name)


def _latex(tokens: list[tuple[str, str]]) -> str:
    out, i = [], 0
    while i < len(tokens):
        kind, text = tokens[i]
        if text == "sqrt" and i + 1 < len(tokens) and tokens[i + 1][1] == "(":
            depth, j = 0, i + 1  # sqrt(x) -> \sqrt{x}
            while j < len(tokens):
                depth += {"(": 1, ")": -1}.get(tokens[j][1], 0)
                if depth == 0:
                    break
                j += 1
            out.append(r"\sqrt{" + _latex(tokens[i + 2 : j]) + "}")
            i = j + 1
            continue
        if kind == "name":
            out.append(_latex_name(text))
        elif kind == "num" and "e" in text:
            mantissa, exponent = text.split("e")
            out.append(("" if mantissa == "1" else mantissa + r" \cdot ") + f"10^{{{int(exponent)}}}")
        elif text == "|":
            opening = not out or out[-1].rstrip().endswith(("(", "-", "+", "=", "rvert", ",")) or out[-1] == " "
            out.append(r"\lvert " if opening else r"\rvert ")
        else:
            out.append(_LATEX.get(text, text))
        i += 1
    return "".join(out).strip()


def _depth(tokens: list[tuple[str, str]]) -> int:
    return sum({"(": 1, "[": 1, ")": -1, "]": -1}.get(t, 0) for _, t in tokens)


def _formula(run: list[tuple[str, str]]) -> str:
    """A run of math-like tokens as text: its core typeset where it holds a formula, prose around it kept."""
    head, tail = [], []
    while run and (run[0][0] in ("space", "comma", "close") or run[0][1] in ("+", "-", "=", "/", "*")):
        head.append(run.pop(0))
    while run and (run[-1][0] in ("space", "comma", "open", "op") and run[-1][1] != "|" or run[-1][1] == "'"):
        tail.insert(0, run.pop())
    stack, unmatched = [], []
    for i, (_, t) in enumerate(run):
        if t in "([":
            stack.append(i)
        elif t in ")]":
            if stack:
                stack.pop()
            else:
                unmatched.append(i)  # a bracket the prose opened before the run
    cuts = sorted(unmatched + stack)  # brackets opened or closed by the prose: formulas lie between them
    if cuts:
        pieces, start = [], 0
        for i in cuts:
            pieces += [_formula(run[start:i]), run[i][1]]
            start = i + 1
        pieces.append(_formula(run[start:]))
        return "".join(t for _, t in head) + "".join(pieces) + "".join(t for _, t in tail)
    if len(run) > 2 and run[0][1] == "(" and run[-1][1] == ")" and _depth(run[1:-1]) == 0:
        head, tail = head + run[:1], run[-1:] + tail  # "(l > L/2)": the brackets are the prose's
        run = run[1:-1]
    kinds = {k for k, _ in run}
    texts = "".join(t for _, t in run)
    strong = "name" in kinds or "[T,1]" in texts or ("func" in kinds and len(run) > 1)
    strong |= bool({t for _, t in run} & _COMPARE) and "letter" in kinds
    balanced = _depth(run) == 0 and texts.count("|") % 2 == 0
    core = f"${_latex(run)}$" if run and strong and balanced else texts
    return "".join(t for _, t in head) + core + "".join(t for _, t in tail)


def math_text(text: str) -> str:
    """``text`` with its ASCII notation ('dim LN([T,1]) >= 1', 'softmax(QK^T/sqrt(d_q))', '|d_L| - |d_1|')
    as MyST math: a run of names, numbers, operators and brackets that holds a subscripted name, a known
    function, [T,1] or a comparison of symbols becomes one $...$; a signed number after a value is a number of
    its own ('D_val -0.02', not a subtraction); prose and code spans are left as they are, and a registry key
    written in snake_case ('grad_input', 'norm_resln@rolled') is set as code, never as a subscripted symbol."""
    out: list[str] = []
    run: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(text):
        if m.lastgroup == "key":
            out += [_formula(run), f"`{m.group()}`"]
            run = []
            continue
        if m.lastgroup in _MATH:
            solid = [k for k, _ in run if k != "space"]
            signed = m.group() == "-" and text[m.end() : m.end() + 1].isdigit()  # 'D_val -0.02': a number
            if (
                (m.lastgroup in _VALUE or signed)
                and run
                and run[-1][0] == "space"
                and solid
                and solid[-1] in _VALUE | {"close"}
            ):
                out.append(_formula(run))  # two values side by side ('d_1 0.05'): two things, not one formula
                run = []
            run.append((m.lastgroup, m.group()))
            continue
        out.append(_formula(run))
        run = []
        out.append(m.group())
    out.append(_formula(run))
    return "".join(out)
