"""The built-in brain's command language: one command per line of the prompt.

It exists so that trio-cap's own agent is useful with no script at all — as a
demo and as a deterministic test agent for anyone's orchestrator::

    write PATH: TEXT        Write tool (needs write permission); "\\n" in TEXT is a newline
    run: COMMAND            Bash tool in the cwd (needs execute permission)
    ask: QUESTION [a|b|c]   an ask, with options
    plan: step; step        a plan, sent again with every step completed when the
                            prompt's other commands are done (cap.plan is full state)
    think: TEXT             a thought
    wait N                  a long turn of N seconds that a cancel interrupts
    fail: CODE              a cap.error that fails the turn
    fail: CODE retry_after=N  … saying when to try again (as a rate-limited API does)

Any other line is answered with a short reply that quotes it.
"""

from __future__ import annotations

import re

from trio_cap.actors.agent.steps import (
    Ask,
    Fail,
    PlanItem,
    PlanStep,
    Run,
    Say,
    Step,
    Think,
    Wait,
    Write,
)

_WRITE = re.compile(r"^write\s+(?P<path>[^:]+?)\s*:\s?(?P<text>.*)$", re.S)
_VERB = re.compile(r"^(?P<verb>run|ask|plan|think|fail)\s*:\s*(?P<rest>.*)$", re.S)
_WAIT = re.compile(r"^wait\s*:?\s*(?P<n>\d+(?:\.\d+)?)\s*s?$")
_RETRY_AFTER = re.compile(r"\bretry_after\s*=\s*(?P<n>\d+(?:\.\d+)?)")
_OPTIONS = re.compile(r"^(?P<q>.*?)\s*\[(?P<opts>[^\[\]]*\|[^\[\]]*)\]\s*$")

HELP = (
    'commands: "write PATH: TEXT", "run: COMMAND", "ask: QUESTION [a|b]", '
    '"plan: a; b", "think: TEXT", "wait N", "fail: CODE"'
)


def parse_line(line: str) -> Step | None:
    """The step for one command line, or None when the line is not a command."""
    text = line.strip()
    if m := _WRITE.match(text):
        body = m["text"].replace("\\n", "\n")
        return Write(write=m["path"].strip(), content=body + "\n")
    if m := _WAIT.match(text):
        return Wait(wait=float(m["n"]))
    m = _VERB.match(text)
    if m is None:
        return None
    verb, rest = m["verb"], m["rest"].strip()
    if verb == "run":
        return Run(run=rest) if rest else None
    if verb == "think":
        return Think(think=rest)
    if verb == "plan":
        items = [part.strip() for part in rest.split(";") if part.strip()]
        return PlanStep(plan=[PlanItem(content=item) for item in items])
    if verb == "fail":
        code = rest.split()[0] if rest else "internal_error"
        after = _RETRY_AFTER.search(rest)
        return Fail(fail=code, message=f"scripted failure: {rest or code}",
                    retry_after=float(after["n"]) if after else None)
    if o := _OPTIONS.match(rest):
        options = [opt.strip() for opt in o["opts"].split("|") if opt.strip()]
        return Ask(ask=o["q"], options=options)
    return Ask(ask=rest)


def parse_prompt(prompt: str) -> list[Step]:
    """Every command line in order; a prompt with none gets a quoting reply."""
    steps: list[Step] = []
    others: list[str] = []
    for line in prompt.splitlines() or [""]:
        if not line.strip():
            continue
        step = parse_line(line)
        if step is None:
            others.append(line.strip())
        else:
            steps.append(step)
    plans = [step for step in steps if isinstance(step, PlanStep)]
    if plans and not any(isinstance(step, Fail) for step in steps):
        # A plan that stays "pending" after the work it names was done misleads whoever
        # watches it; the command language has no per-step progress, so the turn's end is it.
        done = [item if isinstance(item, str) else item.content for item in plans[-1].plan]
        steps.append(PlanStep(plan=[PlanItem(content=item, status="completed")
                                    for item in done]))
    quoted = " / ".join(others)
    if not steps:
        steps.append(Say(say=f'You said: "{quoted}". I am cap-agent, a scripted agent; {HELP}.'))
    elif others:
        steps.append(Say(say=f'You also said: "{quoted}".'))
    return steps
