"""Projections: pure folds from the log to the state every view shows."""

from trio_cap.events.projections.state import (
    PROJECTIONS,
    State,
    fold,
    forget,
    forget_finished,
    initial_state,
)

__all__ = ["PROJECTIONS", "State", "fold", "forget", "forget_finished", "initial_state"]
