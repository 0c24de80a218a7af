"""Model output made safe to print on a terminal: no escape sequences, no control characters.

A model (or whoever fine-tuned it, or a prompt it echoes) can emit ANSI/OSC escape sequences that
a terminal obeys: rewrite what was printed before, change the window title, plant a hyperlink
(OSC 8) or, on some terminals, write to the clipboard (OSC 52). Everything the CLI prints that came
from the model, the container or a discovery record goes through `TerminalText`: whole escape
sequences (CSI, OSC, DCS/PM/APC/SOS, two-character ESC sequences) are removed, then every C0
control except newline and tab, DEL, and every C1 control (U+0080-U+009F, the 8-bit forms of the
same sequences). Streams arrive in pieces, so a sequence cut between two pieces is held back until
it is complete (and dropped if it never is).
"""

from __future__ import annotations

import re

ESC = "\x1b"
_SEQUENCE = re.compile(
    r"\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, erase
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: title, hyperlink, clipboard; ends with BEL or ST
    r"|[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC; end with ST
    r"|[ -/]+[0-~]|[0-OQ-WYZ\\`a-~]"  # any other escape (charset selection, RIS "ESC c", ...), not an introducer above
    r")",
    re.DOTALL,
)
_PARTIAL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_][^\x1b]*\x1b?|[ -/]*)?", re.DOTALL)
"""The start of a sequence that the next piece may complete."""
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_HELD = 4096
"""A "sequence" longer than this is not one a terminal would wait for: drop its ESC and go on."""


def printable(text: str) -> str:
    """`text` without escape sequences or control characters (newline and tab kept)."""
    stripper = TerminalText()
    return stripper.feed(text) + stripper.finish()


class TerminalText:
    """Strips a stream piece by piece; call `finish` at the end (an unfinished sequence is dropped)."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text, self._held = self._held + piece, ""
        kept: list[str] = []
        position = 0
        while True:
            start = text.find(ESC, position)
            if start < 0:
                kept.append(text[position:])
                break
            kept.append(text[position:start])
            whole = _SEQUENCE.match(text, start)
            if whole:
                position = whole.end()
                continue
            if _PARTIAL.fullmatch(text, start) and len(text) - start <= MAX_HELD:
                self._held = text[start:]
                break
            position = start + 1  # a lone ESC: drop it, keep what follows
        return _CONTROLS.sub("", "".join(kept))

    def finish(self) -> str:
        self._held = ""
        return ""
