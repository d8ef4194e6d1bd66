"""trio-cap's own agent: the scripted brain and the core that speaks CAP around it."""
