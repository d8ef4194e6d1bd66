"""ACP-stdio (Agent Client Protocol v1): frames, the sans-io client and agent machines,
and their Trio shells."""
