"""The shared corpus generators (``../shared/corpus`` beside the repository), found and run.

The generators model what real agents write (for stream-json: Claude Code
with partial messages, 96 % ``stream_event`` deltas); they are not copied
into the repository, so a checkout without them gets one clear message.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CORPUS_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


class CorpusMissing(RuntimeError):
    """The shared corpus is not beside this checkout."""


def generator(name: str) -> ModuleType:
    """Import ``../shared/corpus/<name>.py`` (its helpers import each other by plain name)."""
    path = CORPUS_DIR / f"{name}.py"
    if not path.is_file():
        raise CorpusMissing(f"{path} not found: the realistic-traffic rows need the shared "
                            f"corpus generators in {CORPUS_DIR}")
    if str(CORPUS_DIR) not in sys.path:
        sys.path.insert(0, str(CORPUS_DIR))
    spec = importlib.util.spec_from_file_location(f"_corpus_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stream_json(n_lines: int, seed: int) -> bytes:
    """Claude Code stream-json stdout (``gen_streamjson.py``), NDJSON bytes."""
    lines = generator("gen_streamjson").generate(n_lines, seed)
    return ("\n".join(lines) + "\n").encode()
