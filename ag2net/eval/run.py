"""Runs: an evaluation's outcomes saved as the JSON AG2's ``ag2.eval.load_run`` reads (schema 0.2), and the
comparison against a baseline run that a CI gate reads.

``EvalRun.to_dict()`` writes AG2 1.2.1's run shape (``schema_version``, ``run_id``, ``label``,
``created_at``, ``duration_ms``, ``suite``, ``target``, ``concurrency``, ``tasks``, ``aggregates``): one
task per channel, ``task_id`` its channel id, ``inputs`` what identifies the channel (its id, label and type:
the same in every run over it, so AG2's ``RunDiff`` finds the runs comparable), ``metadata`` what the
replay did (the fork seq, the verdict, live calls and tokens, per agent ``recorded``/``live`` per turn),
``feedback`` one entry per scorer (``key``, ``score``, ``comment``). No ag2 import: the shape is written
here. ``run_id`` is a digest of the run's content, so two runs that scored the same give the same id;
``created_at`` and the durations are the only wall-clock fields.

``compare_runs(current, baseline)`` lines the runs up by channel: per scorer the pass rate or mean before
and after, and the channels that flipped pass→fail (the regressions) or fail→pass.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_VERSION = "0.2"


@dataclass(slots=True)
class Outcome:
    """One channel's replay and scores (``scores``: scorer key → ``Score``, or None when it was not scored)."""

    channel_id: str
    label: str
    channel_type: str
    at_seq: int = 0
    verdict: str = ""
    identical: bool = False
    turns: int = 0
    live: int = 0
    live_tokens: int = 0
    full_tokens: int = 0
    live_cost: float | None = None
    full_cost: float | None = None
    marks: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    duration_ms: int = 0

    def fill(self, replayed: Any) -> None:
        """Keep the figures of a replay (not the replay itself: a cohort's memory stays bounded)."""
        self.at_seq, self.verdict, self.identical = replayed.at_seq, replayed.verdict, replayed.identical
        self.turns, self.live, self.marks = len(replayed.turns), replayed.live, replayed.marks
        self.live_tokens, self.full_tokens = replayed.live_tokens, replayed.full_tokens
        self.live_cost, self.full_cost = replayed.live_cost, replayed.full_cost

    def passed(self, key: str) -> bool | None:
        score = self.scores.get(key)
        value = getattr(score, "score", None)
        return value if isinstance(value, bool) else None

    def task(self) -> dict[str, Any]:
        feedback = []
        for key, score in self.scores.items():
            feedback.append(
                {
                    "key": key,
                    "score": getattr(score, "score", None),
                    "value": None,
                    "comment": getattr(score, "comment", None) or None,
                    "detail": None,
                }
            )
        return {
            "task_id": self.channel_id,
            "inputs": {"channel_id": self.channel_id, "channel": self.label, "type": self.channel_type},
            "reference_outputs": None,
            "tags": [self.channel_type],
            "metadata": {
                "at_seq": self.at_seq,
                "verdict": self.verdict,
                "identical": self.identical,
                "turns": self.turns,
                "live_calls": self.live,
                "live_tokens": self.live_tokens,
                "full_rerun_tokens": self.full_tokens,
                "live_cost": self.live_cost,
                "full_rerun_cost": self.full_cost,
                "answered": self.marks,
            },
            "duration_ms": self.duration_ms,
            "events": [],
            "exception": None if self.error is None else _exception(self.error),
            "tokens": {"input": self.live_tokens, "output": 0, "cache_creation": 0, "cache_read": 0},
            "feedback": feedback,
            "budget_violation": False,
            "trace_ref": None,
        }

    @classmethod
    def from_task(cls, task: dict[str, Any]) -> Outcome:
        from ag2net.eval.scorers import Score

        inputs, meta = task.get("inputs") or {}, task.get("metadata") or {}
        exc = task.get("exception")
        return cls(
            channel_id=str(task.get("task_id")),
            label=str(inputs.get("channel") or task.get("task_id")),
            channel_type=str(inputs.get("type") or ""),
            at_seq=int(meta.get("at_seq") or 0),
            verdict=str(meta.get("verdict") or ""),
            identical=bool(meta.get("identical")),
            turns=int(meta.get("turns") or 0),
            live=int(meta.get("live_calls") or 0),
            live_tokens=int(meta.get("live_tokens") or 0),
            full_tokens=int(meta.get("full_rerun_tokens") or 0),
            live_cost=meta.get("live_cost"),
            full_cost=meta.get("full_rerun_cost"),
            marks=dict(meta.get("answered") or {}),
            scores={
                f["key"]: Score(f.get("score"), f.get("comment") or "") for f in task.get("feedback") or []
            },
            error=None if not exc else f"{exc.get('type')}: {exc.get('message')}",
            duration_ms=int(task.get("duration_ms") or 0),
        )


def _exception(error: str) -> dict[str, str]:
    kind, _, message = error.partition(": ")
    return {"type": kind, "message": message}


@dataclass(slots=True)
class EvalRun:
    """The outcomes of one variant over a cohort, in the cohort's order."""

    variant: str
    axis: str
    outcomes: list[Outcome]
    scorers: list[str]
    source: str = ""
    concurrency: int = 1
    created_at: str = ""
    duration_ms: int = 0

    @property
    def run_id(self) -> str:
        body = json.dumps(
            [self.variant, [(o.channel_id, o.task()["feedback"], o.error) for o in self.outcomes]],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(body.encode()).hexdigest()[:32]

    def pass_rate(self, key: str) -> float | None:
        verdicts = [v for o in self.outcomes if (v := o.passed(key)) is not None]
        return sum(verdicts) / len(verdicts) if verdicts else None

    def mean(self, key: str) -> float | None:
        nums = [v for o in self.outcomes if (v := _number(o.scores.get(key))) is not None]
        return sum(nums) / len(nums) if nums else None

    def totals(self) -> dict[str, Any]:
        return {
            "channels": len(self.outcomes),
            "errors": sum(1 for o in self.outcomes if o.error),
            "turns": sum(o.turns for o in self.outcomes),
            "live_calls": sum(o.live for o in self.outcomes),
            "live_tokens": sum(o.live_tokens for o in self.outcomes),
            "full_rerun_tokens": sum(o.full_tokens for o in self.outcomes),
            "live_cost": _total([o.live_cost for o in self.outcomes]),
            "full_rerun_cost": _total([o.full_cost for o in self.outcomes]),
        }

    def to_dict(self) -> dict[str, Any]:
        tasks = [o.task() for o in self.outcomes]
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "label": self.variant,
            "created_at": self.created_at,
            "duration_ms": self.duration_ms,
            "suite": {
                "name": f"ag2net cohort ({self.axis or 'no change'})",
                "size": len(tasks),
                "source": self.source,
            },
            "target": "ag2net.eval:replay",
            "concurrency": self.concurrency,
            "tasks": tasks,
            "aggregates": self._aggregates(),
        }

    def _aggregates(self) -> dict[str, Any]:
        pass_rate = {k: r for k in self.scorers if (r := self.pass_rate(k)) is not None}
        stats = {}
        for key in self.scorers:
            nums = sorted(v for o in self.outcomes if (v := _number(o.scores.get(key))) is not None)
            if nums:
                stats[key] = {
                    "mean": sum(nums) / len(nums),
                    "p50": _pct(nums, 0.5),
                    "p95": _pct(nums, 0.95),
                    "n": len(nums),
                }
        live = self.totals()["live_tokens"]
        return {
            "pass_rate": pass_rate,
            "score_stats": stats,
            "value_counts": {},
            "tokens": {"input": live, "output": 0, "total": live},
            "errors": self.totals()["errors"],
            "budget_violations": 0,
        }

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=str), encoding="utf-8"
        )
        return target

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> EvalRun:
        outcomes = [Outcome.from_task(t) for t in doc.get("tasks") or []]
        keys = list(dict.fromkeys(k for o in outcomes for k in o.scores))
        suite = doc.get("suite") or {}
        axis = str(suite.get("name") or "").partition("(")[2].rstrip(")")
        return cls(
            variant=str(doc.get("label") or ""),
            axis="" if axis == "no change" else axis,
            outcomes=outcomes,
            scorers=keys,
            source=str(suite.get("source") or ""),
            concurrency=int(doc.get("concurrency") or 1),
            created_at=str(doc.get("created_at") or ""),
            duration_ms=int(doc.get("duration_ms") or 0),
        )


def load_run(path: str | Path) -> EvalRun:
    """A run saved by ``EvalRun.save`` (or any AG2 run JSON with channel tasks); ``ValueError`` in one
    sentence when the file is not one."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise ValueError(f"cannot read the run file {str(path)!r} ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ValueError(f"the run file {str(path)!r} is not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        raise ValueError(
            f"the run file {str(path)!r} is not a run (no tasks list); give a file `ag2net eval --out` wrote"
        )
    return EvalRun.from_dict(doc)


def _numeric(score: Any) -> bool:
    value = getattr(score, "score", None)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _total(values: list[float | None]) -> float | None:
    """The sum of the values recorded (None when none was)."""
    known = [v for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _number(score: Any) -> float | None:
    return float(score.score) if _numeric(score) else None


def _pct(values: list[float], p: float) -> float:
    if len(values) == 1:
        return values[0]
    rank = p * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (rank - low) * (values[high] - values[low])


# ----------------------------------------------------------------------------------------- comparison


@dataclass(slots=True)
class Flip:
    key: str
    channel_id: str
    label: str
    before: str
    after: str


@dataclass(slots=True)
class RunComparison:
    """``current`` against ``baseline`` over the channels both scored (see the module docstring)."""

    current: EvalRun
    baseline: EvalRun
    shared: list[str]
    moves: dict[str, tuple[str, float, float]]  # key → ("pass rate" | "mean", before, after)
    regressions: list[Flip]
    improvements: list[Flip]
    only_current: list[str]
    only_baseline: list[str]


def compare_runs(current: EvalRun, baseline: EvalRun) -> RunComparison:
    cur = {o.channel_id: o for o in current.outcomes}
    base = {o.channel_id: o for o in baseline.outcomes}
    shared = [c for c in cur if c in base]
    keys = [k for k in current.scorers if k in baseline.scorers]
    moves: dict[str, tuple[str, float, float]] = {}
    regressions: list[Flip] = []
    improvements: list[Flip] = []
    for key in keys:
        b = [v for c in shared if (v := base[c].passed(key)) is not None]
        a = [v for c in shared if (v := cur[c].passed(key)) is not None]
        if a or b:
            moves[key] = ("pass rate", sum(b) / len(b) if b else 0.0, sum(a) / len(a) if a else 0.0)
        else:
            bn = [float(base[c].scores[key].score) for c in shared if _numeric(base[c].scores.get(key))]
            an = [float(cur[c].scores[key].score) for c in shared if _numeric(cur[c].scores.get(key))]
            if an or bn:
                moves[key] = ("mean", sum(bn) / len(bn) if bn else 0.0, sum(an) / len(an) if an else 0.0)
        for c in shared:
            was, now = base[c].passed(key), cur[c].passed(key)
            if was is True and now is False:
                regressions.append(_flip(key, cur[c], base[c]))
            elif was is False and now is True:
                improvements.append(_flip(key, cur[c], base[c]))
    return RunComparison(
        current, baseline, shared, moves, regressions, improvements,
        [c for c in cur if c not in base], [c for c in base if c not in cur],
    )  # fmt: skip


def _flip(key: str, now: Outcome, was: Outcome) -> Flip:
    return Flip(key, now.channel_id, now.label, was.scores[key].comment, now.scores[key].comment)


__all__ = ["SCHEMA_VERSION", "EvalRun", "Flip", "Outcome", "RunComparison", "compare_runs", "load_run"]
