"""Claude Code's AskUserQuestion tool, seen as what it is to CAP: a ``cap.ask_user``.

Claude Code asks the user through a tool: a ``can_use_tool`` request for
``AskUserQuestion`` whose input lists questions with option labels; the host
answers by allowing the call with ``updatedInput.answers`` = {question: label}.
Treating that as a permission would show a human "allow AskUserQuestion?" and
lose the question, so the driver turns it into an ask with a form, and the
answer back into the rewritten input (the same shape trio-cap's own agent side
speaks, see ``agent_tools``).
"""

from __future__ import annotations

from typing import Any

from trio_cap.events.kinds import AskUser

ASK_TOOL = "AskUserQuestion"


def _questions(tool_input: dict[str, Any]) -> list[dict[str, Any]]:
    questions = tool_input.get("questions")
    if not isinstance(questions, list):
        return []
    return [q for q in questions if isinstance(q, dict) and isinstance(q.get("question"), str)]


def _choice_form(question: dict[str, Any]) -> dict[str, Any]:
    labels = [o.get("label") for o in question.get("options") or []
              if isinstance(o, dict) and isinstance(o.get("label"), str)]
    form: dict[str, Any] = {"type": "string"}
    if labels:
        form["oneOf"] = [{"const": label, "title": label} for label in labels]
    return form


def ask_from_tool(req_id: str, tool_input: dict[str, Any]) -> AskUser | None:
    """The ask for an AskUserQuestion call (None when its input has no question)."""
    questions = _questions(tool_input)
    if not questions:
        return None
    if len(questions) == 1:
        return AskUser(ask_id=req_id, prompt=questions[0]["question"],
                       form=_choice_form(questions[0]))
    form = {"type": "object",
            "properties": {q["question"]: _choice_form(q) for q in questions}}
    prompt = "\n".join(q["question"] for q in questions)
    return AskUser(ask_id=req_id, prompt=prompt, form=form)


def answered_input(tool_input: dict[str, Any], value: Any) -> dict[str, Any]:
    """The tool input with the user's ``answers`` filled in, as Claude Code expects."""
    questions = _questions(tool_input)
    if isinstance(value, dict):
        answers = {str(k): str(v) for k, v in value.items()}
    else:
        answers = {q["question"]: str(value) for q in questions[:1]}
    return {**tool_input, "answers": answers}
