"""The consoles' catalogs are complete (issue 18): every msgid the templates and `N_()` mark has a zh-CN msgstr with
the same placeholders, the catalog holds nothing the code no longer says, and it compiles from the .po the package
ships (no .mo to rebuild). Every refusal sentence is one of them, and every value of an enum a page shows (a run's
kind, an account's status, an audit action, ...) has words in both languages, so no page shows a raw code."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po
from markupsafe import Markup

from tenet.iam.lifecycles import USER
from tenet.meetings.agenda.models import ATTACHMENT_CATEGORIES
from tenet.meetings.audit import Action
from tenet.meetings.outlook import mailboxes
from tenet.meetings.outlook.models import BINDING_STATES, MAILBOX_STATES, RUN_KINDS, RUN_STATES
from tenet.meetings.pages import administration, audit_trail, meeting_files, outlook
from tenet.meetings.pages import console as console_pages
from tenet.meetings.schemas import AttendanceStatus
from tenet.web import console, i18n, words

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
    used = _msgids()  # once: extracting every source per catalog entry outlasted the test's timeout
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


_CHINESE = re.compile(r"[\u4e00-\u9fff]")
# Each enum a page shows, with the words the page says it by (the mapping the page module keeps).
ENUM_WORDS = {
    "Outlook run kinds": (RUN_KINDS, outlook.RUN_KIND_WORDS),
    "Outlook run statuses": (RUN_STATES, outlook.RUN_STATUS_WORDS),
    "mailbox hints Tenet stores": (tuple(mailboxes.HINTS), outlook.HINT_WORDS),
    "account statuses": (USER.states, administration.ACCOUNT_STATUS_WORDS),
    "audit actions": (tuple(a.value for a in Action), audit_trail.ACTION_WORDS),
    "attendance statuses": (tuple(s.value for s in AttendanceStatus), console_pages.ATTENDANCE_LABELS),
    "file categories": (ATTACHMENT_CATEGORIES, meeting_files.CATEGORY_LABELS),
}


@pytest.mark.parametrize("enum", sorted(ENUM_WORDS))
def test_every_value_a_page_shows_has_words_in_both_languages(enum):
    values, said = ENUM_WORDS[enum]
    assert sorted(v for v in values if v not in said) == []
    chinese = i18n.translations("zh-CN")
    for value in values:
        assert said[value] != value, value  # English words, not the code
        assert _CHINESE.search(chinese.gettext(said[value])), (value, said[value])


@pytest.mark.parametrize(("macro", "values"), [("mailbox_state", MAILBOX_STATES), ("binding_status", BINDING_STATES)])
def test_the_outlook_states_macros_say_every_state_in_chinese(macro, values):
    module = console.environment("zh-CN").get_template("meetings/outlook_macros.html").make_module({"prefix": ""})
    for value in values:
        html = str(getattr(module, macro)(value))
        text = Markup(html).striptags()
        assert _CHINESE.search(text) and value not in text, html


def test_a_stored_hint_is_known_by_its_code():
    assert mailboxes.hint_code(mailboxes.HINT_DENIED) == "ACCESS_DENIED"
    assert mailboxes.hint_code("Something Graph said") is None and mailboxes.hint_code(None) is None
