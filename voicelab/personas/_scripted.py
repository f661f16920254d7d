"""The scripted persona: predefined replies chosen by keyword, with the seed's semantics.

For each product response it searches the unused script turns, in order, for one whose keywords
occur (case-insensitively) in the product's transcript; a turn without keywords matches any
response. When none match it asks the assistant to repeat itself, at most
``max_repeat_requests`` times in a row (then the trial ends with ``repeat_limit``). When every
turn is used, or every unused one is ``optional`` and none matched, it waits
``post_script_completion_wait_seconds`` for the product to complete, else the trial ends with
``script_exhaustion``. A turn never said is named by the ``script_turns_said`` verdict (unless
it is optional). The format, with examples: docs/scripts.md.

Barge-in: the first unused turn (in script order) that has ``interrupt_after_seconds`` is armed
for every product response, unless the response's transcript is already known and does not match
its keywords. A ``backchannel`` turn is only ever said into the product's speech that way, never
as an opening or a reply. A key barge-in (keys pressed into the product's speech, docs/ivr.md)
is armed only once every earlier line that is not optional has been said: a menu is pressed
through in order.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from ..audio import PcmAudio, read_audio
from ..config import ScriptConfig, ScriptTurn, has_pause_markers, split_pauses
from ..errors import ConfigError
from ._disfluency import make_disfluent
from ._hesitation import Hesitation
from ._protocol import PersonaContext, PersonaDecision, PersonaEnd, ProductResponse, UserTurn


def keywords_match(turn: ScriptTurn, transcript: str) -> bool:
    if not turn.keywords:
        return True
    lowered = transcript.casefold()
    return any(keyword.casefold() in lowered for keyword in turn.keywords)


class ScriptedPersona:
    def __init__(self, settings: Mapping[str, object], context: PersonaContext):
        self.check_settings(settings, context)
        assert context.script is not None
        self.script: ScriptConfig = context.script
        self.context = context
        self._used: set[int] = set()
        self._repeats = 0
        self._audio: dict[int, PcmAudio] = {}
        self._log: list[dict[str, JsonValue]] = []

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: PersonaContext) -> None:
        if settings:
            raise ConfigError(f"the scripted persona takes no persona_settings "
                              f"(got {', '.join(sorted(settings))})", key="persona_settings")
        if context.script is None:
            raise ConfigError("persona_mode 'scripted' needs a script_path", key="script_path")
        if not context.script.turns:
            raise ConfigError("persona_mode 'scripted' needs a script with at least one turn",
                              key="script_path")

    async def start(self) -> None:
        for index, turn in enumerate(self.script.turns):
            if turn.audio_path is not None:  # decoded by validation; read here only when the
                audio = self.context.script_audio.get(index)  # persona is used on its own
                self._audio[index] = audio if audio is not None else read_audio(turn.audio_path)

    def _turn(self, index: int, source: str = "script") -> UserTurn:
        script_turn = self.script.turns[index]
        text, disfluency = self._spoken_text(index)
        # pauses are split after the disfluencies (which keep the markers where they are)
        spoken = split_pauses(text, script_turn.pauses) if script_turn.pauses is not None \
            or has_pause_markers(text) else None
        hesitation: Hesitation = {} if spoken is None or not spoken.pauses_seconds else {
            "pieces": spoken.pieces, "pauses_seconds": spoken.pauses_seconds}
        return UserTurn(text=spoken.text if spoken is not None else text,
                        audio=self._audio.get(index), **hesitation,
                        interrupt_after_seconds=script_turn.interrupt_after_seconds,
                        source=source, dtmf=script_turn.dtmf, kind=script_turn.kind,
                        metadata={"script_index": index, "trigger": script_turn.trigger,
                                  **disfluency})

    def _spoken_text(self, index: int) -> tuple[str, dict[str, JsonValue]]:
        """The turn's text as the persona's disfluency profile says it (seeded), and the
        ``disfluency`` metadata saying what was applied (none for a backchannel or a recording)."""
        turn = self.script.turns[index]
        persona, scenario = self.context.persona, self.context.scenario
        if turn.kind == "backchannel" or turn.audio_path is not None:
            return turn.response, {}
        spoken = make_disfluent(turn.response, persona.disfluency, seed=self.context.seed,
                                turn_key=f"script:{index}",
                                language=scenario.language or persona.language)
        if not spoken.applied:
            return turn.response, {}
        return spoken.text, {"disfluency": spoken.as_metadata(turn.response)}

    def planned_turns(self) -> list[UserTurn]:
        """Every turn the script may say (the runner synthesizes them before the call)."""
        turns = [self._turn(index) for index in range(len(self.script.turns))]
        return [*turns, UserTurn(text=self.script.repeat_request, source="repeat_request")]

    def _unused(self) -> list[int]:
        """Unused turns that can open or answer (a backchannel cannot)."""
        return [i for i in range(len(self.script.turns))
                if i not in self._used and self.script.turns[i].kind != "backchannel"]

    def _use(self, index: int, reason: str, response_index: int | None) -> UserTurn:
        self._used.add(index)
        self._repeats = 0
        self._log.append({"script_index": index, "reason": reason,
                          "product_response": response_index})
        return self._turn(index)

    async def opening(self) -> PersonaDecision:
        unused = self._unused()
        if not unused:
            return PersonaEnd("script_exhaustion", self.script.post_script_completion_wait_seconds)
        return self._use(unused[0], "opening", None)

    def barge_in(self, response: ProductResponse) -> UserTurn | None:
        for index in (i for i in range(len(self.script.turns)) if i not in self._used):
            turn = self.script.turns[index]
            if turn.interrupt_after_seconds is None:
                continue
            if response.transcript and not keywords_match(turn, response.transcript):
                return None
            if turn.dtmf and any(earlier < index and not self.script.turns[earlier].optional
                                 for earlier in self._unused()):
                return None  # a menu's keys go in script order: earlier lines first
            return self._turn(index)
        return None

    def confirm_barge_in(self, turn: UserTurn) -> None:
        index = int(turn.metadata["script_index"])
        self._used.add(index)
        self._repeats = 0
        self._log.append({"script_index": index, "reason": "barge_in"})

    async def reply(self, response: ProductResponse) -> PersonaDecision:
        unused = self._unused()
        if not unused:
            return PersonaEnd("script_exhaustion", self.script.post_script_completion_wait_seconds,
                              "every script turn has been used")
        for index in unused:
            if keywords_match(self.script.turns[index], response.transcript):
                return self._use(index, "keyword", response.index)
        if all(self.script.turns[index].optional for index in unused):
            return PersonaEnd("script_exhaustion", self.script.post_script_completion_wait_seconds,
                              "every required script turn has been used")
        self._repeats += 1
        if self._repeats > self.script.max_repeat_requests:
            return PersonaEnd("repeat_limit", 0.0,
                              f"no script turn matched {self._repeats} product responses in a row")
        self._log.append({"repeat_request": self._repeats, "product_response": response.index})
        return UserTurn(text=self.script.repeat_request, source="repeat",
                        metadata={"repeat_request": self._repeats})

    def evidence(self) -> dict[str, JsonValue]:
        return {}

    def choices(self) -> list[dict[str, JsonValue]]:
        return list(self._log)

    async def close(self) -> None:
        return None
