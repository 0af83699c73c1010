"""The family of head widths: masked-language models that differ only in how one width splits into heads.

The theory's variable is the head's value dimension d_v against the input length d_s. The members at width
128 (d_v = 16, 32, 64) share text, tokenizer, width, layers, feed-forward width, steps, optimiser and seed, so
they start from identical weights (the head split only reshapes the same Q, K and V matrices); a second seed of
the d_v = 32 member gives the seed-to-seed spread, and a member of half the width with two heads of 32 separates
d_v from the number of heads. Each member's random-initialisation twin is its weights before step 0.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

POSITIONS = 256  # trained positions: d_s / d_v up to 4 for the widest head, 16 for the narrowest
TOKENS = 6_000_000  # tokens each member sees (masked-LM input tokens, padding excluded)
MIN_GAIN = 0.05  # a member is trained enough when its held-out masked-token accuracy beats the unigram's by this


@dataclass(frozen=True)
class Member:
    """One model of the family: its architecture and pre-training seed (everything else is shared)."""

    width: int  # hidden size d
    heads: int  # attention heads; d_v = width / heads
    seed: int = 0
    layers: int = 4
    ffn: int = 0  # feed-forward width; 0: 4 x width

    @property
    def d_v(self) -> int:
        return self.width // self.heads

    @property
    def intermediate(self) -> int:
        return self.ffn or 4 * self.width

    @property
    def name(self) -> str:
        """The folder name under data/models/, e.g. mlm-w128-dv32-seed0."""
        return f"mlm-w{self.width}-dv{self.d_v}-seed{self.seed}"

    def as_dict(self) -> dict:
        return {**asdict(self), "d_v": self.d_v, "intermediate": self.intermediate, "name": self.name}


# In the order make family trains them when the budget is short: the width-128 d_v = 32 member (the reference of
# C13/C14), the other head splits, the width-64 control, then the second seed.
MEMBERS: tuple[Member, ...] = (
    Member(128, 4),
    Member(128, 8),
    Member(128, 2),
    Member(64, 2),
    Member(128, 4, seed=1),
)


def by_name(name: str) -> Member:
    """The member called ``name`` (:attr:`Member.name`); a KeyError lists the members."""
    for m in MEMBERS:
        if m.name == name:
            return m
    raise KeyError(f"no family member {name!r}; the members are {', '.join(m.name for m in MEMBERS)}")


# a member's folder name as a reader reads it: what sets it apart from the width-128, seed-0 members
_FOLDER = re.compile(r"\bmlm-w(\d+)-dv(\d+)-seed(\d+)(-init)?\b")


def display_names(text: str) -> str:
    """``text`` with every family member's folder name in words, with no notation to typeset:
    'mlm-w128-dv32-seed0' -> 'the head-width-32 member', 'mlm-w128-dv32-seed1' -> 'the head-width-32 member
    (seed 1)', 'mlm-w64-dv32-seed0' -> 'the head-width-32 member (width 64)', an untrained twin's ('...-init')
    -> 'the twin of the head-width-32 member'. The folder names stay where a reader types them (parameters,
    commands); a page's prose and reasons say these."""

    def words(m: re.Match) -> str:
        width, dv, seed, init = int(m[1]), int(m[2]), int(m[3]), bool(m[4])
        extra = [f"width {width}"] * (width != 128) + [f"seed {seed}"] * (seed != 0)
        name = f"the head-width-{dv} member" + (f" ({', '.join(extra)})" if extra else "")
        return f"the twin of {name}" if init else name

    return _FOLDER.sub(words, text)


def legend_name(folder: str) -> str:
    """A member's name in a chart's legend: :func:`display_names` without its article ('head-width-32 member
    (seed 1)', 'twin of the head-width-32 member'); any other name as it is."""
    return display_names(folder).removeprefix("the ")
