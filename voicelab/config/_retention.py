"""What a trial's bundle keeps: the run config's ``retention:`` block (docs/artifacts.md,
"Retention")."""

from __future__ import annotations

from typing import Literal

from ._base import StrictModel

AudioRetention = Literal["all", "failed", "none"]
TranscriptRetention = Literal["full", "redacted"]
#: Who may read a bundle: its owner (folders 0700, files 0600), its owner's group too (0750,
#: 0640), or whoever the process's umask lets (what a plain ``mkdir`` gives).
BundleAccess = Literal["owner", "group", "umask"]


class RetentionConfig(StrictModel):
    """Which trials keep their audio, and whether the words of the conversation are written as
    they were said or redacted. The defaults keep everything.

    ``audio``: ``all`` keeps every trial's WAV files; ``failed`` keeps them only for trials
    whose status is not ``passed`` (failed or inconclusive: the evidence a person listens to);
    ``none`` keeps no trial's audio. ``transcripts``: ``redacted`` replaces, in every file
    that holds the conversation's words, what the redaction rules match (the built-in PII
    patterns, the judges' ``quality_evaluation.redaction`` rules and the run's secrets);
    verdicts are decided on the full words before anything is redacted. ``access``: who may
    read the bundle (``owner`` by default: it holds people's voices and words)."""

    audio: AudioRetention = "all"
    transcripts: TranscriptRetention = "full"
    access: BundleAccess = "owner"

    @property
    def keeps_everything(self) -> bool:
        return self.audio == "all" and self.transcripts == "full"
