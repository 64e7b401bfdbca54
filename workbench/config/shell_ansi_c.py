"""ANSI-C quoting, ``$'...'``, expanded the way bash expands it (nothing is executed).

The Bash Reference Manual, section 3.1.2.4 "ANSI-C Quoting", lists the escapes; the exact
behaviour at the edges is bash's ``ansicstr`` (bminor/bash:lib/sh/strtrans.c, called with
flags=2 from ``ansiexpand``), reproduced here on the UTF-8 bytes of the body:

* ``\\a \\b \\e \\E \\f \\n \\r \\t \\v \\\\ \\' \\" \\?`` are the usual characters;
* ``\\nnn``: one to three octal digits, ``\\xHH``: one or two hex digits, ``\\x{H...}``: any
  number of hex digits; the value is cut to one byte. ``\\x`` with no hex digit stays ``\\x``;
* ``\\uHHHH`` / ``\\UHHHHHHHH``: one to four / eight hex digits, a Unicode character; with no
  hex digit the text stays ``\\u`` / ``\\U``. A value that is no character (a surrogate, above
  U+10FFFF) becomes U+FFFD here;
* ``\\cx``: the control character of ``x`` (``\\c?`` is DEL); ``\\c`` at the end stays ``\\c``;
* any other escape keeps its backslash (``\\z`` is ``\\z``);
* a NUL byte (``\\0``, ``\\x00``, ``\\c@``) ends the value: bash strings are C strings.

Bytes that are not UTF-8 (``\\xff``) become U+FFFD once the value is decoded.
"""
from __future__ import annotations

_SIMPLE = {ord("a"): 0x07, ord("b"): 0x08, ord("e"): 0x1B, ord("E"): 0x1B, ord("f"): 0x0C, ord("n"): 0x0A,
           ord("r"): 0x0D, ord("t"): 0x09, ord("v"): 0x0B, ord("\\"): 0x5C, ord("'"): 0x27, ord('"'): 0x22,
           ord("?"): 0x3F}
_OCTAL = b"01234567"
_HEX = b"0123456789abcdefABCDEF"


def closing_quote(text: str, start: int) -> int | None:
    """Index of the ``'`` that closes a ``$'...'`` body starting at ``start`` (``\\'`` does not)."""
    index = start
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == "'":
            return index
        else:
            index += 1
    return None


def expand_ansi_c(body: str) -> str:
    """The value of ``$'body'`` (see the module docstring)."""
    data, out, index = body.encode("utf-8"), bytearray(), 0
    while index < len(data):
        byte = data[index]
        index += 1
        if byte != 0x5C or index == len(data):
            out.append(byte)
            continue
        value, index = _escape(data, index, out)
        if value == 0:
            break                                    # NUL: the C string ends here
        if value is not None:
            out.append(value)
    return out.decode("utf-8", errors="replace")


def _digits(data: bytes, index: int, allowed: bytes, most: int | None) -> tuple[bytes, int]:
    end = index
    while end < len(data) and data[end] in allowed and (most is None or end - index < most):
        end += 1
    return data[index:end], end


def _escape(data: bytes, index: int, out: bytearray) -> tuple[int | None, int]:
    """One escape after a backslash: (byte to append or None, next index); may write to ``out``."""
    letter = data[index]
    index += 1
    if letter in _SIMPLE:
        return _SIMPLE[letter], index
    if letter in _OCTAL:
        digits, index = _digits(data, index, _OCTAL, 2)
        return int(bytes([letter]) + digits, 8) & 0xFF, index
    if letter == ord("x"):
        return _hex_byte(data, index, out)
    if letter in (ord("u"), ord("U")):
        digits, index = _digits(data, index, _HEX, 4 if letter == ord("u") else 8)
        if not digits:
            out.append(0x5C)
            return letter, index
        code = int(digits, 16)
        if code <= 0x7F:
            return code, index
        out += _character(code)
        return None, index
    if letter == ord("c") and index < len(data):
        target = data[index]
        index += 1
        if target == 0x5C and index < len(data) and data[index] == 0x5C:
            index += 1                               # $'\c\\': POSIX wants the backslash escaped
        return (0x7F if target == ord("?") else bytes([target]).upper()[0] & 31), index
    out.append(0x5C)                                 # unknown escape (and \c at the end): kept
    return letter, index


def _hex_byte(data: bytes, index: int, out: bytearray) -> tuple[int | None, int]:
    if index < len(data) and data[index] == ord("{"):
        digits, index = _digits(data, index + 1, _HEX, None)
        if index < len(data) and data[index] == ord("}"):
            index += 1
        return int(digits or b"0", 16) & 0xFF, index
    digits, index = _digits(data, index, _HEX, 2)
    if not digits:
        out.append(0x5C)
        return ord("x"), index
    return int(digits, 16), index


def _character(value: int) -> bytes:
    if value > 0x10FFFF:
        return "\ufffd".encode("utf-8")
    return chr(value).encode("utf-8", errors="surrogatepass")   # a surrogate: bytes bash writes too
