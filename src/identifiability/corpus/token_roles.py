"""Token roles: which tokens of an input are the start token, a separator, padding, the unknown token, another
special token, punctuation or other tokens, named by their role rather than their spelling so that every
tokenizer's tokens land in the same categories (chapter 3's attention mass per key category, chapter 9's
curves of the start token and the separator)."""

from __future__ import annotations

import string
import unicodedata
from collections.abc import Sequence

# Special tokens by their role in the input, not by their spelling, so that every tokenizer's tokens land in
# the same categories: the start / classifier token ([CLS], <s>, ...), the separator / end token ([SEP],
# </s>, ...), padding and the unknown token. A tokenizer attribute names the token of each role; the first
# that exists wins.
START, SEPARATOR, PADDING, UNKNOWN = "start", "separator", "padding", "unknown"
ROLE_ATTRIBUTES = {
    START: ("cls_token", "bos_token"),
    SEPARATOR: ("sep_token", "eos_token"),
    PADDING: ("pad_token",),
    UNKNOWN: ("unk_token",),
}
STRUCTURAL = (START, SEPARATOR)  # the roles whose attention peaks the paper discusses
PUNCTUATION = "punctuation"
OTHER = "other tokens"
OTHER_SPECIAL = "other special"
CATEGORIES = (START, SEPARATOR, PUNCTUATION, OTHER, UNKNOWN, PADDING, OTHER_SPECIAL)  # display order


def _strip_marker(token: str) -> str:
    for marker in ("##", "Ġ", "▁", "Ċ"):
        token = token.removeprefix(marker)
    return token


def is_punctuation(token: str) -> bool:
    """True for tokens made only of punctuation or symbol characters (after sub-word markers are removed)."""
    t = _strip_marker(token)
    return bool(t) and all(unicodedata.category(c)[0] in "PS" or c in string.punctuation for c in t)


def special_roles(tokenizer) -> dict[str, tuple[int, str]]:
    """role -> (id, spelling) of the tokenizer's token for that role, for the roles it has a token for."""
    roles: dict[str, tuple[int, str]] = {}
    for role, attrs in ROLE_ATTRIBUTES.items():
        for attr in attrs:
            tok, tid = getattr(tokenizer, attr, None), getattr(tokenizer, f"{attr}_id", None)
            if tok is not None and tid is not None:
                roles[role] = (int(tid), str(tok))
                break
    return roles


def category_labels(tokenizer, categories: Sequence[str]) -> dict[str, str]:
    """category -> its label on a chart: a role with the tokenizer's spelling ("separator ([SEP])")."""
    spelling = {role: tok for role, (_, tok) in special_roles(tokenizer).items()}
    return {c: f"{c} ({spelling[c]})" if c in spelling else c for c in categories}


def token_categories(tokenizer, input_ids: Sequence[int]) -> list[str]:
    """One category per token: its special role (start, separator, padding, unknown), other special (a special
    token with none of these roles), punctuation or other tokens. One token that is both the start and the end
    token (a tokenizer whose bos and eos are one token) is the start token in the first position and a
    separator elsewhere."""
    roles = special_roles(tokenizer)
    by_id: dict[int, str] = {}
    for role, (tid, _) in roles.items():
        by_id.setdefault(tid, role)
    sep_id = roles[SEPARATOR][0] if SEPARATOR in roles else None
    special = set(int(i) for i in tokenizer.all_special_ids)
    ids = [int(i) for i in input_ids]
    out = []
    for k, (tid, tok) in enumerate(zip(ids, tokenizer.convert_ids_to_tokens(ids))):
        if tid == sep_id and k > 0:
            out.append(SEPARATOR)
        elif tid in by_id:
            out.append(by_id[tid])
        elif tid in special:
            out.append(OTHER_SPECIAL)
        elif is_punctuation(tok):
            out.append(PUNCTUATION)
        else:
            out.append(OTHER)
    return out
