"""``ag2net eval``: replay a cohort of recorded channels under one change, score them, gate CI on a baseline.

``ag2net/cli/commands.py`` mounts ``app`` (a Typer app with exactly this one command) by name, as it does
``ag2net mcp``: this module imports ``ag2net.cli``'s helpers, so ``ag2net.cli`` must not import it (no import
circle between the packages). Every mistake is one sentence on stderr and exit code 2; a regression with
``--fail-on-regression`` is exit code 1. The database is read once, read-only, before anything runs.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.cli.replay import (
    SystemChanges,
    ToolChanges,
    ViewChanges,
    parse_model,
    parse_params,
    parse_tool_policy,
    parse_view,
)
from ag2net.cli.support import ReadOnlyDb, UsageProblem, fail, import_user_module
from ag2net.eval.cohort import Member, Selector, parse_fork_at, read_cohort
from ag2net.eval.run import EvalRun, compare_runs, load_run
from ag2net.eval.scorers import BUILTINS, Scorer, find_builtin, scorer
from ag2net.eval.variant import Variant

app = typer.Typer(add_completion=False)


def _pair(option: str, text: str, example: str) -> tuple[str, str]:
    agent, eq, rest = text.partition("=")
    if not eq or not agent.strip() or not rest.strip():
        raise UsageProblem(f"{option} {text!r} must look like {example}")
    return agent.strip(), rest.strip()


def _read_text(option: str, text: str, file: str) -> str:
    try:
        return Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageProblem(
            f"{option} {text!r}: cannot read {file!r} ({reason}); give a UTF-8 text file"
        ) from None


def parse_axis(options: dict[str, list[str]]) -> tuple[str | None, dict[str, Any]]:
    """The one axis the options change and ``{agent: value}``; ``UsageProblem`` for two axes."""
    given = [name for name, values in options.items() if values]
    if len(given) > 1:
        raise UsageProblem(
            f"an evaluation varies one axis; got {' and '.join('--' + g.replace('_', '-') for g in given)}: "
            "run one evaluation per axis"
        )
    if not given:
        return None, {}
    axis = given[0]
    changes: dict[str, Any] = {}
    for text in options[axis]:
        if axis == "tool":
            target, eq, spec = text.partition("=")
            agent, dot, tool = target.strip().rpartition(".")
            if not eq or not dot or not agent or not tool or not spec.strip():
                raise UsageProblem(f"--tool {text!r} must look like AGENT.TOOL=recorded|live|static:JSON")
            changes.setdefault(agent, {})[tool] = parse_tool_policy(spec, where=f"--tool {text!r}")
            continue
        agent, rest = _pair(f"--{axis.replace('_', '-')}", text, f"AGENT={_EXAMPLES[axis]}")
        if axis == "view":
            name, _, params = rest.partition(":")
            changes[agent] = parse_view(
                name, parse_params(params, where=f"--view {text!r}"), where=f"--view {text!r}"
            )
        elif axis == "model":
            model = parse_model(rest, where=f"--model {text!r}")
            if model is None:
                raise UsageProblem(
                    f"--model {text!r}: replay is no change; give scripted[:TEXT] or openai:NAME"
                )
            changes[agent] = model
        elif axis in ("system", "skill"):
            changes[agent] = _read_text(f"--{axis}", text, rest)
        elif axis == "attach_plugin":
            if rest.lower() not in ("true", "false"):
                raise UsageProblem(f"--attach-plugin {text!r} must look like AGENT=true or AGENT=false")
            changes[agent] = rest.lower() == "true"
    return axis, changes


_EXAMPLES = {
    "view": "NAME[:k=v,...]",
    "model": "scripted[:TEXT]|openai:NAME",
    "system": "FILE",
    "skill": "FILE",
    "attach_plugin": "true|false",
}


def parse_live(texts: list[str]) -> Any:
    """``--live MODEL`` (every agent) or ``--live AGENT=MODEL``: the model of turns no recording answers."""
    live: dict[str, Any] = {}
    for text in texts:
        agent, eq, spec = text.partition("=")
        key, spec = (agent.strip(), spec) if eq else ("*", text)
        model = parse_model(spec, where=f"--live {text!r}")
        if model is None:
            raise UsageProblem(
                f"--live {text!r}: give scripted[:TEXT] or openai:NAME (replay is the default)"
            )
        live[key] = model
    return live or None


def load_scorer(spec: str, judge_model: Any) -> Scorer:
    """A built-in scorer, or ``module:function`` (a ``@scorer`` or a plain function) from the current folder."""
    try:
        found = find_builtin(spec, judge_model=judge_model)
    except ValueError as exc:
        raise UsageProblem(f"--scorer {spec!r}: {exc}") from None
    if found is not None:
        return found
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise UsageProblem(f"--scorer {spec!r} is neither a built-in ({BUILTINS}) nor module:function")
    module = import_user_module(module_name, f"--scorer {spec!r}:")
    fn = getattr(module, attr, None)
    if isinstance(fn, Scorer):
        return fn
    if not callable(fn):
        raise UsageProblem(f"--scorer {spec!r}: module {module_name!r} has no function {attr!r}")
    return scorer(fn)


def _check_agents(members: list[Member], changes: dict[str, Any], axis: str) -> None:
    names = {m.source.name_for(p) for m in members for p in m.source.metadata.participant_ids()}
    for agent in changes:
        if agent not in names:
            raise UsageProblem(
                f"--{axis.replace('_', '-')}: {agent!r} takes part in none of the {len(members)} selected channel(s) "
                f"(their agents: {', '.join(sorted(names))})"
            )


def _selector(types, since, until, participant, label, tag, channel, failed, limit) -> Selector:
    labels = {}
    for text in label or []:
        key, eq, value = text.partition("=")
        if not eq or not key.strip():
            raise UsageProblem(f"--label {text!r} must look like KEY=VALUE, e.g. intent=pairing")
        labels[key.strip()] = value.strip()
    pair = None
    if failed is not None:
        key, at, run = failed.rpartition("@")
        if not at or not key or not run:
            raise UsageProblem(f"--failed {failed!r} must look like SCORER@RUN.json")
        pair = (key, run)
    if limit is not None and limit < 1:
        raise UsageProblem(f"--limit must be 1 or more, got {limit}")
    return Selector(
        list(types or []),
        since,
        until,
        list(participant or []),
        labels,
        list(tag or []),
        list(channel or []),
        pair,
        limit,
    )


def _progress_run(
    members: list[Member], variant: Variant, scorers: list[Scorer], settings: Any, source: str
) -> EvalRun:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ag2net.eval.runner import evaluate

    console = Console(stderr=True)
    columns = (
        TextColumn("[bold]eval[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=not console.is_terminal) as bar:
        task = bar.add_task(variant.name[:40], total=len(members))

        def step(done: int, total: int, outcome: Any) -> None:
            bar.update(task, completed=done)

        return asyncio.run(
            evaluate(members, variant, scorers, settings=settings, progress=step, source=source)
        )


@app.command("eval")
def eval_cmd(
    db: ReadOnlyDb,
    channel_type: Annotated[
        list[str] | None, typer.Option("--type", help="Channels of this type (repeat for several).")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Channels created at or after this time (ISO-8601 UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Channels created at or before this time (a prefix: 2026-12-02).")
    ] = None,
    participant: Annotated[
        list[str] | None, typer.Option(help="Channels this agent takes part in (repeat: all of them).")
    ] = None,
    label: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE: channels with this label, e.g. intent=pairing.")
    ] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option(help="Channels with this tag (a label key, or a word of the tags label)."),
    ] = None,
    channel: Annotated[
        list[str] | None, typer.Option(help="This channel (label, id's last digits or id; repeat).")
    ] = None,
    failed: Annotated[
        str | None, typer.Option(help="SCORER@RUN.json: the channels that scorer failed in that run.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many channels (the first ones).")] = None,
    view: ViewChanges = None,
    model: Annotated[
        list[str] | None, typer.Option(help="AGENT=scripted[:TEXT]|openai:NAME: the model axis.")
    ] = None,
    system: SystemChanges = None,
    attach_plugin: Annotated[
        list[str] | None, typer.Option(help="AGENT=true|false: the attach_plugin axis.")
    ] = None,
    skill: Annotated[list[str] | None, typer.Option(help="AGENT=FILE: the skill card axis.")] = None,
    tool: ToolChanges = None,
    live: Annotated[
        list[str] | None,
        typer.Option(
            help="[AGENT=]scripted[:TEXT]|openai:NAME: the model a turn no recording answers calls."
        ),
    ] = None,
    scorer_spec: Annotated[
        list[str] | None, typer.Option("--scorer", help=f"A scorer: {BUILTINS}, or module:function (repeat).")
    ] = None,
    judge_model: Annotated[
        str | None, typer.Option(help="The model of --scorer judge: scripted[:TEXT] or openai:NAME.")
    ] = None,
    fork_at: Annotated[
        str | None,
        typer.Option(
            help="Fork after the first envelope of type:EVENT_TYPE or sender:NAME (default: the first substantive one)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Replay at most this many channels at once.")] = 4,
    timeout: Annotated[float, typer.Option(help="Seconds each channel's replay may take.")] = 60.0,
    turns: Annotated[
        int, typer.Option("--turns", help="Stop each channel's replay after this many turns.")
    ] = 200,
    out: Annotated[
        Path | None, typer.Option(help="Save the run as JSON (AG2's ag2.eval.load_run reads it).")
    ] = None,
    baseline: Annotated[Path | None, typer.Option(help="A saved run to compare with.")] = None,
    fail_on_regression: Annotated[
        bool, typer.Option(help="Exit 1 when a channel flipped pass→fail against --baseline.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run (and the comparison) as one JSON object.")
    ] = False,
    markdown: Annotated[
        Path | None, typer.Option(help="Write a Markdown report to this file (for CI logs).")
    ] = None,
) -> None:
    """Replay recorded channels under one change (a view, model, prompt, plugin, skill or tool policy), score them."""
    from ag2net.eval.report import json_report, markdown_report, text_report
    from ag2net.eval.runner import Settings

    try:
        if concurrency < 1:
            raise UsageProblem(f"--concurrency must be 1 or more, got {concurrency}")
        if turns < 1:
            raise UsageProblem(f"--turns must be 1 or more, got {turns}")
        if not timeout > 0:
            raise UsageProblem(f"--timeout must be more than 0 seconds, got {timeout}")
        if fail_on_regression and baseline is None:
            raise UsageProblem("--fail-on-regression compares with a baseline; add --baseline RUN.json")
        axis, changes = parse_axis(
            {
                "view": view or [],
                "model": model or [],
                "system": system or [],
                "attach_plugin": attach_plugin or [],
                "skill": skill or [],
                "tool": tool or [],
            }
        )
        judge = parse_model(judge_model, where=f"--judge-model {judge_model!r}") if judge_model else None
        scorers = [load_scorer(s, judge) for s in scorer_spec or []]
        if not scorers:
            raise UsageProblem(f"give at least one --scorer ({BUILTINS}, or module:function)")
        base = None
        if baseline is not None:
            try:
                base = load_run(baseline)
            except ValueError as exc:
                raise UsageProblem(f"--baseline: {exc}") from None
        selector = _selector(channel_type, since, until, participant, label, tag, channel, failed, limit)
        settings = Settings(
            fork_at=parse_fork_at(fork_at),
            timeout=timeout,
            step_timeout=min(10.0, timeout),
            turn_budget=turns,
            concurrency=concurrency,
        )
        members = read_cohort(db, selector)
        if axis is not None:
            _check_agents(members, changes, axis)
        variant = Variant(axis, changes, live=parse_live(live or []))
        run = _progress_run(members, variant, scorers, settings, db if "://" not in db else db.split("@")[-1])
    except UsageProblem as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    diff = compare_runs(run, base) if base is not None else None
    if out is not None:
        run.save(out)
    if markdown is not None:
        markdown.write_text(markdown_report(run, diff), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(json_report(run, diff), ensure_ascii=False, default=str))
    else:
        for line in text_report(run, diff):
            typer.echo(line)
    if fail_on_regression and diff is not None and diff.regressions:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
