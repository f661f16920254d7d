"""The synthesizer persona: an LLM writes each simulated-user reply as text.

Every turn it sends the persona, the scenario, the opaque run data, the conversation so far and
the product's latest response, and asks for ``{"reply": str, "end_conversation": bool,
"reason": str}`` (``response_format: json_object``; JSON is parsed out of plain text when the
service refuses that). An unparseable answer is retried once with a corrective note, then the
trial fails with :class:`ExecutionError`. The runner turns the text into speech with the
selected speech provider. A farewell that comes with ``end_conversation`` is spoken first; the
next ``reply`` then ends the conversation with ``persona_ended``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from ..artifacts import Usage
from ..config import parse_settings as parse_model_settings
from ..cost import chat_usage
from ..errors import ExecutionError
from ..providers import (
    JSONChat,
    LLMCallError,
    UnparseableReplyError,
    async_chat_client,
    check_llm_provider,
    resolve_llm_provider,
)
from ._disfluency import disfluency_instructions
from ._hesitation import HesitationProfile, hesitate
from ._protocol import PersonaContext, PersonaDecision, PersonaEnd, ProductResponse, UserTurn

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

PURPOSE = "persona_mode 'synthesizer'"
DEFAULT_MAX_TOKENS = 400


class SynthesizerSettings(BaseModel):
    """``persona_settings`` of the synthesizer persona (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["azure_openai", "openai"] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    seed: int | None = None
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, gt=0)
    max_turns_hint: int | None = Field(None, gt=0)
    system_prompt_extra: str = ""
    timeout_seconds: float = Field(60.0, gt=0)
    #: seeded pauses inside the replies (docs/endpointing.md)
    hesitation: HesitationProfile | None = None


def parse_settings(settings: Mapping[str, object]) -> SynthesizerSettings:
    return parse_model_settings(SynthesizerSettings, settings, key="persona_settings")


class SynthesizerPersona:
    def __init__(self, settings: Mapping[str, object], context: PersonaContext):
        self.settings = parse_settings(settings)
        self.context = context
        self.provider = resolve_llm_provider(context.providers, preferred=self.settings.provider,
                                             environ=context.environ,
                                             key="persona_settings.provider")
        self.temperature = (self.settings.temperature if self.settings.temperature is not None
                            else self.provider.temperature)
        self.seed = self.settings.seed if self.settings.seed is not None else context.seed
        self.max_turns_hint = (self.settings.max_turns_hint
                               or context.scenario.conversation.max_turns)
        self._history: list[tuple[str, str]] = []
        #: each model call: what was sent and answered, the decision (for the evidence)
        self._exchanges: list[dict[str, object]] = []
        self._client: openai.AsyncOpenAI | None = None
        self._chat: JSONChat | None = None
        self._pending_end: str | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, object], context: PersonaContext) -> None:
        parsed = parse_settings(settings)
        provider = resolve_llm_provider(context.providers, preferred=parsed.provider,
                                        environ=context.environ, key="persona_settings.provider")
        check_llm_provider(provider, purpose=PURPOSE)

    async def start(self) -> None:
        self._client = async_chat_client(self.provider, purpose=PURPOSE,
                                         timeout_seconds=self.settings.timeout_seconds)
        self._chat = JSONChat(self._client, self.provider)

    async def opening(self) -> PersonaDecision:
        return await self._next(None)

    def barge_in(self, response: ProductResponse) -> UserTurn | None:
        return None

    def confirm_barge_in(self, turn: UserTurn) -> None:
        return None

    async def reply(self, response: ProductResponse) -> PersonaDecision:
        self._history.append(("assistant", _product_text(response)))
        if self._pending_end is not None:
            return PersonaEnd("persona_ended", 0.0, self._pending_end)
        return await self._next(response)

    def evidence(self) -> dict[str, JsonValue]:
        summary = {"persona_mode": "synthesizer", **self.provider.describe(),
                   "temperature": self.temperature, "seed": self.seed,
                   "max_tokens": self.settings.max_tokens, "max_turns_hint": self.max_turns_hint,
                   "json_mode": self._chat.json_mode if self._chat else None,
                   "exchanges": self._exchanges}
        return self.context.scrubber.scrub(summary)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- one model turn ---------------------------------------------------------------------

    async def _next(self, response: ProductResponse | None) -> PersonaDecision:
        if self._chat is None:
            raise ExecutionError("the synthesizer persona was not started")
        messages = [{"role": "system", "content": self._system_prompt()},
                    {"role": "user", "content": self._turn_prompt(response)}]
        messages = [{**m, "content": self.context.scrubber.scrub_text(m["content"])}
                    for m in messages]
        for attempt in (1, 2):
            exchange: dict[str, object] = {
                "exchange": len(self._exchanges) + 1, "attempt": attempt,
                "product_response": response.index if response is not None else None,
                "request": self._chat.request(messages, temperature=self.temperature,
                                              seed=self.seed,
                                              max_tokens=self.settings.max_tokens)}
            self._exchanges.append(exchange)
            try:
                reply = await self._chat.complete(messages, temperature=self.temperature,
                                                  seed=self.seed,
                                                  max_tokens=self.settings.max_tokens)
                exchange.update(request=reply.request, reply_text=reply.text,
                                model_version=reply.model_version,
                                finish_reason=reply.finish_reason, usage=reply.usage)
                self._spent(reply.usage, messages, reply.text, exchange)
                decision = _decision(reply.data)
            except UnparseableReplyError as error:
                if "reply_text" not in exchange:  # the service answered: that was paid for
                    self._spent(error.usage, messages, error.text or "", exchange)
                exchange.update(reply_text=error.text, error=self._scrub(str(error)))
                if attempt == 2:
                    raise ExecutionError(f"synthesizer persona: the model's reply could not be "
                                         f"parsed twice: {self._scrub(str(error))}") from None
                messages = [*messages, *_corrective(error.text)]
                continue
            except LLMCallError as error:
                exchange["error"] = self._scrub(str(error))
                # a failed call may still have been billed, for how much is not known
                self.context.record_usage(Usage(
                    component="persona", provider=self.provider.kind, model=self.provider.model,
                    quantities={"input_token": None, "output_token": None, "request": 1},
                    purpose=f"exchange {exchange['exchange']} (failed)"))
                raise ExecutionError(f"synthesizer persona: {self._scrub(str(error))}") from None
            exchange["decision"] = decision
            return self._act(decision, exchange)
        raise AssertionError("unreachable")

    def _spent(self, reported: Mapping[str, JsonValue] | None, messages: list[dict[str, str]],
               reply_text: str, exchange: Mapping[str, object]) -> None:
        """One model call's usage, recorded as it is spent (the service's count; an estimate
        from the characters when it reports none)."""
        self.context.record_usage(chat_usage(
            reported, component="persona", provider=self.provider.kind,
            model=self.provider.model, reply_text=reply_text,
            sent_text="".join(str(m.get("content", "")) for m in messages),
            purpose=f"exchange {exchange['exchange']}"))

    def _act(self, decision: _Decision, exchange: Mapping[str, object]) -> PersonaDecision:
        reason = decision["reason"] or "the simulated user ended the conversation"
        if decision["end_conversation"] and not decision["reply"]:
            return PersonaEnd("persona_ended", 0.0, reason)
        if decision["end_conversation"]:
            self._pending_end = reason
        self._history.append(("user", decision["reply"]))
        turn = sum(1 for role, _ in self._history if role == "user")
        return UserTurn(text=decision["reply"], source="synthesizer",
                        **hesitate(decision["reply"], self.settings.hesitation, seed=self.seed,
                                   turn=turn),
                        metadata={"exchange": exchange["exchange"], "reason": decision["reason"],
                                  "end_conversation": decision["end_conversation"],
                                  "model": self.provider.model,
                                  "model_version": exchange.get("model_version")})

    def _scrub(self, text: str) -> str:
        return self.context.scrubber.scrub_text(text)

    # --- prompts ----------------------------------------------------------------------------

    def _system_prompt(self) -> str:
        persona, scenario = self.context.persona, self.context.scenario
        behavior = persona.session_behavior
        lines = [
            "You are role-playing the USER, a human caller, in a spoken conversation with a "
            "voice assistant that is being tested. Stay in character. Never say you are "
            "simulated or an AI, and never take the assistant's role.",
            "", "# Your persona", f"- Name: {persona.name}",
        ]
        for label, value in (("Experience level", persona.experience_level),
                             ("Communication style", persona.communication_style),
                             ("Specialization", persona.specialization),
                             ("About you", persona.description)):
            if value:
                lines.append(f"- {label}: {value}")
        if persona.goals:
            lines.append("- Your goals, in order: " + "; ".join(persona.goals))
        traits = [text for flag, text in (
            (behavior.conclude_quickly, "you want to finish quickly"),
            (behavior.decline_extras, "you decline offers of anything beyond your goals"),
            (behavior.interrupts, "you are impatient and may cut the assistant short"),
        ) if flag]
        traits.append(f"your patience is {behavior.patience}")
        lines.append("- Behaviour: " + "; ".join(traits))
        lines += ["", "# Scenario", f"{scenario.id}: {scenario.description}".rstrip(": ")]
        if self.context.data:
            lines += ["", "# Facts you know (give them when asked; do not recite them all at once)",
                      json.dumps(dict(self.context.data), indent=2, default=str,
                                 ensure_ascii=False)]
        length = "one short sentence" if persona.is_concise else "one to three short sentences"
        language = scenario.language or persona.language
        lines += [
            "", "# How to answer",
            f"Your reply is converted to speech in {language}: write only the words you "
            "would say aloud, with no stage directions, markup, emojis or lists, in "
            f"{length}. Aim to reach your goals within about {self.max_turns_hint} of your "
            "turns.",
            "Respond with only a JSON object: {\"reply\": \"<what you say next>\", "
            "\"end_conversation\": <true|false>, \"reason\": \"<one short sentence on why, for "
            "the test log>\"}.",
            "Set end_conversation to true when your goals are met, the assistant has ended the "
            "call, or continuing is pointless; reply may then hold a short farewell, or be empty.",
        ]
        lines += disfluency_instructions(persona.disfluency, language=language)
        if self.settings.system_prompt_extra.strip():
            lines += ["", self.settings.system_prompt_extra.strip()]
        return "\n".join(lines)

    def _turn_prompt(self, response: ProductResponse | None) -> str:
        earlier = self._history[:-1] if response is not None else self._history
        parts = []
        if earlier:
            parts.append("Conversation so far:\n" + "\n".join(
                f"{'ASSISTANT' if speaker == 'assistant' else 'YOU'}: {text}"
                for speaker, text in earlier))
        if response is None:
            parts.append("The call has just connected and you speak first. What do you say?")
        else:
            heard = (response.input_transcript or "").strip()
            said = next((text for speaker, text in reversed(earlier) if speaker == "user"), "")
            if heard and _words(heard) != _words(said):
                parts.append(f"The assistant's speech recognition heard your last turn as: "
                             f"\"{heard}\"")
            note = "" if response.status == "completed" else f" (its response was {response.status})"
            parts.append(f"The assistant just said{note}:\n{_product_text(response)}\n\n"
                         "What do you say next?")
        parts.append("Answer with the JSON object only.")
        return "\n\n".join(parts)


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.casefold())


def _product_text(response: ProductResponse) -> str:
    return response.transcript.strip() or "[the assistant's response had no transcript]"


class _Decision(TypedDict):
    """What the simulated user decided: its reply, whether it ends the call, and why."""

    reply: str
    end_conversation: bool
    reason: str


def _decision(data: Mapping[str, JsonValue]) -> _Decision:
    reply = data.get("reply", "")
    end = data.get("end_conversation", False)
    reason = data.get("reason", "")
    if not isinstance(reply, str) or not isinstance(end, bool) or not isinstance(reason, str):
        raise UnparseableReplyError("the JSON object does not have the expected types "
                                    "(reply: str, end_conversation: bool, reason: str)",
                                    text=json.dumps(data))
    if not end and not reply.strip():
        raise UnparseableReplyError("the reply is empty but end_conversation is false",
                                    text=json.dumps(data))
    return {"reply": reply.strip(), "end_conversation": end, "reason": reason.strip()}


def _corrective(previous: str | None) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": previous or ""},
            {"role": "user", "content": "That was not a JSON object with the keys reply "
             "(string), end_conversation (boolean) and reason (string). Answer again with only "
             "that JSON object."}]
