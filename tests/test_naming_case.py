"""Channel labels are case-insensitive wherever a user types one (issue 22 item 5): the resolver the tail's
``:``, the channel filter, the palette and the CLI's ``--channel`` share."""

from __future__ import annotations

import pytest

from ag2net.naming import ChannelRefError, resolve_channel_ref

DISCUSSION = "18ecd5ae00000000a1b2c3d4e5f67d80"
CONSULTING = "18ecd5ae00000001a1b2c3d4e5f60c1e"
PAIRS = [
    ("discussion", DISCUSSION),
    ("consulting", CONSULTING),
    ("myapp.Review", "18ecd5ae000000020000000000009999"),
]


@pytest.mark.parametrize(
    "ref",
    [
        "Discussion·7D80",
        "DISCUSSION.7d80",
        "discussion:7D80",
        "7D80",
        DISCUSSION.upper(),
        DISCUSSION[:18].upper(),
    ],
)
def test_a_label_typed_in_any_case_names_the_channel(ref: str) -> None:
    assert resolve_channel_ref(ref, PAIRS) == DISCUSSION


def test_a_type_in_another_case_still_resolves_and_a_wrong_one_still_fails() -> None:
    assert resolve_channel_ref("MYAPP.REVIEW·9999", PAIRS).endswith("9999")
    assert resolve_channel_ref("myapp.Review·9999", PAIRS).endswith("9999")
    with pytest.raises(ChannelRefError, match="matches no channel"):
        resolve_channel_ref("Workflow·7D80", PAIRS)
