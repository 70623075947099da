"""The hub's refusals name channels and participants (issue 22 item 7); the workbench's wording reads
them as it read the ids: the same sentences from ``discussion·7d80 expects critic to speak, got root``
as from ``discussion channel '<id>' expects '<id>' to speak, got '<id>'``.

The texts are the real hub's (``ag2net.hub.core.named_text`` over a real in-process hub), for every
refusal :func:`tui.wording.humanize` rewords.
"""

from __future__ import annotations

import pytest
from tui_network import close, small_network

from ag2net.hub.core import named_text
from ag2net.naming import channel_label
from tui.wording import Namer, humanize


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def hub_says(network, template: str, **ids: str) -> str:
    """The refusal text with ids, as the adapters raise it, named as the hub now sends it."""
    return named_text(network.hub.core, template.format(**{k: repr(v) for k, v in ids.items()}))


async def test_every_reworded_refusal_reads_the_same_from_names_as_from_ids(network) -> None:
    human, critic = network.human.agent_id, network.critic.agent_id
    cid = network.discussion
    md = await network.hc.get_channel(cid)
    label = channel_label(md.manifest.type, cid)
    words = Namer(network.hc.name_for, {cid: label}, human)
    templates = [
        "discussion channel {cid} expects {critic} to speak, got {human}",
        "consulting channel {cid} expects reply from respondent {critic}, got {human}",
        "consulting channel {cid} expects first send from initiator {critic}, got {human}",
        "consulting channel {cid} already complete",
        "channel {cid} is closed (reason: done); open a new one",
        "channel {cid} not active (state=pending)",
        "conversation channel {cid} only accepts sends from participants, got {human}",
        "audience must list only participants of the channel; {critic} is not one of channel {cid}",
        "channel {cid} ack timeout",
    ]
    for template in templates:
        with_ids = template.format(cid=repr(cid), critic=repr(critic), human=repr(human))
        named = hub_says(network, template, cid=cid, critic=critic, human=human)
        assert critic not in named and cid not in named, named  # the hub named them
        assert humanize(named, words) == humanize(with_ids, words), template
        assert "channel " not in humanize(named, words), template  # reworded, not passed through


async def test_the_person_is_you_when_the_hub_says_their_name(network) -> None:
    cid, human, critic = network.discussion, network.human.agent_id, network.critic.agent_id
    text = hub_says(
        network,
        "discussion channel {cid} expects {critic} to speak, got {human}",
        cid=cid,
        critic=critic,
        human=human,
    )
    words = Namer(network.hc.name_for, {}, human)
    assert text.endswith(f"got {network.hc.name_for(human)}")
    assert humanize(text, words) == "critic's turn — you can speak after critic"


def test_a_name_with_spaces_and_a_long_name_stay_whole() -> None:
    words = Namer(me="f" * 32)
    text = "discussion·7d80 expects the senior reviewer to speak, got alice in accounting"
    assert humanize(text, words) == (
        "the senior reviewer's turn in discussion·7d80 — alice in accounting can speak after the senior reviewer"
    )
    assert humanize(
        "conversation·ab12 only accepts sends from participants, got somebody-with-a-long-name", words
    ) == ("somebody-with-a-long-name is not a participant of conversation·ab12")


def test_the_hub_label_becomes_the_workbench_label_when_it_knows_longer_ones() -> None:
    # two channels share the last four digits: the workbench labels them with more, the hub with four
    one, two = "1" * 24 + "aaaa7d80", "2" * 24 + "bbbb7d80"
    words = Namer(labels={one: "discussion·aaaa7d80", two: "consulting·bbbb7d80"})
    assert humanize("discussion·7d80 is closed", words) == "discussion·aaaa7d80 is closed"
