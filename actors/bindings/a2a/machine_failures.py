"""The driver's rules for how exchanges end (``machine.py`` D14–D20): clean ends, drops and
resubscribes, HTTP statuses, JSON-RPC errors and the replies of cancel / get.  A mixin of
:class:`~.machine.A2aDriver`, apart only to keep each file about one thing.
"""

from __future__ import annotations

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine_io import (
    GET,
    RESUBSCRIBE,
    RESUBSCRIBE_DELAYS,
    SEND,
    Body,
    Dropped,
    Exchange,
    HttpStatus,
)
from trio_cap.actors.bindings.a2a.machine_parts import raw
from trio_cap.actors.bindings.base import Output
from trio_cap.events.kinds import CapError


class FailureRules:
    live: dict[int, Exchange]

    def _ended(self, rid: int) -> list[Output]:
        ex = self._forget(rid)
        out: list[Output] = []
        if ex is not None and ex.turn and rid == self.stream_id and self.turn_open and not (
                self.asks and self.state == "input-required"):
            self._end_turn("end_turn", out)  # D14
        return out

    def _dropped(self, frame: Dropped) -> list[Output]:
        ex = self._forget(frame.request_id)
        if ex is None:
            return []
        out: list[Output] = []
        on_turn = ex.turn and frame.request_id == self.stream_id and self.turn_open
        if ex.purpose in (SEND, RESUBSCRIBE) and on_turn and self.task_id is not None \
                and self.resubscribes < self.max_resubscribes and not self.closed:
            delay = RESUBSCRIBE_DELAYS[min(self.resubscribes, len(RESUBSCRIBE_DELAYS) - 1)]
            self.resubscribes += 1
            out.append(raw("a2a_stream_dropped", f"{frame.detail}; resubscribing to task "
                           f"{self.task_id} (attempt {self.resubscribes})"))
            out.append(self._task_request(RESUBSCRIBE, delay=delay))
            return out
        if frame.timeout:
            code, what = "a2a_timeout", "timed out"
        elif ex.purpose == RESUBSCRIBE or (ex.purpose == SEND and (frame.responded
                                                                   or ex.got_event)):
            code, what = "a2a_stream_lost", "lost its stream"
        else:
            code, what = "a2a_unreachable", "could not be reached"
        out.append(CapError(code=code, retryable=True,
                            message=f"the A2A agent at {self.url} {what} ({ex.purpose}): "
                            f"{frame.detail}"))
        if on_turn or (ex.turn and self.turn_open and ex.purpose == GET):
            self._end_turn("error", out)
        return out

    def _http_status(self, frame: HttpStatus) -> list[Output]:
        ex = self._forget(frame.request_id)
        if ex is None:
            return []
        text = frame.body[:300].decode("utf-8", "replace").strip()
        detail = f": {text}" if text else ""
        if frame.status in (401, 403):
            error = CapError(code="auth_error", message=f"the A2A agent refused the request "
                             f"with HTTP {frame.status} (bearer token missing or not accepted: "
                             f"--token-file, CAP_A2A_TOKEN or fast_path.x-a2a-token-file)")
        elif frame.status == 429:
            error = CapError(code="rate_limit", retryable=True,
                             message=f"the A2A agent answered HTTP 429{detail}")
        else:
            error = CapError(code="a2a_http_error", retryable=frame.status >= 500,
                             message=f"the A2A agent answered HTTP {frame.status} to "
                             f"{ex.purpose}{detail}", details={"status": frame.status})
        out: list[Output] = [error]
        if ex.turn and frame.request_id == self.stream_id:
            self._end_turn("error", out)
        return out

    def _rpc_error(self, rid: int, ex: Exchange, error: f.ErrorObject) -> list[Output]:
        self._forget(rid)
        out: list[Output] = []
        if (ex.purpose == SEND and error.code in (-32601, -32009) and not ex.got_event
                and self.other is not None and ex.resend is not None):
            self.spelling, self.other = self.other, self.spelling
            self.url, self.other_url = self.other_url or self.url, self.url
            out.append(raw("a2a_spelling_fallback", f"{error.code} {error.message}: retrying "
                           f"in the A2A {self.spelling} spelling"))
            return out + self._post_message(*ex.resend, spelling=self.spelling)
        if ex.purpose == RESUBSCRIBE and error.code in (-32004, -32001) and self.task_id:
            out.append(raw("a2a_resubscribe_refused", f"{error.code} {error.message}: reading "
                           f"task {self.task_id} instead"))
            out.append(self._task_request(GET))
            return out
        out.append(CapError(code="a2a_rpc_error", message=f"the A2A agent answered {ex.purpose} "
                            f"with error {error.code}: {error.message}",
                            details={"rpc_code": error.code, "data": error.data}))
        if ex.turn and rid == self.stream_id:
            self._end_turn("error", out)
        return out

    def _reply(self, frame: Body, ex: Exchange) -> list[Output]:
        self._forget(frame.request_id)
        try:
            env = f.decode_reply(ex.spelling, frame.data)
        except f.FrameError as exc:
            text = frame.data.decode("utf-8", "replace")
            out: list[Output] = [CapError(code="parse_failed", message=str(exc)),
                                 raw("a2a_malformed_reply", text)]
            if ex.turn and self.turn_open:
                self._end_turn("error", out)
            return out
        if env.error is not None:
            self.live[frame.request_id] = ex  # _rpc_error forgets it again
            return self._rpc_error(frame.request_id, ex, env.error)
        out = []
        if env.result is not None:
            self._snapshot(env.result, frame.request_id, out)
            if ex.purpose == GET and self.turn_open and f.state_class(self.state or "") in (
                    "active", "unknown"):
                # GetTask after a lost stream shows a task still running: resubscribe again.
                if self.resubscribes < self.max_resubscribes:
                    self.resubscribes += 1
                    out.append(self._task_request(RESUBSCRIBE, delay=RESUBSCRIBE_DELAYS[-1]))
                else:
                    out.append(CapError(code="a2a_stream_lost", retryable=True,
                                        message=f"task {self.task_id} is still "
                                        f"{self.state} and its stream cannot be resumed"))
                    self._end_turn("error", out)
        return out
