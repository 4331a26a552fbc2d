"""Multi-agent logs: Who&When conversation histories and MAST trace records."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson

from annotate.imports.parsed import ImportFileError, clean_json, clean_text
from annotate.models import StepKind, StepStatus
from annotate.traces.parsed import NAME_LIMIT, Step, TraceRecord, _int, _record, _short, _text
from lib import safejson

# ------------------------------------------------------------------ Who&When

_ROLE_ARROW = re.compile(r"^(?P<agent>.*?)\s*\(\s*->\s*(?P<to>[^)]*)\)\s*$")
_ROLE_NOTE = re.compile(r"^(?P<agent>.*?)\s*\((?P<note>[^)]*)\)\s*$")
_CODE_BLOCK = re.compile(r"```")
_TERMINAL_NAMES = {"computer_terminal"}


def _whowhen_agent(entry: dict) -> tuple[str, str, str]:
    """(agent, kind, name) of a history entry: Algorithm-Generated logs name the agent in `name`;
    Hand-Crafted (Magentic-One) logs put it in `role`, as "Orchestrator (thought)" or
    "Orchestrator (-> WebSurfer)", the latter a handoff."""
    name = str(entry.get("name") or "").strip()
    role = str(entry.get("role") or "").strip()
    if name:
        return name, StepKind.MESSAGE, role if role not in ("assistant", "user") else ""
    arrow = _ROLE_ARROW.match(role)
    if arrow:
        return arrow["agent"].strip(), StepKind.HANDOFF, f"→ {arrow['to'].strip()}"
    note = _ROLE_NOTE.match(role)
    if note:
        return note["agent"].strip(), StepKind.MESSAGE, note["note"].strip()
    return role, StepKind.MESSAGE, ""


def _conversation_steps(history: list, where: str) -> list[Step]:
    steps: list[Step] = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise ImportFileError(f"{where}: history[{i}] must be an object with content, role and name")
        if "content" not in entry:
            raise ImportFileError(f"{where}: history[{i}] has no content")
        agent, kind, name = _whowhen_agent(entry)
        step = Step(index=i, agent=agent[:200], kind=kind, name=name[:NAME_LIMIT], output=_text(entry["content"]))
        # Code a conversational agent wrote, run by a terminal agent: a tool call and its result.
        if agent.lower() in _TERMINAL_NAMES and steps:
            prev = steps[-1]
            if prev.kind == StepKind.MESSAGE and _CODE_BLOCK.search(prev.output):
                prev.kind, prev.paired_index, prev.ran = StepKind.TOOL_CALL, i, True
                # What the agent wrote is the call (the code to run); the terminal's answer is its result.
                prev.input, prev.output = prev.output, ""
                prev.name = prev.name or "code execution"
                step.kind, step.paired_index = StepKind.TOOL_RESULT, prev.index
                if "exitcode: 1" in step.output or "execution failed" in step.output:
                    step.status = StepStatus.ERROR
        steps.append(step)
    return steps


def parse_whowhen(data: Any, where: str) -> TraceRecord:
    """A Who&When log: `history` of {content, role, name} plus question, ground_truth and the
    published attribution (mistake_agent, mistake_step, mistake_reason). Optional fields vary
    between files (is_correct or is_corrected, system_prompt, level, mistake_type, question_ID)."""
    if not isinstance(data, dict):
        raise ImportFileError(f"{where}: a Who&When log must be a JSON object")
    history = data.get("history")
    if not isinstance(history, list) or not history:
        raise ImportFileError(f"{where}: a Who&When log needs a non-empty 'history' list")
    steps = _conversation_steps(history, where)
    question = _text(data.get("question"))
    qid = str(data.get("question_ID") or data.get("question_id") or "").strip()
    digest = hashlib.sha256(orjson.dumps(history, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
    # The two published subsets share question ids; the log itself tells them apart.
    external_id = f"whowhen:{qid}:{digest}" if qid else f"whowhen:{digest}"
    subset = "algorithm-generated" if "system_prompt" in data or "is_correct" in data else "hand-crafted"
    correct = data.get("is_correct", data.get("is_corrected"))
    meta = {
        "question": question[:5000],
        "ground_truth": _text(data.get("ground_truth"))[:5000],
        "level": str(data.get("level") or ""),
        "is_correct": correct if isinstance(correct, bool) else None,
        "subset": subset,
        "question_id": qid,
    }
    reference: dict[str, Any] = {}
    if data.get("mistake_agent") not in (None, "") or data.get("mistake_step") not in (None, ""):
        step = data.get("mistake_step")
        step = _int(step, "mistake_step", where) if step not in (None, "") else None
        if step is not None and step >= len(steps):
            raise ImportFileError(f"{where}: mistake_step {step} is past the end of history ({len(steps)} entries)")
        reference = {
            "source": "who&when",
            "agent": str(data.get("mistake_agent") or "")[:200],
            "step": step,
            "reason": _text(data.get("mistake_reason"))[:5000],
            "mistake_type": str(data.get("mistake_type") or ""),
        }
    raw = {k: v for k, v in data.items() if k not in ("history", "system_prompt")}
    if isinstance(data.get("system_prompt"), dict):
        raw["system_prompt_agents"] = sorted(data["system_prompt"])
    head = f"Question: {question}" if question else ""
    record = _record(
        fmt="whowhen",
        external_id=external_id,
        cluster=f"who&when:{subset}",
        title=_short(question) or external_id,
        steps=steps,
        meta=meta,
        raw=raw,
        head=head,
    )
    return TraceRecord(record, steps, clean_json(reference))


# ------------------------------------------------------------------ MAST

_LOGURU = re.compile(
    r"^\d{4}-\d{2}-\d{2} [\d:.]+ \| \w+\s*\| [^\n]*? - (?P<who>[^\n:]+?): (?P<what>[^\n]*)$", re.MULTILINE
)
_COMM_FROM = re.compile(r"^\[[^\]]+\] FROM: (?P<who>[^\n]+?) TO: ", re.MULTILINE)
_COMM_NEW = re.compile(r"^\[[^\]]+\] NEW MESSAGES:\s*\n\s*\n(?P<who>[A-Za-z0-9_ .-]+):", re.MULTILINE)
_DASHES = re.compile(r"\n-{20,}\n")


def _log_steps(text: str) -> list[Step]:
    """Steps of a plain-text multi-agent log (MetaGPT's loguru lines or its communication log);
    a log of neither shape is one step, so nothing is lost."""
    heads = list(_LOGURU.finditer(text))
    if heads:
        steps = []
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            body = text[m.end() : end].strip("\n")
            steps.append(
                Step(
                    index=i,
                    agent=m["who"].strip()[:200],
                    kind=StepKind.MESSAGE,
                    name=m["what"].strip()[:NAME_LIMIT],
                    output=clean_text(body),
                )
            )
        return steps
    blocks = [b for b in _DASHES.split(text) if b.strip()]
    if len(blocks) > 1:
        steps = []
        for i, block in enumerate(blocks):
            m = _COMM_FROM.search(block) or _COMM_NEW.search(block)
            steps.append(
                Step(
                    index=i,
                    agent=(m["who"].strip() if m else "")[:200],
                    kind=StepKind.MESSAGE,
                    output=clean_text(block.strip("\n")),
                )
            )
        return steps
    return [Step(index=0, kind=StepKind.MESSAGE, output=clean_text(text))]


def _mast_modes(annotations: Any, where: str) -> list[dict]:
    if annotations in (None, ""):
        return []
    if not isinstance(annotations, list):
        raise ImportFileError(f"{where}: annotations must be a list")
    modes = []
    for n, a in enumerate(annotations):
        if not isinstance(a, dict):
            raise ImportFileError(f"{where}: annotations[{n}] must be an object")
        label = str(a.get("failure mode") or a.get("failure_mode") or "").strip()
        votes = {k: v for k, v in a.items() if k.startswith("annotator")}
        yes = sum(1 for v in votes.values() if v is True)
        if yes:
            modes.append({"mode": label.split("\n")[0].strip(), "yes": yes, "of": len(votes)})
    return modes


def parse_mast(data: Any, where: str) -> TraceRecord:
    """A MAST record: `trace` holds a JSON string with a `trajectory` of {content, role, name}
    (AG2), or a MetaGPT log as text (in `content`, or as the whole string); `annotations`
    lists failure modes with each annotator's yes/no."""
    if not isinstance(data, dict) or "trace" not in data:
        raise ImportFileError(f"{where}: a MAST record must be an object with a 'trace'")
    trace = data["trace"]
    parsed: Any = trace
    if isinstance(trace, str):
        try:
            parsed = safejson.loads(trace, allow_nul=True)
        except safejson.JSONError:
            parsed = trace
    meta = {k: data.get(k) for k in ("round", "mas_name", "benchmark_name", "trace_id") if data.get(k) is not None}
    raw: dict[str, Any] = {"mas": meta}
    title = ""
    if isinstance(parsed, dict) and isinstance(parsed.get("trajectory"), list):
        steps = _conversation_steps(parsed["trajectory"], where)
        problem = parsed.get("problem_statement")
        title = _text(problem)
        raw["instance_id"] = parsed.get("instance_id")
        raw["other_data"] = parsed.get("other_data")
    elif isinstance(parsed, dict) and isinstance(parsed.get("content"), str):
        steps = _log_steps(parsed["content"])
        title = _text(parsed.get("prompt"))
        raw["run"] = {k: parsed.get(k) for k in ("run_id", "timestamp", "cost", "log_file")}
    elif isinstance(parsed, str):
        steps = _log_steps(parsed)
    else:
        raise ImportFileError(f"{where}: 'trace' must be text or JSON with a 'trajectory' list or 'content' text")
    modes = _mast_modes(data.get("annotations"), where)
    reference = {"source": "mast", "failure_modes": modes, "agent": "", "step": None} if data.get("annotations") else {}
    key = ":".join(str(meta.get(k, "")) for k in ("mas_name", "benchmark_name", "round", "trace_id"))
    external_id = (
        f"mast:{key}"
        if meta.get("trace_id") is not None
        else "mast:" + hashlib.sha256(str(trace).encode()).hexdigest()[:16]
    )
    name = f"{meta.get('mas_name', 'MAST')} · {meta.get('benchmark_name', '')} · trace {meta.get('trace_id', '?')}"
    record = _record(
        fmt="mast",
        external_id=external_id,
        cluster=str(meta.get("mas_name") or "mast"),
        title=f"{name}: {_short(title)}" if title else name,
        steps=steps,
        meta=meta,
        raw=raw,
    )
    return TraceRecord(record, steps, reference)
