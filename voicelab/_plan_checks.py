"""The parts of a run checked at ``validate`` that are no plug-in's: script recordings decoded,
the telephone line's codecs, what only a live line can do, and scoring's packages, gates,
verdicts, per-response metrics and judges."""

from __future__ import annotations

import importlib.util

from .audio import PcmAudio
from .config import LoadedRun
from .errors import AudioFileError, ConfigError, MissingDependencyError


def script_audio(loaded: LoadedRun) -> dict[int, PcmAudio]:
    """The script's recorded turns, decoded once (by turn index)."""
    from .audio import read_audio

    decoded: dict[int, PcmAudio] = {}
    if loaded.script is None:
        return decoded
    for index, turn in enumerate(loaded.script.turns):
        if turn.audio_path is not None:
            try:
                decoded[index] = read_audio(turn.audio_path)
            except AudioFileError as error:
                raise AudioFileError(f"{error.message} ({turn.audio_path})",
                                     source=loaded.sources["script"],
                                     key=f"turns[{index}].audio_path") from None
    return decoded


def check_channel(loaded: LoadedRun) -> None:
    """Each telephony line's codec can be built (opus needs its optional package)."""
    from .audio import build_codec

    channel = loaded.environment.channel
    if channel is None:
        return
    for direction, line in (("to_product", channel.to_product), ("to_user", channel.to_user)):
        if line is None:
            continue
        try:
            build_codec(line)
        except MissingDependencyError as error:
            source = loaded.sources.get("environment") or loaded.run_path
            raise MissingDependencyError(error.package, extra=error.extra,
                                         purpose=f"channel.{direction}: the opus codec",
                                         source=str(source),
                                         key=f"channel.{direction}.codec") from None


def checked_scoring(loaded: LoadedRun, run_file: str) -> list[str]:
    """The speech metrics' packages, the gates' metrics and the judges (their names)."""
    from .metrics import run_turn_metrics
    from .scoring import check_gate_metrics, check_quality_evaluation, verdict_checks

    if loaded.run.speech_metrics:
        for module, package in (("jiwer", "jiwer"), ("pocketsphinx", "pocketsphinx"),
                                ("speechmos", "speechmos"), ("pystoi", "pystoi"),
                                ("pesq", "pesq"), ("onnxruntime", "onnxruntime")):
            if importlib.util.find_spec(module) is None:
                raise MissingDependencyError(package, extra="speech", purpose="speech_metrics",
                                             source=run_file, key="speech_metrics")
    check_gate_metrics(loaded.run.gates, source=run_file)
    verdict_checks(loaded)  # the run file's own verdicts import, and are verdicts
    run_turn_metrics(loaded)  # and its own per-response metrics
    if loaded.run.quality_evaluation is None:
        return []
    return check_quality_evaluation(loaded)


def check_line_only(loaded: LoadedRun, run_file: str) -> None:
    """Backchannels, noise probes and the echo need a live line (``server_vad``): in ``client``
    mode the user's audio is only sent as committed turns, so none of them can be played
    while the product speaks; say so instead of skipping them."""
    environment_file = str(loaded.sources.get("environment") or run_file)
    if loaded.environment.noise_probes:
        raise ConfigError("noise_probes play into the product's speech on a live line: they "
                          "need turn_taking server_vad", source=environment_file,
                          key="noise_probes")
    if loaded.environment.echo is not None:
        raise ConfigError("echo leaks the product's voice into a live line: it needs "
                          "turn_taking server_vad", source=environment_file, key="echo")
    script = loaded.script
    if script is not None:
        for index, turn in enumerate(script.turns):
            if turn.kind == "backchannel":
                raise ConfigError("a backchannel is said into the product's speech on a live "
                                  "line: it needs turn_taking server_vad",
                                  source=str(loaded.sources.get("script") or run_file),
                                  key=f"turns[{index}].kind")
            if turn.dtmf and turn.interrupt_after_seconds is not None:
                raise ConfigError("a key barge-in presses keys into the product's speech on a "
                                  "live line: it needs turn_taking server_vad",
                                  source=str(loaded.sources.get("script") or run_file),
                                  key=f"turns[{index}].interrupt_after_seconds")
