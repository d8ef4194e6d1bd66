"""Agent manifests (CAP core §5, coding profile §3): model, validation, resolution,
probing and binding selection.

The session actor and ``cap run --agent`` need only what is exported here::

    resolved = await resolve_agent("claude-code")      # or a path, or "pty:bash -i"
    plan = resolved.plan(force=None)                   # candidates, best first
    candidate, conn = await first_working(plan.candidates, open_binding, on_fallback)
"""

from trio_cap.actors.manifest.adhoc import AdHocError, adhoc_binding, adhoc_manifest
from trio_cap.actors.manifest.model import Manifest
from trio_cap.actors.manifest.probe import ProbeFailed, probe_text
from trio_cap.actors.manifest.regex import PatternError, compile_line_pattern, search_lines
from trio_cap.actors.manifest.resolve import (
    RULES,
    Attempt,
    Listing,
    ManifestNotFound,
    Resolved,
    SearchRoots,
    list_agents,
    resolve_agent,
)
from trio_cap.actors.manifest.select import (
    BindingCandidate,
    BindingNotOffered,
    BindingPlan,
    BindingUnavailable,
    first_working,
    offered_bindings,
    plan_bindings,
)
from trio_cap.actors.manifest.validate import Issue, ManifestInvalid, load_manifest, parse_manifest

__all__ = [
    "RULES",
    "AdHocError",
    "Attempt",
    "BindingCandidate",
    "BindingNotOffered",
    "BindingPlan",
    "BindingUnavailable",
    "Issue",
    "Listing",
    "Manifest",
    "ManifestInvalid",
    "ManifestNotFound",
    "PatternError",
    "ProbeFailed",
    "Resolved",
    "SearchRoots",
    "adhoc_binding",
    "adhoc_manifest",
    "compile_line_pattern",
    "first_working",
    "list_agents",
    "load_manifest",
    "offered_bindings",
    "parse_manifest",
    "plan_bindings",
    "probe_text",
    "resolve_agent",
    "search_lines",
]
