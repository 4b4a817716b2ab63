"""Languages of the consoles: zh-CN and en, through gettext catalogs (Babel).

The catalogs are `.po` files in this package (`locale/<locale>/LC_MESSAGES/messages.po`), compiled in memory when
first asked for (babel.messages): the `.po` is the only source, so there is no `.mo` to forget to rebuild and an
installed package (`pip install -e .` or a wheel) needs no extra step (docs/decisions.md, issue 18). English is the
msgids themselves. `tests/web/test_console_i18n.py` fails when a msgid in the templates or in `N_()` has no
zh-CN msgstr.

Which language a person sees: the one they chose (kept in their settings, `preferences.language`; the settings'
default `en` is not a choice: only a stored value is), else the browser's `Accept-Language`, else English.
Dates and numbers are formatted for that language by Babel; times in the meeting's zone, with the viewer's zone
beside when the two differ (`when`).
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from zoneinfo import ZoneInfo

from babel import Locale
from babel.dates import format_date, format_datetime, format_time, get_day_names
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal
from babel.support import NullTranslations, Translations
from babel.units import format_unit

LANGUAGES = ("en", "zh-CN")
DEFAULT = "en"
_BABEL = {"en": "en", "zh-CN": "zh_CN"}
NAMES = {"en": "English", "zh-CN": "简体中文"}


def N_(message: str) -> str:
    """Marks a message for the catalog where it is declared; it is translated where it is shown."""
    return message


@cache
def translations(language: str) -> NullTranslations:
    if language == DEFAULT:
        return NullTranslations()
    po = files("tenet.web") / "locale" / _BABEL[language] / "LC_MESSAGES" / "messages.po"
    catalog = read_po(io.BytesIO(po.read_bytes()), locale=_BABEL[language])
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Translations(compiled)


@cache
def _locale(language: str) -> Locale:
    """Babel's CLDR data of a language, parsed once (Locale.parse builds a new object on every call)."""
    return Locale.parse(_BABEL[language])


def supported(tag: str | None) -> str | None:
    """The console language a BCP 47 tag means (`zh`, `zh-Hans-CN`, `zh-cn` are zh-CN; `en-GB` is en), or None."""
    if not tag:
        return None
    primary = tag.strip().split("-")[0].split("_")[0].lower()
    return {"zh": "zh-CN", "en": "en"}.get(primary)


def from_accept_language(header: str | None) -> str | None:
    """The first supported language of an Accept-Language header, by quality (RFC 9110 §12.5.4)."""
    ranked: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "").split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        language = supported(tag)
        if language and quality > 0:
            ranked.append((-quality, index, language))
    return min(ranked)[2] if ranked else None


def choose(stored: str | None, accept_language: str | None) -> str:
    return supported(stored) or from_accept_language(accept_language) or DEFAULT


@dataclass(frozen=True)
class Formats:
    """Dates, times and numbers in one language (Babel's CLDR data)."""

    language: str

    @property
    def locale(self) -> Locale:
        return _locale(self.language)

    def datetime(self, value: dt.datetime, zone: str) -> str:
        return format_datetime(value, "medium", tzinfo=ZoneInfo(zone), locale=self.locale)

    def date(self, value: dt.datetime, zone: str) -> str:
        return format_date(value.astimezone(ZoneInfo(zone)), "full", locale=self.locale)

    def time(self, value: dt.datetime, zone: str) -> str:
        return format_time(value, "short", tzinfo=ZoneInfo(zone), locale=self.locale)

    def clock_times(self, zone: str) -> Callable[[dt.datetime], str]:
        """`time` for many values of one zone (a board's check-in times): the short format shows hours and
        minutes only, so each distinct minute is formatted once (a burst of check-ins shares a few minutes)."""
        shown: dict[dt.datetime, str] = {}
        tzinfo = ZoneInfo(zone)

        def clock_time(value: dt.datetime) -> str:
            minute = value.astimezone(tzinfo).replace(second=0, microsecond=0)
            text = shown.get(minute)
            if text is None:
                text = shown[minute] = format_time(minute, "short", tzinfo=tzinfo, locale=self.locale)
            return text

        return clock_time

    def day(self, value: dt.date) -> str:
        return format_date(value, "full", locale=self.locale)

    def weekday_names(self) -> list[str]:
        """Monday first, as the language writes them."""
        names = get_day_names("wide", locale=self.locale)
        return [names[i] for i in range(7)]

    def number(self, value: int | float) -> str:
        return format_decimal(value, locale=self.locale)

    def size(self, value: int) -> str:
        """A file's size as the language writes it, in binary steps (209,715,200 bytes: "200 MB")."""
        if value < 1024:
            return format_unit(value, "digital-byte", length="long", locale=self.locale)
        amount, unit = value / 1024, "digital-kilobyte"
        for bigger in ("digital-megabyte", "digital-gigabyte"):
            if amount < 1024:
                break
            amount, unit = amount / 1024, bigger
        return format_unit(amount, unit, length="short", format="#,##0.#", locale=self.locale)

    def when(self, value: dt.datetime, zone: str, viewer_zone: str | None) -> str:
        """A time in the meeting's zone (named), and in the viewer's zone beside it when the two differ."""
        shown = f"{self.datetime(value, zone)} ({zone})"
        if viewer_zone and viewer_zone != zone and \
                value.astimezone(ZoneInfo(viewer_zone)).utcoffset() != value.astimezone(ZoneInfo(zone)).utcoffset():
            shown += f" · {self.time(value, viewer_zone)} ({viewer_zone})"
        return shown
