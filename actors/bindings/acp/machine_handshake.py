"""The ACP client's handshake: initialize, authenticate, open the session, apply the config.

Part of :class:`.machine.AcpClient` (rules A1–A4 in its docstring), kept apart because
it runs once per connection and has its own small sequence: ``initialize`` →
[``authenticate``] → ``session/new`` | ``session/load`` | ``session/resume`` →
[``session/set_config_option`` / ``session/set_mode``] → ``cap.session.ready``.
Sans-io like the rest of the machine.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from trio_cap.actors.bindings import jsonrpc as rpc
from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.machine_updates import UpdateMapper, raw
from trio_cap.actors.bindings.base import Output, ToAgent
from trio_cap.events.kinds import CapError, CapSessionReady


class ClientState(enum.Enum):
    NEW = "new"
    INITIALIZING = "initializing"
    AUTHENTICATING = "authenticating"
    OPENING = "opening"
    CONFIGURING = "configuring"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True)
class ClientOptions:
    """What the client asks for and offers; the session's ``cap.session.config`` decides most."""

    cwd: str
    model: str | None = None
    resume_id: str | None = None
    context: str | None = None
    """Text put before the first prompt of a session opened with ``session/new`` (ACP has no
    system prompt): the session's system prompt, which for a restarted run holds the
    transcript so far.  Not sent to a session that was loaded: its agent has its history."""
    mcp_servers: tuple[dict[str, Any], ...] = ()
    auth_method: str | None = None
    mode: str | None = None
    permission_mode: str = "interactive"
    fs_read: bool = True
    fs_write: bool = True
    terminal: bool = True
    elicitation: bool = True
    client_name: str = "trio-cap"
    client_version: str = "0"


class Handshake:
    """The handshake half of the client machine (a mixin of :class:`.machine.AcpClient`)."""

    options: ClientOptions
    state: ClientState
    handshake_error: str | None
    session_id: str | None
    agent: f.InitializeResult | None
    modes: f.SessionModeState | None
    rpc: rpc.JsonRpc
    updates: UpdateMapper
    _authenticated: bool
    _loading: bool
    _context_due: bool
    _steps: deque[tuple[str, Any]]
    _mode_asked: str | None

    def _next_prompt(self) -> list[Output]:
        raise NotImplementedError

    def capabilities(self) -> f.ClientCapabilities:
        """Exactly what this client serves (the agent must not call anything else)."""
        o = self.options
        return f.ClientCapabilities(
            fs=f.FsCapability(read_text_file=o.fs_read, write_text_file=o.fs_write),
            terminal=o.terminal,
            elicitation=f.ElicitationCapability(form={}) if o.elicitation else UNSET,
            auth=f.AuthCapability(terminal=False))

    # ---- handshake ------------------------------------------------------------------------
    def initialize(self) -> bytes:
        if self.state is not ClientState.NEW:
            raise RuntimeError(f"initialize sent twice (state {self.state.value})")
        self.state = ClientState.INITIALIZING
        params = f.InitializeParams(
            protocol_version=f.PROTOCOL_VERSION, client_capabilities=self.capabilities(),
            client_info=f.Implementation(name=self.options.client_name, title="trio-cap",
                                         version=self.options.client_version))
        return self._request(f.INITIALIZE, params)

    def _request(self, method: str, params: Any) -> bytes:
        _, data = self.rpc.request(method, params)
        return data + b"\n"

    def _fail(self, why: str) -> list[Output]:
        self.state = ClientState.FAILED
        self.handshake_error = why
        return [CapError(code="cap_binding_unavailable", message=why)]

    def _initialized(self, result: f.InitializeResult) -> list[Output]:
        if result.protocol_version != f.PROTOCOL_VERSION:
            return self._fail(f"the agent answered protocol version {result.protocol_version}; "
                              f"trio-cap speaks ACP version {f.PROTOCOL_VERSION}")
        self.agent = result
        method = self.options.auth_method
        if method:
            return self._authenticate(method)
        return self._open()

    def _authenticate(self, method: str) -> list[Output]:
        assert self.agent is not None
        offered = {m.id: m for m in self.agent.methods()}
        chosen = offered.get(method)
        if chosen is None or chosen.type == "terminal":
            names = ", ".join(offered) or "none"
            why = "is not one the agent offers" if chosen is None else \
                "needs an interactive terminal login (run the agent once by hand)"
            return self._fail(f"ACP authentication method {method!r} {why} (offered: {names})")
        self.state = ClientState.AUTHENTICATING
        self._authenticated = True
        return [ToAgent(self._request(f.AUTHENTICATE, f.AuthenticateParams(method_id=method)))]

    def _open(self) -> list[Output]:
        assert self.agent is not None
        self.state = ClientState.OPENING
        o = self.options
        caps = self.agent.capabilities()
        out: list[Output] = []
        if o.resume_id:
            if caps.loads_sessions():
                self._loading = True
                self.session_id = o.resume_id
                return [ToAgent(self._request(f.SESSION_LOAD, f.LoadSessionParams(
                    session_id=o.resume_id, cwd=o.cwd, mcp_servers=o.mcp_servers)))]
            if caps.session_feature("resume"):
                self.session_id = o.resume_id
                return [ToAgent(self._request(f.SESSION_RESUME, f.LoadSessionParams(
                    session_id=o.resume_id, cwd=o.cwd, mcp_servers=o.mcp_servers)))]
            out.append(raw("resume_unsupported", f"the agent cannot load or resume session "
                                                 f"{o.resume_id}; a new session was started"
                                                 + self._with_context()))
        self._context_due = bool(o.context)
        out.append(ToAgent(self._request(f.SESSION_NEW, f.NewSessionParams(
            cwd=o.cwd, mcp_servers=o.mcp_servers))))
        return out

    def _with_context(self) -> str:
        return " (its first prompt carries the context)" if self.options.context else ""

    def _opened(self, modes: Any, options: Any) -> list[Output]:
        self._loading = False
        if isinstance(modes, f.SessionModeState):
            self.modes = modes
            self.updates.mode = modes.current_mode_id
        if isinstance(options, tuple):
            self.updates.config_options = options
        out: list[Output] = []
        model = self.options.model
        if model:
            option = next((c for c in self.updates.config_options
                           if c.category == "model" or c.id == "model"), None)
            if option is not None and model in option.values():
                if option.current_value != model:
                    self._steps.append((f.SESSION_SET_CONFIG, f.SetConfigOptionParams(
                        session_id=self.session_id or "", config_id=option.id, value=model)))
            else:
                offered = option.values() if option is not None else []
                out.append(raw("model_not_applied", f"model {model!r} is not among the agent's "
                                                    f"model choices {offered}; it keeps its own"))
        mode = self.options.mode
        mode_option = next((c for c in self.updates.config_options if c.category == "mode"),
                           None)
        if not mode:
            pass
        elif mode_option is not None and mode in mode_option.values():
            if mode_option.current_value != mode:  # configOptions win over modes (acp.md §2)
                self._steps.append((f.SESSION_SET_CONFIG, f.SetConfigOptionParams(
                    session_id=self.session_id or "", config_id=mode_option.id, value=mode)))
        elif self.modes is not None and any(m.id == mode for m in self.modes.available_modes):
            if mode != self.modes.current_mode_id:
                self._mode_asked = mode
                self._steps.append((f.SESSION_SET_MODE, f.SetModeParams(
                    session_id=self.session_id or "", mode_id=mode)))
        else:
            out.append(raw("mode_not_applied", f"mode {mode!r} is not offered"))
        return out + self._next_step()

    def _next_step(self) -> list[Output]:
        if self._steps:
            self.state = ClientState.CONFIGURING
            method, params = self._steps.popleft()
            return [ToAgent(self._request(method, params))]
        return self._ready()

    def _ready(self) -> list[Output]:
        self.state = ClientState.READY
        agent = self.agent
        assert agent is not None
        caps = agent.capabilities()
        info: dict[str, Any] = {"protocol_version": agent.protocol_version,
                                "load_session": caps.loads_sessions()}
        if isinstance(agent.agent_info, f.Implementation):
            info["agent"] = msgspec.to_builtins(agent.agent_info)
        if self.modes is not None:
            info["mode"] = self.modes.current_mode_id
            info["modes"] = [m.id for m in self.modes.available_modes]
        if self.updates.config_options:
            info["config_options"] = {c.id: c.current_value for c in self.updates.config_options
                                      if c.current_value is not UNSET}
        if agent.methods():
            info["auth_methods"] = [m.id for m in agent.methods()]
        out: list[Output] = [CapSessionReady(session_id=self.session_id, meta={"acp": info})]
        return out + self._next_prompt()
