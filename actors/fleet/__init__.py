"""Fleets: several agent sessions on one task, routed, budgeted and audited by the fleet actor.

``load_fleet`` reads and checks a fleet file; ``run_fleet`` runs it inside an orchestrator.
"""

from trio_cap.actors.fleet.model import Fleet, Member
from trio_cap.actors.fleet.runner import (
    FleetHandle,
    FleetOutcome,
    FleetSetupError,
    InterruptRefused,
    run_fleet,
)
from trio_cap.actors.fleet.validate import FleetInvalid, check_agents, load_fleet

__all__ = ["Fleet", "FleetHandle", "FleetInvalid", "FleetOutcome", "FleetSetupError",
           "InterruptRefused", "Member", "check_agents", "load_fleet", "run_fleet"]
