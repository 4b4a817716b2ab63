"""The consoles' catalogs are complete (issue 18): every msgid the templates and `N_()` mark has a zh-CN msgstr with
the same placeholders, the catalog holds nothing the code no longer says, and it compiles from the .po the package
ships (no .mo to rebuild). Every refusal sentence is one of them."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from tenet.web import i18n, words

ROOT = Path(__file__).resolve().parents[2] / "src" / "tenet"
SOURCES = (ROOT / "web", ROOT / "meetings" / "pages", ROOT / "reservations" / "pages")
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _msgids() -> set[str]:
    found = set()
    for root in SOURCES:
        for _, _, message, _, _ in extract_from_dir(
                str(root), [("**/templates/**.html", "jinja2"), ("**.py", "python")],
                options_map={"**/templates/**.html": {"extensions": "jinja2.ext.i18n"}},
                keywords={"_": None, "gettext": None, "N_": None}):
            found.add(message if isinstance(message, str) else message[0])
    return found


def _catalog():
    po = files("tenet.web") / "locale" / "zh_CN" / "LC_MESSAGES" / "messages.po"
    return read_po(po.open("rb"), locale="zh_CN")


def test_every_msgid_has_a_chinese_msgstr_with_the_same_placeholders():
    catalog = _catalog()
    used = _msgids()
    assert len(used) > 50
    missing = sorted(m for m in used if m not in catalog or not catalog[m].string)
    assert missing == []
    for message in used:
        assert set(_PLACEHOLDER.findall(catalog[message].string)) == set(_PLACEHOLDER.findall(message)), message


def test_the_catalog_holds_nothing_the_code_no_longer_says():
    used = _msgids()  # once: extracting the sources per catalog entry outlasted the timeout on a loaded machine
    stale = sorted(m.id for m in _catalog() if m.id and m.id not in used)
    assert stale == []


def test_every_refusal_sentence_is_translated():
    chinese = i18n.translations("zh-CN")
    for sentence in {*words.SENTENCES.values(), words.GENERAL}:
        assert chinese.gettext(sentence) != sentence


def test_the_catalog_compiles_from_the_package():
    assert i18n.translations("zh-CN").gettext("Sign in") == "登录"
    assert i18n.translations("en").gettext("Sign in") == "Sign in"


def test_accept_language():
    assert i18n.from_accept_language("fr-CH, fr;q=0.9, zh;q=0.8, en;q=0.7") == "zh-CN"
    assert i18n.from_accept_language("en-US,en;q=0.9,zh-CN;q=0.8") == "en"
    assert i18n.from_accept_language("zh-CN;q=0, de") is None
    assert i18n.from_accept_language("zh-Hans-CN;q=abc, en;q=0.1") == "en"
    assert i18n.choose(None, None) == "en"
    assert i18n.choose("zh-CN", "en") == "zh-CN"
