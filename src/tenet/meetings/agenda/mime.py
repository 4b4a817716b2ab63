"""What may be uploaded (spec §资料上传: Content-Type whitelist, then the first 4 KB's magic bytes checked against it).

Our own signature table decides (so the OOXML rule does not depend on zip entry order), and `filetype` gives a
second opinion on binary files: a declared type it confidently contradicts (a spreadsheet sent as a Word document, an
executable) is a mismatch. Text types have no magic: the head must be UTF-8 without NUL bytes.
"""

from __future__ import annotations

import codecs
import unicodedata

import filetype

HEAD_BYTES = 4096

OOXML = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
OLE2 = {"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint"}
TEXT = {"text/plain", "text/csv"}
_OLE2_MAGIC = bytes.fromhex("D0CF11E0A1B11AE1")
_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "application/pdf": (b"%PDF-",),
    **{kind: (b"PK\x03\x04",) for kind in OOXML},
    **{kind: (_OLE2_MAGIC,) for kind in OLE2},
    "image/png": (bytes.fromhex("89504E470D0A1A0A"),),
    "image/jpeg": (b"\xff\xd8\xff",),
}
# What `filetype` may say about a file of the declared type without contradicting it.
_ALIASES: dict[str, set[str]] = {
    **{kind: {kind, "application/zip"} for kind in OOXML},
    **{kind: set(OLE2) for kind in OLE2},
    "video/mp4": {"video/mp4", "video/quicktime", "video/x-m4v", "audio/mp4", "video/3gpp"},
}

ALLOWED: tuple[str, ...] = tuple(sorted({*_SIGNATURES, "image/webp", "video/mp4", *TEXT}))


def normalise(content_type: str | None) -> str:
    """`Text/CSV; charset=utf-8` -> `text/csv`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def declared_type(content_type: str | None, filename: str) -> str | None:
    """The whitelisted type a part declares, or None (415 ATTACHMENT_MIME_NOT_ALLOWED). Windows browsers send CSV
    files as `application/vnd.ms-excel` when Excel is installed: with a `.csv` name that is text/csv."""
    kind = normalise(content_type)
    if kind == "application/vnd.ms-excel" and filename.lower().endswith(".csv"):
        return "text/csv"
    return kind if kind in ALLOWED else None


def _is_text(head: bytes, complete: bool) -> bool:
    if b"\x00" in head:
        return False
    try:
        # A multi-byte sequence cut at the 4 KB boundary is fine unless the file ends there.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return False
    return True


def matches(kind: str, head: bytes, *, complete: bool) -> bool:
    """Whether the first bytes of a file (`complete`: the whole file) agree with its declared, whitelisted type."""
    if kind in TEXT:
        return _is_text(head, complete)
    if kind == "image/webp":
        ok = head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    elif kind == "video/mp4":
        ok = head[4:8] == b"ftyp"
    else:
        ok = any(head.startswith(signature) for signature in _SIGNATURES[kind])
    if not ok:
        return False
    guessed = filetype.guess_mime(head)
    return guessed is None or guessed == kind or guessed in _ALIASES.get(kind, set())


_CONTROL = {"Cc", "Cf", "Zl", "Zp"}


def clean_filename(raw: str | None) -> str:
    """NFC; the part after the last `/` or `\\`; no control characters; whitespace collapsed; at most 255 characters
    keeping the extension; `file` when nothing is left. Unicode is kept (`会议纪要 v2.pdf`)."""
    name = unicodedata.normalize("NFC", raw or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(" " if unicodedata.category(c) in _CONTROL else c for c in name)
    name = " ".join(name.split())
    if name in ("", ".", ".."):
        return "file"
    if len(name) > 255:
        stem, dot, extension = name.rpartition(".")
        if dot and 0 < len(extension) <= 16 and stem:
            name = stem[: 255 - len(extension) - 1].rstrip() + "." + extension
        else:
            name = name[:255]
    return name
