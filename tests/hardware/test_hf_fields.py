"""A bad config.json field's value as its error quotes it: ``_textfile.shown`` at the width
``hf_config.QUOTED`` (80), the one function every input error uses to cut a value short."""

from __future__ import annotations

from servesim.hardware.hf_config import QUOTED, Fields


def test_a_short_value_is_quoted_whole() -> None:
    err = Fields("cfg.json", {}).bad("hidden_size", "x" * 78, "an integer")  # repr: 80 characters
    assert str(err) == f"cfg.json: field 'hidden_size' = '{'x' * 78}' is invalid: must be an integer"


def test_a_long_value_is_cut_at_the_width_with_its_length_said() -> None:
    err = Fields("cfg.json", {}, prefix="text_config.").bad("hidden_size", "y" * 500, "an integer")
    quoted = str(err).split(" = ", 1)[1].split(" is invalid", 1)[0]
    assert quoted == "'" + "y" * (QUOTED - 1) + "... (500 characters)"
    assert str(err).startswith("cfg.json: field 'text_config.hidden_size' = ")
