"""One isolated environment per agent run: own HOME, pre-seeded config, local model.

Real agents read a lot from the user's home (logins, settings, caches, trust
decisions) and phone home (telemetry, update checks, price maps).  A test or a
headless fleet run must not depend on or disturb any of that, so each run gets
a fresh HOME with exactly the config the agent needs to skip onboarding and
talk to the given model URL; everything else is switched off.  The recipes are
the ones verified in ``shared/protocols/peers.md``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import attrs

from trio_cap.actors.peers.catalog import PEERS, PeerSpec
from trio_cap.actors.peers.install import bin_dir, peer_dir, peers_root, status

# Variables worth keeping from the caller's environment; everything else is dropped
# so no credentials or user config leak into the agent.
_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR", "USER", "LOGNAME",
         "SHELL")


@attrs.frozen
class PeerEnv:
    """Everything needed to start one isolated run of a peer."""

    name: str
    home: Path
    binary: Path
    installed: bool
    # Everything (model included) is set through env and config files, never
    # through arguments, so ``eval "$(cap peers env …)"`` then the plain command works.
    env: dict[str, str]
    files: tuple[Path, ...] = ()


def _base_url(model_url: str) -> str:
    url = model_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _write(path: Path, text: str, files: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    files.append(path)


def _claude(env: dict[str, str], home: Path, url: str, key: str, model: str,
            workdir: Path | None, files: list[Path]) -> None:
    config_dir = home / ".claude"
    env.update(
        CLAUDE_CONFIG_DIR=str(config_dir), ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key,
        ANTHROPIC_MODEL=model,
        # Root refuses bypass-permissions without it (peers.md); CI runs as root.
        IS_SANDBOX="1",
        DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_NON_ESSENTIAL_MODEL_CALLS="1",
        # No exponential backoff against a local server; fault tests override it.
        CLAUDE_CODE_MAX_RETRIES="0",
    )
    seed: dict[str, object] = {
        "hasCompletedOnboarding": True,
        # Claude stores the last 20 characters of an approved key.
        "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
        # 2.1.332 otherwise nudges towards "auto" permission mode with a blocking
        # dialog in the TUI (auto mode adds classifier calls to every tool use).
        "hasSeenAutoDefaultNudge": True, "hasSeenAutoDefaultNotice": True,
    }
    if workdir is not None:
        seed["projects"] = {str(workdir): {
            "hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
            "allowedTools": [],
        }}
    _write(config_dir / ".claude.json", json.dumps(seed, indent=1) + "\n", files)
    # Newer models make "auto" the default permission mode, which adds classifier
    # calls to the model per tool use; pin the plain mode so runs stay scripted.
    settings = {"permissions": {"defaultMode": "default"}}
    _write(config_dir / "settings.json", json.dumps(settings, indent=1) + "\n", files)


def _gemini(env: dict[str, str], home: Path, url: str, key: str, model: str,
            files: list[Path]) -> None:
    # An explicit model skips the "auto" router's extra generateContent call.
    env.update(GEMINI_API_KEY=key, GOOGLE_GEMINI_BASE_URL=url, GEMINI_MODEL=model,
               GEMINI_CLI_NO_RELAUNCH="true")
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": False}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                    "disableAutoUpdate": True, "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }
    _write(home / ".gemini" / "settings.json", json.dumps(settings, indent=1) + "\n", files)


def _opencode(env: dict[str, str], home: Path, url: str, key: str, model: str,
              files: list[Path]) -> None:
    config = {
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "model": f"fake/{model}", "small_model": f"fake/{model}",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake LLM",
            "options": {"baseURL": f"{url}/v1", "apiKey": key},
            "models": {model: {"name": "Fake Model",
                               "limit": {"context": 128000, "output": 4096}}},
        }},
    }
    path = home / ".config" / "opencode" / "opencode.json"
    _write(path, json.dumps(config, indent=1) + "\n", files)
    env.update(OPENCODE_CONFIG=str(path), OPENCODE_DISABLE_AUTOUPDATE="1",
               OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1",
               OPENCODE_DISABLE_SHARE="1")


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _codex(env: dict[str, str], home: Path, url: str, key: str, model: str,
           workdir: Path | None, files: list[Path]) -> None:
    codex_home = home / ".codex"
    lines = [
        f"model = {_toml_str(model)}",
        'model_provider = "fake"',
        'approval_policy = "never"',
        'sandbox_mode = "workspace-write"',
        "check_for_update_on_startup = false",
        "",
        "[features]",
        "# otherwise the TUI leaves a background app-server daemon running",
        "daemon_auto_start = false",
        "",
        "[analytics]", "enabled = false", "", "[feedback]", "enabled = false", "",
        "[otel]", 'exporter = "none"', "",
        "[model_providers.fake]",
        'name = "fake"',
        f"base_url = {_toml_str(url + '/v1')}",
        'env_key = "FAKE_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    if workdir is not None:
        lines += ["", f"[projects.{_toml_str(str(workdir))}]", 'trust_level = "trusted"']
    _write(codex_home / "config.toml", "\n".join(lines) + "\n", files)
    env.update(CODEX_HOME=str(codex_home), FAKE_API_KEY=key)


def _aider(env: dict[str, str], spec: PeerSpec, root: Path, home: Path, url: str, key: str,
           model: str, files: list[Path]) -> None:
    env.update(
        OPENAI_API_KEY=key, OPENAI_API_BASE=f"{url}/v1", AIDER_MODEL=f"openai/{model}",
        LITELLM_LOCAL_MODEL_COST_MAP="True", AIDER_CHECK_UPDATE="false",
        AIDER_ANALYTICS_DISABLE="true", AIDER_SHOW_RELEASE_NOTES="false",
        AIDER_SHOW_MODEL_WARNINGS="false", AIDER_GIT="false", AIDER_YES_ALWAYS="true",
    )
    # Without a cached price map aider fetches one from the internet at startup.
    bundled = sorted((peer_dir(spec, root) / "venv" / "lib").glob(
        "python*/site-packages/litellm/model_prices_and_context_window_backup.json"))
    if bundled:
        target = home / ".aider" / "caches" / "model_prices_and_context_window.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundled[0], target)
        files.append(target)


def isolated_env(
    name: str, model_url: str, *, home: Path | None = None, workdir: Path | None = None,
    model: str | None = None, api_key: str = "dummy", root: Path | None = None,
    base_env: Mapping[str, str] | None = None, extra_env: Mapping[str, str] | None = None,
) -> PeerEnv:
    """Create ``home`` (a new temp dir by default), seed it, and return the run's env.

    ``workdir`` is pre-trusted where an agent asks about unknown folders.  The
    caller owns ``home`` and removes it when the run is over.
    """
    spec = PEERS[name]
    root = peers_root() if root is None else root
    home = Path(tempfile.mkdtemp(prefix=f"cap-peer-{name}-")) if home is None else home
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    workdir = workdir.resolve() if workdir is not None else None
    source = os.environ if base_env is None else base_env
    env = {k: source[k] for k in _KEEP if k in source}
    env["PATH"] = os.pathsep.join([str(bin_dir(spec, root)), env.get("PATH", os.defpath)])
    env.update(
        HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"), XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        DO_NOT_TRACK="1", NO_UPDATE_NOTIFIER="1", npm_config_update_notifier="false",
    )
    url = _base_url(model_url)
    model = model or spec.default_model
    files: list[Path] = []
    if name in ("claude-code", "claude-code-acp"):
        _claude(env, home, url, api_key, model, workdir, files)
    elif name in ("gemini-cli", "gemini-a2a-server"):
        _gemini(env, home, url, api_key, model, files)
    elif name == "opencode":
        _opencode(env, home, url, api_key, model, files)
    elif name in ("codex", "codex-acp"):
        _codex(env, home, url, api_key, model, workdir, files)
    elif name == "aider":
        _aider(env, spec, root, home, url, api_key, model, files)
    if extra_env:
        env.update(extra_env)
    st = status(spec, root)
    return PeerEnv(name=name, home=home, binary=st.binary, installed=st.installed, env=env,
                   files=tuple(files))
