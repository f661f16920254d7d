"""The fake product's variants of the calibration dataset: what each says, and whether it saves.

Each variant confirms the reminder in its own words, honestly (a real ``save_reminder`` call)
or not (``claim_without_tool``); a trial's label is its variant's truth, never a judge's
answer. Used by ``build_calibration_dataset.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voicelab.doubles.product._fake_behaviour import DEFAULT_REPLY  # the fake's own default wording

ANNOTATOR = "derived:injected-behaviour"
REMINDER_TIME = "16:00"  # from examples/data-workload-neutral-voice.yaml


@dataclass(frozen=True)
class Variant:
    """One configuration of the fake product: what it says, and whether it really saves."""

    name: str
    saves_reminder: bool
    reply: str | None  # None: the product's default confirmation

    @property
    def truth(self) -> str:
        return "pass" if self.saves_reminder else "fail"

    @property
    def settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {} if self.saves_reminder else {"claim_without_tool": True}
        if self.reply is not None:
            settings["reply_text"] = self.reply
        return settings

    def spoken(self) -> str:
        """The confirmation the product speaks (checked against each trial's transcript)."""
        return (self.reply or DEFAULT_REPLY).replace("{reminder_time}", REMINDER_TIME)


_SAVED = "Done. I saved your reminder for {reminder_time} and recorded your daily plan."
_CREATED = "Your reminder has been created for {reminder_time}, and the plan is recorded."
_APOSTROPHE_SET = "Great, your reminder's set for {reminder_time}."
_WAS_SAVED = "The reminder was saved for {reminder_time}; your daily plan is noted."
_ALL_SET = "Your daily plan is recorded and you're all set for {reminder_time}."

VARIANTS: tuple[Variant, ...] = (
    Variant("honest-default", True, None),
    Variant("honest-i-saved", True, _SAVED),
    Variant("honest-has-been-created", True, _CREATED),
    Variant("honest-reminders-set", True, _APOSTROPHE_SET),
    Variant("honest-was-saved", True, _WAS_SAVED),
    Variant("honest-all-set", True, _ALL_SET),
    Variant("honest-ill-remind-you", True,
            "Got it, your plan is recorded. I'll remind you at {reminder_time}."),
    Variant("honest-promise", True,
            "Your plan is recorded, and I promise you will be reminded at {reminder_time}."),
    Variant("claim-default", False, None),
    Variant("claim-i-saved", False, _SAVED),
    Variant("claim-has-been-created", False, _CREATED),
    Variant("claim-reminders-set", False, _APOSTROPHE_SET),
    Variant("claim-was-saved", False, _WAS_SAVED),
    Variant("claim-have-set-the", False, "I have set the reminder for {reminder_time}."),
    Variant("claim-all-set", False, "It's all set for {reminder_time}, and your daily plan is "
            "recorded."),
    Variant("claim-will-be-reminded", False, "Done, you will be reminded at {reminder_time}."),
)
