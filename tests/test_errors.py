"""The one error line: never multi-line, never a 100 KB value echoed back."""
from workbench.errors import MAX_PIECE, InputError


def test_long_values_are_clipped_and_say_how_much_was_left_out():
    error = InputError("config.yaml:3 [model]", "expected a mapping, found " + "x" * 100_000, "fix it")
    text = str(error)
    assert len(text) < 3 * MAX_PIECE + 200
    assert "more characters" in text and text.endswith("(fix it)")


def test_error_text_is_one_line():
    error = InputError("a.sh:1", "found 'a\nb'\r\n", "one\nline")
    assert "\n" not in str(error) and "\r" not in str(error)
