"""Which language a text is written in, offline: for the `language` constraint and the shaping term.

`detect_language` returns an ISO 639-1 code. Languages with their own script (zh, ja, ko, ru, ar,
he, el, hi, th) are read from the Unicode script of their letters; Latin-script languages use
a stop-word vote over en, fr, de, es, it, pt, nl for short texts and clear votes, and langdetect
otherwise when it is installed (its profiles ship inside the package; without it the vote decides). `language_share` is the share of the letters of a
text that belong to the expected language's script, which is what a language-consistency reward
needs (math and code tokens carry no letters and so count for nobody).

Not guaranteed: telling apart closely related Latin-script languages on a few words.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_SCRIPT_OF_LANGUAGE = {"zh": "CJK", "ja": "CJK", "ko": "HANGUL", "ru": "CYRILLIC", "uk": "CYRILLIC",
                       "ar": "ARABIC", "fa": "ARABIC", "he": "HEBREW", "el": "GREEK",
                       "hi": "DEVANAGARI", "th": "THAI"}
_KANA = ("HIRAGANA", "KATAKANA")
_STOPWORDS = {
    "en": "the and is are of to in that it for with was this be on not you",
    "fr": "le la les et est des une un du que qui dans pour pas sur avec ce",
    "de": "der die das und ist nicht ein eine zu mit den von sich auf für dem",
    "es": "el la los las y es de que en un una por con para del se no",
    "it": "il lo la gli le e è di che un una per non con del della sono",
    "pt": "o a os as e é de que em um uma para com não do da são",
    "nl": "de het een en is van dat niet op te zijn met voor er ik",
}
_STOP_SETS = {lang: frozenset(words.split()) for lang, words in _STOPWORDS.items()}


@lru_cache(maxsize=65536)
def char_script(ch: str) -> str:
    """A coarse script name for one letter: LATIN, CYRILLIC, CJK, HIRAGANA, ..."""
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "OTHER"
    if name.startswith("CJK"):
        return "CJK"
    return name.split(" ", 1)[0]


def script_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            s = char_script(ch)
            counts[s] = counts.get(s, 0) + 1
    return counts


def _script_language(counts: dict[str, int]) -> str | None:
    total = sum(counts.values())
    if not total:
        return None
    script, n = max(counts.items(), key=lambda kv: kv[1])
    if script == "LATIN" or n < total / 2:
        return None
    if script in _KANA or (script == "CJK" and any(counts.get(k) for k in _KANA)):
        return "ja"
    return next((lang for lang, s in _SCRIPT_OF_LANGUAGE.items() if s == script), script.lower())


def _stopword_votes(text: str) -> tuple[int, dict[str, int]]:
    words = re.findall(r"[^\W\d_]+", text.lower())
    return len(words), {lang: sum(w in stops for w in words) for lang, stops in _STOP_SETS.items()}


def _stopword_language(text: str) -> str | None:
    """The language with the most stop words, when exactly one language leads."""
    _, votes = _stopword_votes(text)
    ranked = sorted(votes.values(), reverse=True)
    if ranked[0] == 0 or ranked[0] == ranked[1]:
        return None
    return max(votes, key=lambda lang: votes[lang])


@lru_cache(maxsize=4096)
def detect_language(text: str) -> str:
    """ISO 639-1 code of the main language of `text` ("" for text with no letters)."""
    counts = script_counts(text)
    if not counts:
        return ""
    by_script = _script_language(counts)
    if by_script:
        return by_script
    n_words, votes = _stopword_votes(text)
    by_stopwords = _stopword_language(text)
    ranked = sorted(votes.values(), reverse=True)
    decisive = ranked[0] >= 3 and ranked[0] >= 2 * ranked[1]
    if by_stopwords and (n_words < 20 or decisive):
        # langdetect guesses wildly on a few words, and is slow; a clear stop-word vote is neither.
        return by_stopwords
    try:
        from langdetect import DetectorFactory, detect
        from langdetect.lang_detect_exception import LangDetectException
    except ImportError:
        return by_stopwords or "en"
    DetectorFactory.seed = 0  # langdetect is random unless seeded; rewards must be repeatable
    try:
        return detect(text).split("-")[0]
    except LangDetectException:
        return by_stopwords or ""


def language_share(text: str, language: str) -> float:
    """Share of the letters of `text` in the script of `language` (1.0 for a text with no letters)."""
    counts = script_counts(text)
    total = sum(counts.values())
    if not total:
        return 1.0
    script = _SCRIPT_OF_LANGUAGE.get(language.lower(), "LATIN")
    scripts = {script} | (set(_KANA) if language.lower() == "ja" else set())
    return sum(n for s, n in counts.items() if s in scripts) / total
