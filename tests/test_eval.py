"""The eval library over the demo recorded with seeded ids: a cohort run twice (and over two recordings)
gives identical runs; a view change on one agent makes only that agent's turns live (counted); selectors,
fork points, built-in and custom scorers, the LLM judge (scripted); the run file round-trips and the
comparison names the regressions; the source database is never written (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from test_eval_support import SEED, BrainLive, fingerprint, record_demo, record_demo_file, without_clock

from ag2net.agent.models import ScriptedModel
from ag2net.eval import (
    Score,
    SelectionError,
    Selector,
    Settings,
    Variant,
    builtin,
    compare_runs,
    evaluate,
    fork_point,
    judge_scorer,
    load_run,
    read_cohort,
    scorer,
)
from ag2net.eval.cohort import LIFECYCLE

WINDOW = {"name": "windowed_summary", "recent_n": 2}
SCORERS = ["closed:max_turns", "turns", "tokens", "live", "reproduced", "tool:peers", "no-tool:delegate"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("eval") / "demo.db"
    return db, record_demo_file(db)


def _scorers() -> list:
    return [builtin(s) for s in SCORERS]


def test_a_cohort_run_twice_and_over_two_recordings_gives_identical_runs(demo, tmp_path):
    db, steps = demo
    again = tmp_path / "again.db"
    assert record_demo_file(again) == steps  # seeded ids: the same channels
    members = read_cohort(str(db), Selector())
    assert [m.channel_id for m in members] == [m.channel_id for m in read_cohort(str(again), Selector())]
    view = Variant("view", {"critic": WINDOW}, live=BrainLive(steps))
    runs = []
    for source in (db, db, again):
        for variant in (Variant(), view):
            cohort = read_cohort(str(source), Selector())
            run = asyncio.run(evaluate(cohort, variant, _scorers(), settings=Settings(concurrency=3)))
            runs.append(without_clock(run.to_dict()))
    baseline, changed = runs[0], runs[1]
    assert runs[2] == runs[4] == baseline and runs[3] == runs[5] == changed
    assert baseline["run_id"] != changed["run_id"]
    assert len(baseline["tasks"]) == 6 and all(
        f["score"] is True for t in baseline["tasks"] for f in t["feedback"] if f["key"] == "reproduced"
    )
    assert baseline["aggregates"]["pass_rate"]["reproduced"] == 1.0


def test_only_the_changed_agents_turns_are_live_and_counted(demo):
    db, steps = demo
    live = BrainLive(steps)
    cohort = read_cohort(str(db), Selector(types=["conversation", "discussion"]))
    assert [m.channel_type for m in cohort] == ["discussion", "conversation"]
    run = asyncio.run(evaluate(cohort, Variant("view", {"critic": WINDOW}, live=live), _scorers()))
    assert set(live.calls) == {"critic"} and live.calls["critic"] > 0
    assert run.totals()["live_calls"] == live.calls["critic"]
    for outcome in run.outcomes:
        # the critic's brain answers as the recording did, so nobody else's request changed
        assert outcome.identical, outcome.verdict
        assert "live" in outcome.marks["critic"]
        assert all(
            k == "recorded" for name, kinds in outcome.marks.items() if name != "critic" for k in kinds
        )
        assert outcome.live == outcome.marks["critic"].count("live")
        assert 0 < outcome.live_tokens < outcome.full_tokens
    discussion = run.outcomes[0]
    assert set(discussion.marks) == {"researcher", "critic", "coder", "planner"}


def test_with_no_live_model_a_changed_request_is_refused_and_scored_as_such(demo):
    db, _ = demo
    cohort = read_cohort(str(db), Selector(types=["conversation"]))
    run = asyncio.run(evaluate(cohort, Variant("view", {"critic": WINDOW}), _scorers()))
    (outcome,) = run.outcomes
    assert outcome.live == 0 and not outcome.identical
    assert "critic's model is `replay` and has no recorded reply" in outcome.verdict
    assert outcome.passed("closed:max_turns") is False and outcome.passed("reproduced") is False


def test_a_regression_is_named_with_how_far_each_scorer_moved(demo, tmp_path):
    db, _ = demo
    cohort = read_cohort(str(db), Selector(types=["conversation"]))
    base = asyncio.run(evaluate(cohort, Variant(), _scorers()))
    worse = asyncio.run(
        evaluate(
            cohort, Variant("view", {"critic": WINDOW}, live=ScriptedModel("ok.", loop=True)), _scorers()
        )
    )
    base.save(tmp_path / "base.json")
    again = load_run(tmp_path / "base.json")
    assert without_clock(again.to_dict()) == without_clock(base.to_dict())
    diff = compare_runs(worse, again)
    assert [(f.key, f.label) for f in diff.regressions] == [("reproduced", cohort[0].label)]
    assert diff.moves["reproduced"] == ("pass rate", 1.0, 0.0)
    assert diff.moves["live"][0] == "mean" and diff.moves["live"][2] > 0
    assert compare_runs(base, again).regressions == []


def test_selectors_choose_by_type_time_participants_label_tag_channel_and_failed_run(demo, tmp_path):
    db, steps = demo
    everything = read_cohort(str(db), Selector())
    assert len(everything) == 6
    assert {m.channel_id for m in read_cohort(str(db), Selector(types=["consulting"]))} == {
        m.channel_id for m in everything if m.channel_type == "consulting"
    }
    pairing = read_cohort(str(db), Selector(labels={"intent": "pairing"}))
    assert [m.channel_id for m in pairing] == [steps["pairing"]]
    assert [
        m.channel_id for m in read_cohort(str(db), Selector(tags=["intent"], types=["conversation"]))
    ] == [steps["pairing"]]
    both = read_cohort(str(db), Selector(participants=["critic", "coder"]))
    assert steps["pairing"] in {m.channel_id for m in both} and len(both) < 6
    assert len(read_cohort(str(db), Selector(limit=2))) == 2
    assert [m.channel_id for m in read_cohort(str(db), Selector(channels=[steps["workflow"][-4:]]))] == [
        steps["workflow"]
    ]
    first = str(everything[0].source.metadata.created_at)
    assert len(read_cohort(str(db), Selector(since=first, until=first[:10]))) == 6
    with pytest.raises(
        SelectionError, match=r"no channel of the database matches the selector \(type nope\)"
    ):
        read_cohort(str(db), Selector(types=["nope"]))
    with pytest.raises(SelectionError, match="created 2999"):
        read_cohort(str(db), Selector(since="2999"))
    run = asyncio.run(evaluate(pairing, Variant("view", {"critic": WINDOW}), _scorers()))
    run.save(tmp_path / "r.json")
    failed = read_cohort(str(db), Selector(failed=("reproduced", str(tmp_path / "r.json"))))
    assert [m.channel_id for m in failed] == [steps["pairing"]]
    with pytest.raises(SelectionError, match="the run has no scorer 'nope'"):
        read_cohort(str(db), Selector(failed=("nope", str(tmp_path / "r.json"))))


def test_fork_points_first_substantive_or_of_a_type_or_sender(demo):
    db, steps = demo
    (member,) = read_cohort(str(db), Selector(channels=[steps["pairing"]]))
    envs = member.source.envelopes
    at = fork_point(envs)
    assert envs[at - 1].event_type not in LIFECYCLE and all(e.event_type in LIFECYCLE for e in envs[: at - 1])
    assert fork_point(envs, "type:ag2.channel.opened") == next(
        i + 1 for i, e in enumerate(envs) if e.event_type == "ag2.channel.opened"
    )
    critic = member.source.agent_id("critic")
    names = {a: member.source.name_for(a) for a in member.source.agents}
    assert envs[fork_point(envs, "sender:critic", names) - 1].sender_id == critic
    assert fork_point(envs, "type:no.such") == 0


def test_scorers_custom_sync_and_async_judge_and_a_failing_scorer(demo):
    db, _ = demo
    cohort = read_cohort(str(db), Selector(types=["conversation"]))

    @scorer
    def critic_spoke(ch):
        n = sum(1 for e in ch.envelopes if ch.name_for(e.sender_id) == "critic")
        return Score(n >= 8, f"the critic posted {n} envelopes")

    @scorer(key="async_len")
    async def final_length(ch):
        return len(ch.final_text)

    @scorer
    def broken(ch):
        raise RuntimeError("boom")

    judges = [
        judge_scorer(ScriptedModel("PASS\nit converges", loop=True), key="judge_pass"),
        judge_scorer(ScriptedModel("0.25 meh", loop=True), key="judge_num"),
        judge_scorer(ScriptedModel("maybe", loop=True), key="judge_odd"),
    ]
    run = asyncio.run(evaluate(cohort, Variant(), [critic_spoke, final_length, broken, *judges]))
    scores = run.outcomes[0].scores
    assert scores["critic_spoke"].score is True and "posted" in scores["critic_spoke"].comment
    assert isinstance(scores["async_len"].score, int) and scores["async_len"].score > 0
    assert scores["broken"] == Score(None, "the scorer raised RuntimeError: boom")
    assert scores["judge_pass"] == Score(True, "it converges")
    assert scores["judge_num"].score == 0.25
    assert scores["judge_odd"].score is None and "neither PASS/FAIL" in scores["judge_odd"].comment
    with pytest.raises(ValueError, match="same key"):
        asyncio.run(evaluate(cohort, Variant(), [critic_spoke, critic_spoke]))
    with pytest.raises(ValueError, match="--judge-model"):
        builtin("judge")
    with pytest.raises(ValueError, match="'nope' is not a built-in scorer; choose from contains:TEXT"):
        builtin("nope")


def test_other_axes_model_system_attach_plugin_and_tool_policy(demo):
    db, steps = demo
    cohort = read_cohort(str(db), Selector(types=["conversation"]))
    model = asyncio.run(
        evaluate(cohort, Variant("model", {"coder": ScriptedModel("fine.", loop=True)}), _scorers())
    )
    assert set(model.outcomes[0].marks["coder"]) == {"live"} and model.outcomes[0].live > 0
    system = asyncio.run(
        evaluate(cohort, Variant("system", {"coder": "Be terse."}, live=BrainLive(steps)), _scorers())
    )
    assert set(system.outcomes[0].marks["coder"]) == {"live"}
    assert all(k == "recorded" for k in system.outcomes[0].marks["critic"])
    bare = asyncio.run(
        evaluate(cohort, Variant("attach_plugin", {"coder": False}, live=BrainLive(steps)), _scorers())
    )
    assert "live" in bare.outcomes[0].marks["coder"]
    tools = asyncio.run(evaluate(cohort, Variant("tool", {"coder": {"say": 'static:"ok"'}}), _scorers()))
    assert tools.outcomes[0].error is None
    with pytest.raises(ValueError, match="axis 'colour' is not one of view, model"):
        Variant("colour", {"coder": 1})


def test_the_sqlite_source_is_opened_read_only_and_never_written(demo):
    db, _ = demo
    before = fingerprint(db)
    cohort = read_cohort(str(db), Selector())
    asyncio.run(
        evaluate(cohort, Variant("view", {"critic": WINDOW}, live=ScriptedModel("x", loop=True)), _scorers())
    )
    assert fingerprint(db) == before


async def test_a_postgres_cohort_replays_and_the_database_is_not_written(pg_server):
    from ag2net.store import open_store

    url = await pg_server.fresh_url()
    steps = await record_demo(open_store(url), SEED)

    async def contents() -> list:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            rows = []
            for table in ("channels", "wal", "turns", "agents"):
                rows.append(await conn.fetch(f"SELECT * FROM {table} ORDER BY 1"))
            return [[tuple(r) for r in t] for t in rows]
        finally:
            await conn.close()

    before = await contents()
    cohort = await asyncio.to_thread(read_cohort, url, Selector(types=["conversation"]))
    assert [m.channel_id for m in cohort] == [steps["pairing"]]
    run = await evaluate(cohort, Variant("view", {"critic": WINDOW}, live=BrainLive(steps)), _scorers())
    assert run.outcomes[0].identical and run.outcomes[0].live > 0
    assert await contents() == before
    assert json.loads(json.dumps(run.to_dict()))["tasks"][0]["task_id"] == steps["pairing"]


class Priced:
    """A live model with a priced name that reports its usage as a provider would."""

    params: ClassVar[dict[str, Any]] = {"model": "pricey-1"}
    name = "pricey-1"

    async def complete(self, request: Any) -> Any:
        from ag2net.agent.models import ModelResponse

        usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
        return ModelResponse("ok.", usage=usage)


def test_live_calls_count_their_tokens_and_cost_against_a_full_rerun(demo, monkeypatch):
    monkeypatch.setenv(
        "AG2NET_PRICES", json.dumps({"pricey-1": {"input": 2.0, "cached_input": 1.0, "output": 8.0}})
    )
    db, _ = demo
    (member,) = read_cohort(str(db), Selector(types=["conversation"]))
    variant = Variant("view", {"critic": WINDOW}, live=Priced())
    run = asyncio.run(evaluate([member], variant, [builtin("cost"), builtin("tokens")]))
    (outcome,) = run.outcomes
    assert outcome.live > 0 and sum(k.count("live") for k in outcome.marks.values()) == outcome.live
    assert (
        outcome.live_tokens == 1100 * outcome.live
    )  # the provider's figures, from the replayed turn records
    assert outcome.live_cost == pytest.approx(outcome.live * (1000 * 2.0 + 100 * 8.0) / 1_000_000)
    assert outcome.full_tokens > 0 and outcome.full_cost is None  # the scripted demo's model has no price
    cost = outcome.scores["cost"]
    assert (
        cost.score == pytest.approx(outcome.live_cost) and "against unknown for a full rerun" in cost.comment
    )
    assert run.totals()["live_cost"] == outcome.live_cost
    plain = asyncio.run(evaluate([member], Variant(), [builtin("cost")]))
    assert plain.outcomes[0].scores["cost"].score is None
    assert plain.outcomes[0].scores["cost"].comment.startswith("no cost recorded")
