"""A2A (HTTP + SSE, spellings 0.3 and 1.0): frames, the sans-io driver and publisher
machines, and their Trio shells."""
