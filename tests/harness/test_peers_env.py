"""Isolated peer environments: nothing leaks in, each peer's config is seeded."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from trio_cap.actors.peers.catalog import PEERS
from trio_cap.actors.peers.env import isolated_env
from trio_cap.actors.peers.install import bin_dir, peer_dir

CALLER_ENV = {
    "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
    "ANTHROPIC_API_KEY": "real-secret-1", "OPENAI_API_KEY": "real-secret-2",
    "GITHUB_TOKEN": "real-secret-3", "CLAUDE_CONFIG_DIR": "/root/.claude",
}


def make(tmp_path: Path, name: str, **kw: object):  # type: ignore[no-untyped-def]
    workdir = tmp_path / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    return isolated_env(name, "http://127.0.0.1:9999/v1/", home=tmp_path / "home",
                        workdir=workdir, root=tmp_path / "peers", base_env=CALLER_ENV,
                        **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(PEERS))
def test_no_caller_secret_or_home_leaks(tmp_path: Path, name: str) -> None:
    penv = make(tmp_path, name)
    dumped = json.dumps(penv.env)
    assert "real-secret" not in dumped and "GITHUB_TOKEN" not in penv.env
    assert penv.env["HOME"] == str(tmp_path / "home")
    assert "/root" not in dumped
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        assert penv.env[var].startswith(penv.env["HOME"])
    assert penv.env["PATH"].split(":")[0] == str(bin_dir(PEERS[name], tmp_path / "peers"))
    assert penv.env["LANG"] == "C.UTF-8"
    assert not penv.installed
    assert all(f.is_file() and f.is_relative_to(penv.home) for f in penv.files)


def test_claude_env_and_onboarding_seed(tmp_path: Path) -> None:
    key = "sk-ant-0123456789abcdefghijklmnopqrstuvwxyz"
    penv = make(tmp_path, "claude-code", api_key=key)
    env = penv.env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9999"
    assert env["ANTHROPIC_API_KEY"] == key and env["ANTHROPIC_MODEL"] == "claude-opus-5-5"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["IS_SANDBOX"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
    seed = json.loads((Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json").read_text())
    assert seed["hasCompletedOnboarding"] is True
    assert seed["customApiKeyResponses"]["approved"] == [key[-20:]]
    project = seed["projects"][str((tmp_path / "work").resolve())]
    assert project["hasTrustDialogAccepted"] and project["hasCompletedProjectOnboarding"]


def test_gemini_settings(tmp_path: Path) -> None:
    penv = make(tmp_path, "gemini-cli", model="my-model")
    assert penv.env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:9999"
    assert penv.env["GEMINI_MODEL"] == "my-model" and penv.env["GEMINI_API_KEY"] == "dummy"
    settings = json.loads((penv.home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["security"]["folderTrust"]["enabled"] is False
    assert settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["enableAutoUpdate"] is False


def test_codex_config_toml(tmp_path: Path) -> None:
    penv = make(tmp_path, "codex")
    config = tomllib.loads((Path(penv.env["CODEX_HOME"]) / "config.toml").read_text())
    assert config["model"] == "gpt-5.5" and config["model_provider"] == "fake"
    assert config["features"]["daemon_auto_start"] is False
    provider = config["model_providers"]["fake"]
    assert provider["base_url"] == "http://127.0.0.1:9999/v1"
    assert provider["wire_api"] == "responses" and provider["env_key"] == "FAKE_API_KEY"
    assert penv.env["FAKE_API_KEY"] == "dummy"
    assert config["projects"][str((tmp_path / "work").resolve())]["trust_level"] == "trusted"
    acp = make(tmp_path / "acp", "codex-acp")
    acp_config = tomllib.loads((Path(acp.env["CODEX_HOME"]) / "config.toml").read_text())
    assert acp_config["model"] == "gpt-5.4"


def test_opencode_provider(tmp_path: Path) -> None:
    penv = make(tmp_path, "opencode")
    config = json.loads(Path(penv.env["OPENCODE_CONFIG"]).read_text())
    assert config["model"] == "fake/fake-model" and config["autoupdate"] is False
    options = config["provider"]["fake"]["options"]
    assert options == {"baseURL": "http://127.0.0.1:9999/v1", "apiKey": "dummy"}
    assert penv.env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"


def test_aider_env_and_price_map_copy(tmp_path: Path) -> None:
    site = (peer_dir(PEERS["aider"], tmp_path / "peers") / "venv" / "lib" / "python3.11"
            / "site-packages" / "litellm")
    site.mkdir(parents=True)
    (site / "model_prices_and_context_window_backup.json").write_text('{"m": {}}')
    penv = make(tmp_path, "aider")
    assert penv.env["OPENAI_API_BASE"] == "http://127.0.0.1:9999/v1"
    assert penv.env["AIDER_MODEL"] == "openai/fake-model"
    assert penv.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    cached = penv.home / ".aider" / "caches" / "model_prices_and_context_window.json"
    assert cached.read_text() == '{"m": {}}' and cached in penv.files


def test_default_home_is_a_fresh_temp_dir(tmp_path: Path) -> None:
    first = isolated_env("gemini-cli", "http://127.0.0.1:1", root=tmp_path, base_env={})
    second = isolated_env("gemini-cli", "http://127.0.0.1:1", root=tmp_path, base_env={})
    try:
        assert first.home != second.home and first.home.is_dir()
    finally:
        import shutil

        shutil.rmtree(first.home)
        shutil.rmtree(second.home)


def test_extra_env_overrides(tmp_path: Path) -> None:
    penv = make(tmp_path, "claude-code", extra_env={"CLAUDE_CODE_MAX_RETRIES": "3"})
    assert penv.env["CLAUDE_CODE_MAX_RETRIES"] == "3"
