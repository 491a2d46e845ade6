"""Language identification on outside material: IFEval's 30 response languages, hand-written text.

The language list is IFEval's `instructions_util.LANGUAGE_CODES` (google-research/google-research,
instruction_following_eval), copied here rather than read from rlvr. The paragraphs in
data/language_paragraphs.json were written for these tests, two per language where a language
shares its script with another one of the list.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from rlvr.verifiers.constraints import CHECKS
from rlvr.verifiers.language import (MIN_LETTERS, UNDETERMINED, detect_language, language_share,
                                     scripts_of, writing_systems)
from rlvr.verifiers.shaping import language_consistency

IFEVAL_LANGUAGES = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi", "fr": "French",
    "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian", "bn": "Bengali", "uk": "Ukrainian",
    "th": "Thai", "ur": "Urdu", "ta": "Tamil", "te": "Telugu", "bg": "Bulgarian", "ko": "Korean",
    "pl": "Polish", "he": "Hebrew", "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili",
    "kn": "Kannada", "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish",
}
DATA = json.loads((Path(__file__).parent / "data" / "language_paragraphs.json").read_text(encoding="utf-8"))
PARAGRAPHS = DATA["paragraphs"]
SAMPLES = [(lang, text) for lang, texts in PARAGRAPHS.items() for text in texts]
# Languages of the list that share a script, by script (what script-only identification confused).
SHARED = {"CYRILLIC": ["ru", "uk", "bg"], "ARABIC": ["ar", "fa", "ur"], "DEVANAGARI": ["hi", "mr", "ne"],
          "LATIN": ["en", "es", "pt", "fr", "de", "it", "pl", "vi", "sw", "fi"]}


def test_every_ifeval_language_has_material():
    assert len(IFEVAL_LANGUAGES) == 30
    assert set(IFEVAL_LANGUAGES) <= set(PARAGRAPHS)
    for script, langs in SHARED.items():
        assert all(script in scripts_of(lang) for lang in langs)
        assert all(len(PARAGRAPHS[lang]) >= 2 for lang in langs if script != "LATIN" or lang != "en")


@pytest.mark.parametrize("lang,text", SAMPLES, ids=[f"{lang}{i}" for i, (lang, _) in enumerate(SAMPLES)])
def test_paragraph_is_identified_as_its_language(lang, text):
    assert detect_language(text) == lang
    assert CHECKS["language"](text, language=lang)


@pytest.mark.parametrize("script", sorted(SHARED))
def test_no_two_languages_sharing_a_script_are_confused(script):
    for a, b in combinations(SHARED[script], 2):
        for text in PARAGRAPHS[a]:
            assert not CHECKS["language"](text, language=b), (a, b, text[:40])
        for text in PARAGRAPHS[b]:
            assert not CHECKS["language"](text, language=a), (b, a, text[:40])


@pytest.mark.parametrize("lang", ["pl", "fi"])
def test_short_polish_and_finnish_sentences(lang):
    # One sentence each, with the stop words ("a", "on") that a stop-word vote gave to pt / en.
    for text in DATA["short"][lang]:
        assert detect_language(text) == lang, text


@pytest.mark.parametrize("text,expected", [
    ("Tak.", UNDETERMINED), ("Hei!", UNDETERMINED), ("Это мой дом.", UNDETERMINED),
    ("안녕하세요", "ko"), ("ありがとう", "ja"), ("สวัสดีครับ", "th"), ("12345 + 678", ""),
])
def test_below_the_minimum_length_it_says_undetermined_unless_the_script_names_the_language(text, expected):
    assert detect_language(text) == expected
    if expected == UNDETERMINED:
        assert not CHECKS["language"](text, language="ru" if "Это" in text else "pl")


def test_minimum_is_in_letters():
    text = "Dziękuję bardzo za pomoc w kuchni."
    assert sum(c.isalpha() for c in text) >= MIN_LETTERS and detect_language(text) == "pl"
    assert detect_language("Dziękuję bardzo.") == UNDETERMINED


def test_consistency_reward_tells_languages_of_one_script_apart():
    ru, uk = PARAGRAPHS["ru"][0], PARAGRAPHS["uk"][0]
    assert language_consistency(f"<think>{ru}</think>", "ru") == 1.0
    assert language_consistency(f"<think>{uk}</think>", "ru") == 0.0
    assert language_consistency(f"<think>{uk}</think>", "uk") == 1.0
    half = language_share(f"{PARAGRAPHS['fr'][0]}\n{PARAGRAPHS['en'][0]}", "fr")
    assert 0.3 < half < 0.7  # code-switching between two Latin-script languages, sentence by sentence
    for lang, texts in PARAGRAPHS.items():
        assert all(language_share(text, lang) == 1.0 for text in texts), lang


@pytest.mark.parametrize("script", sorted(SHARED))
def test_consistency_reward_gives_nothing_to_a_language_sharing_the_script(script):
    for a, b in combinations(SHARED[script], 2):
        assert all(language_share(t, b) == 0.0 for t in PARAGRAPHS[a]), (a, b)
        assert all(language_share(t, a) == 0.0 for t in PARAGRAPHS[b]), (b, a)


def test_mixed_scripts_still_count_against():
    assert language_share("Считаем производную функции: the derivative is zero.", "ru") < 0.7
    assert writing_systems(PARAGRAPHS["ja"][0]) == {"CJK"}  # kana and Han: one system
    assert writing_systems("answer 5 или 6") == {"LATIN", "CYRILLIC"}


@pytest.mark.parametrize("lang,text", [
    ("sw", "Jana jioni tulikwenda sokoni kununua matunda na mboga za majani."),
    ("sw", "Kaka yangu anafanya kazi"),
    ("ne", "हिजो बेलुका हामी साथीहरूसँग पोखरा घुम्न गयौं। फेवा तालमा डुंगा चढ्दा माछापुच्छ्रे हिमाल"),
])
def test_short_texts_fasttext_is_unsure_of_get_the_second_opinion(lang, text):
    # Beginnings of the paragraphs above; fastText alone names Dutch, Volapük and Hindi at p < 0.5.
    assert detect_language(text) == lang


@pytest.mark.parametrize("lang,text", [
    # From a blind comparison with IFEval (issue 19): fastText's small model gives these Hindi at
    # p = 0.58 and 0.73, under CONFUSABLE_SURE, where langdetect (IFEval's detector) says Nepali.
    ("ne", "गएको हप्ता हामी साथीहरूसँग पोखरा घुम्न गयौं। फेवा तालमा डुंगा चढ्दा माछापुच्छ्रे हिमाल एकदमै "
           "राम्रो देखिन्थ्यो। साँझ हामीले लेकसाइडमा खाना खायौं।"),
    ("ne", "फेवा तालमा डुंगा चढ्दा माछापुच्छ्रे हिमाल एकदमै राम्रो देखिन्थ्यो। साँझ हामीले लेकसाइडमा खाना खायौं।"),
])
def test_a_language_fasttext_gives_to_its_neighbour_is_checked_by_langdetect(lang, text):
    assert detect_language(text) == lang
    assert CHECKS["language"](text, language=lang) and not CHECKS["language"](text, language="hi")
    assert language_share(text, lang) == 1.0 and language_share(text, "hi") == 0.0


def test_a_line_fasttext_gives_to_a_neighbour_follows_its_text():
    # fastText's small model gives this Bulgarian list line Russian at p = 0.81: not sure enough for
    # languages it confuses, so the line follows the text's verdict (Bulgarian).
    text = PARAGRAPHS["bg"][0] + "\nПравете кратки почивки на всеки час и не забравяйте"
    assert language_share(text, "bg") == 1.0 and language_share(text, "ru") == 0.0


def test_the_second_opinion_within_a_group_names_only_its_languages():
    # Within a confusable group langdetect is loaded with the group's profiles alone (faster); it
    # cannot then name a language outside the group (None: none of its n-grams is known there).
    from rlvr.verifiers.language import _second_opinion
    english = "This is plainly an English sentence about the weather and the sea."
    assert _second_opinion(english) == "en"
    assert _second_opinion(english, frozenset({"hi", "ne", "mr"})) in {"hi", "ne", "mr", None}
