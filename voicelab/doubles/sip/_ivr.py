"""The IVR front of the double: menus, keys, then the agent.

A call starts in the first menu and hears its prompt. A key leads where the menu says (another
menu, or the agent, who greets); a key the menu does not know is answered with
``invalid_key_text`` and the menu's prompt again. A key pressed while a prompt plays stops it
at the next packet (a key barge-in, reported as ``prompt_stopped`` with ``why:
key_barge_in``), as a caller who knows the menu expects. The next prompt starts
``menu_latency_ms`` after the key.
"""

from __future__ import annotations

import asyncio

import numpy as np

from ._agent import Agent, CallSide
from ._media import Utterance
from ._settings import AGENT

INVALID = "invalid"


class Ivr:
    """One call's menus; :meth:`key` for each key received, :meth:`hear` for the audio."""

    def __init__(self, call: CallSide, agent: Agent):
        self.call, self.agent = call, agent
        self.settings = call.settings
        self.menu: str | None = None  # None once the caller reached the agent
        self._next: asyncio.TimerHandle | None = None

    @property
    def at_agent(self) -> bool:
        return self.menu is None

    def start(self) -> None:
        self._enter(next(iter(self.settings.menus)))

    def _enter(self, name: str) -> None:
        self.menu = name
        self.call.note("menu_entered", menu=name)
        self.call.say("prompt", name, self.settings.menus[name].prompt)

    def _replay(self, name: str) -> None:
        self.call.say("prompt", INVALID, self.settings.invalid_key_text)
        self.call.say("prompt", name, self.settings.menus[name].prompt)

    def key(self, key: str) -> None:
        if self.menu is None:
            return  # the agent only notes keys
        speaking = self.call.speaking
        if speaking is not None and speaking.kind == "prompt":
            self.call.stop_speaking("key_barge_in")
        if self._next is not None:
            self._next.cancel()
        target = self.settings.menus[self.menu].keys.get(key)
        delay = self.settings.menu_latency_ms / 1000
        loop = asyncio.get_running_loop()
        if target is None:
            self.call.note("key_refused", key=key, menu=self.menu)
            self._next = loop.call_later(delay, self._replay, self.menu)
        elif target == AGENT:
            self.call.note("agent_reached", menu=self.menu)
            self.menu = None
            self._next = loop.call_later(delay, self.agent.greet)
        else:
            self._next = loop.call_later(delay, self._enter, target)

    def hear(self, samples: np.ndarray) -> None:
        if self.menu is None:
            self.agent.hear(samples)

    def started(self, utterance: Utterance) -> None:
        """An utterance's first packet went out."""
        if utterance.kind != "prompt":
            return
        self.call.note("prompt_started", menu=utterance.label, text=utterance.text,
                       first_ns=utterance.first_ns)

    def ended(self, utterance: Utterance) -> None:
        """An utterance played out or was stopped."""
        if utterance.kind != "prompt":
            self.agent.replied(utterance)
            return
        self.call.note("prompt_stopped", menu=utterance.label, why=utterance.stopped,
                       frames=len(utterance.frames), frames_sent=utterance.sent,
                       first_ns=utterance.first_ns, last_ns=utterance.last_ns,
                       speech_start_ns=utterance.speech_start_ns,
                       most_late_ms=utterance.most_late_ms)

    def close(self) -> None:
        if self._next is not None:
            self._next.cancel()
        self.agent.close()
