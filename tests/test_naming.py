"""The short channel label and the id-naming helpers people read instead of hex."""

import pytest

from ag2net.naming import ChannelRefError, channel_label, channel_labels, name_ids, resolve_channel_ref

ID1 = "18ecd5ae11112222" + "0000000000007d80"
ID2 = "18ecd5ae11112223" + "00000000000a7d80"
ID3 = "18ecd5ae11112224" + "0000000000001234"


def test_label_is_type_and_id_tail():
    assert channel_label("discussion", ID1) == "discussion·7d80"


def test_labels_grow_until_unique_and_stay_aligned():
    labels = channel_labels([("consulting", ID1), ("consulting", ID2), ("consulting", ID3)])
    assert len(set(labels.values())) == 3
    assert labels[ID1] == "consulting·07d80"
    assert labels[ID2] == "consulting·a7d80"
    assert labels[ID3] == "consulting·01234"
    # different types with one tail need no more digits
    assert channel_labels([("consulting", ID1), ("discussion", ID2)]) == {
        ID1: "consulting·7d80",
        ID2: "discussion·7d80",
    }


@pytest.mark.parametrize(
    "ref", ["discussion·7d80", "discussion.7d80", "discussion:7d80", "discussion-7d80", ID1, ID1[:20]]
)
def test_resolve_accepts_label_ascii_forms_id_and_prefix(ref):
    assert resolve_channel_ref(ref, [("discussion", ID1), ("consulting", ID3)]) == ID1


def test_resolve_bare_tail_and_type_disambiguation():
    pairs = [("discussion", ID1), ("consulting", ID2)]
    assert resolve_channel_ref("consulting·7d80", pairs) == ID2
    with pytest.raises(ChannelRefError, match=r"matches 2 channels .*give more digits"):
        resolve_channel_ref("7d80", pairs)
    assert resolve_channel_ref("a7d80", pairs) == ID2


def test_resolve_refusals_are_one_sentence():
    with pytest.raises(ChannelRefError, match="matches no channel"):
        resolve_channel_ref("workflow·ffff", [("discussion", ID1)])
    with pytest.raises(ChannelRefError, match="empty"):
        resolve_channel_ref("  ", [("discussion", ID1)])


def test_name_ids_replaces_known_ids_only():
    unknown = "f" * 32
    text = f"discussion channel '{ID1}' expects '{ID2}' to speak, got {unknown}"
    out = name_ids(text, {ID1: "discussion·7d80", ID2: "critic"})
    assert out == f"discussion channel discussion·7d80 expects critic to speak, got {unknown}"
