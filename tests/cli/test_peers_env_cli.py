"""``cap peers env`` prints an environment without leaving a new directory behind each time."""

import os
import subprocess
import sys

CAP = [sys.executable, "-m", "trio_cap.actors.cli"]


def test_peers_env_reuses_one_home_per_peer_and_creates_no_temp_dirs(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    homes = set()
    for _ in range(3):
        result = subprocess.run(
            [*CAP, "peers", "env", "gemini-cli", "--model-url", "http://127.0.0.1:9",
             "--dir", str(tmp_path / "peers")],
            capture_output=True, text=True, env=env, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        line = next(x for x in result.stdout.splitlines() if x.startswith("export HOME="))
        homes.add(line.split("=", 1)[1])
    assert homes == {str((tmp_path / "peers" / "homes" / "gemini-cli").resolve())}
    assert list(tmp.iterdir()) == []  # nothing left in the temp dir
    assert (tmp_path / "peers" / "homes" / "gemini-cli" / ".gemini" / "settings.json").is_file()
