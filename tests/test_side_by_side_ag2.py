"""Side by side: one ag2-style program, run on ``ag2`` 1.2.1 and on ``ag2net`` with only the import changed.

``tests/side_by_side/program.py`` is written the way an ``ag2.network`` user writes it (three agents on
one ``LocalLink``, consulting channels, a workflow with a custom transition target and condition, an
arbiter refusing a custom event type, a checkpointed task, a human, a failing model, the async getters).
It takes the network module's name as its argument and prints a JSON transcript with ids replaced by
labels. A second argument ``ws`` runs the same program over ``serve_ws`` / ``WsLink`` instead.

The ag2 run uses the interop virtualenv of ``test_ws_interop.py`` (skipped, saying why, only when that
environment cannot be built). The two transcripts must be equal, except that an error message may say
more on ag2net as long as it keeps ag2's words (the same exception class, ag2's message inside ours).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_ws_interop import ag2_python  # noqa: F401  (a fixture)

PROGRAM = Path(__file__).parent / "side_by_side" / "program.py"
RUN_TIMEOUT = 300


def run_program(python: Path | str, network: str, transport: str, cwd: Path) -> dict[str, Any]:
    """Runs the program under ``python`` with ``network`` as the module; returns its transcript."""
    done = subprocess.run(
        [str(python), str(PROGRAM), network, transport],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        cwd=cwd,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, (
        f"the program printed no transcript under {network} over {transport} (exit {done.returncode}); "
        "stderr ends:\n" + "\n".join(done.stderr.strip().splitlines()[-25:])
    )
    result = json.loads(lines[-1])
    result["exit_code"] = done.returncode
    result["stderr_tail"] = done.stderr.strip().splitlines()[-25:]
    return result


def short(value: Any, limit: int = 400) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_error(value: Any) -> bool:
    return isinstance(value, dict) and "class" in value and set(value) <= {"class", "message", "is_a"}


def words(message: str) -> str:
    """A refusal's words however a channel and a participant are quoted: ag2 says ``channel 'X' is
    closed`` and ``expects 'a' to speak``, ag2net names them bare (``X is closed``, ``expects a to
    speak``; docs/compatibility.md)."""
    return re.sub(r"\b(?:[\w.-]+ )?channel (?=')", "", message).replace("'", "")


def differences(theirs: Any, ours: Any, where: str = "") -> list[str]:
    """Every place where ag2net's transcript differs from ag2's (errors: same class, ag2's words kept)."""
    if is_error(theirs) and is_error(ours):
        found = []
        if theirs["class"] not in ours.get("is_a", [ours["class"]]):
            found.append(f"{where}: error class {ours['class']} is not a {theirs['class']} (ag2's)")
        if "message" in theirs and words(theirs["message"]) not in words(ours.get("message", "")):
            found.append(
                f"{where}: error message {ours.get('message')!r} does not contain ag2's {theirs['message']!r}"
            )
        return found
    if is_error(theirs) != is_error(ours):
        return [f"{where}: {short(ours)} (ag2: {short(theirs)})"]
    if isinstance(theirs, dict) and isinstance(ours, dict):
        found = []
        for key in list(theirs) + [k for k in ours if k not in theirs]:
            if key not in ours:
                found.append(f"{where}.{key}: missing (ag2: {short(theirs[key])})")
            elif key not in theirs:
                found.append(f"{where}.{key}: extra {short(ours[key])} (not in ag2's)")
            else:
                found += differences(theirs[key], ours[key], f"{where}.{key}")
        return found
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        found = []
        for index, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            found += differences(a, b, f"{where}[{index}]")
        return found
    if theirs != ours:
        return [f"{where}: {short(ours)} (ag2: {short(theirs)})"]
    return []


def transcript_differences(theirs: list[dict], ours: list[dict]) -> list[str]:
    mine = {record["step"]: record for record in ours}
    found = []
    for record in theirs:
        step = record["step"]
        if step not in mine:
            found.append(f"[{step}]: missing from ag2net's transcript")
            continue
        theirs_record, ours_record = record, mine.pop(step)
        if "crash" in ours_record and "crash" not in theirs_record:
            found.append(f"[{step}]: crashed on ag2net: {json.dumps(ours_record['crash'])}")
            continue
        found += differences(theirs_record, ours_record, f"[{step}]")
    found += [f"[{step}]: only in ag2net's transcript: {short(r)}" for step, r in mine.items()]
    return found


def test_differences_compares_errors_by_class_and_ag2s_words():
    ag2_error = {"class": "ProtocolError", "message": "channel 'c' is closed"}
    ours = {"class": "ProtocolError", "message": "channel 'c' is closed; open a new channel."}
    assert differences(ag2_error, ours) == []
    assert differences(ag2_error, {"class": "NetworkError", "message": ag2_error["message"]})
    assert differences(ag2_error, {"class": "ProtocolError", "message": "the channel is closed"})
    subclass = {
        "class": "FrameError",
        "message": "channel 'c' is closed",
        "is_a": ["FrameError", "ProtocolError"],
    }
    assert differences(ag2_error, subclass) == []  # ``except ProtocolError`` still catches it
    assert differences(ag2_error, {**subclass, "is_a": ["FrameError", "ValueError"]})
    assert differences({"a": [1, 2]}, {"a": [1, 3]}) == [".a[1]: 3 (ag2: 2)"]
    assert differences({"a": 1}, {"a": 1, "b": 2}) == [".b: extra 2 (not in ag2's)"]
    assert differences({"r": ag2_error}, {"r": {"step": 3}}) == [
        '.r: {"step": 3} (ag2: {"class": "ProtocolError", "message": "channel \'c\' is closed"})'
    ]
    assert transcript_differences([{"step": "x", "v": 1}], []) == ["[x]: missing from ag2net's transcript"]
    assert transcript_differences(
        [{"step": "x", "v": 1}], [{"step": "x", "crash": {"class": "TypeError", "message": "m"}}]
    ) == ['[x]: crashed on ag2net: {"class": "TypeError", "message": "m"}']


def side_by_side(python: Path, transport: str, cwd: Path) -> None:
    theirs = run_program(python, "ag2.network", transport, cwd)
    # ag2's run is the ground truth: it must have gone through every section without a crash.
    crashed = [r for r in theirs["transcript"] if "crash" in r]
    assert theirs["exit_code"] == 0 and not crashed, (crashed, theirs["stderr_tail"])
    assert theirs["transcript"][-1] == {"step": "closed", "ok": True}
    steps = [record["step"] for record in theirs["transcript"]]
    assert len(steps) == len(set(steps)), f"step names must be unique: {steps}"

    ours = run_program(sys.executable, "ag2net", transport, cwd)
    found = transcript_differences(theirs["transcript"], ours["transcript"])
    if ours["exit_code"] != 0:
        found.append(f"ag2net's run exited {ours['exit_code']}: " + " | ".join(ours["stderr_tail"]))
    assert not found, f"ag2net differs from ag2 1.2.1 on the same program ({transport}):\n" + "\n".join(found)


def test_the_same_program_gives_the_same_transcript_on_ag2_and_ag2net(ag2_python, tmp_path):  # noqa: F811
    side_by_side(ag2_python, "local", tmp_path)


def test_the_same_program_over_websockets_gives_the_same_transcript(ag2_python, tmp_path):  # noqa: F811
    side_by_side(ag2_python, "ws", tmp_path)
