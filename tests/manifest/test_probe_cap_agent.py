"""Probing trio-cap's own agent: the real `cap-agent --cap-manifest`, not a stand-in."""

import sys
from pathlib import Path

from trio_cap.actors.manifest import SearchRoots, plan_bindings, resolve_agent


async def test_the_installed_cap_agent_is_found_by_the_probe_rule(tmp_path):
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "cap-agent").exists(), "install trio-cap: the cap-agent script is missing"
    roots = SearchRoots(user_dir=tmp_path / "user", system_dir=tmp_path / "system",
                        path=str(bin_dir))
    resolved = await resolve_agent("cap-agent", roots=roots)
    assert resolved.source == "probe"
    assert resolved.location.endswith("cap-agent --cap-manifest")
    assert resolved.manifest.agent.name == "cap-agent"
    plan = plan_bindings(resolved.manifest, which=lambda name: str(bin_dir / name))
    assert [c.binding for c in plan.candidates][:2] == ["inproc", "stream-json"]
