"""Third-party plug-ins found through entry points, for real: each test writes an installed
distribution (a ``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt``, and the
plug-in's module) into a folder on ``sys.path``, where ``importlib.metadata`` finds it.

Each test uses a registry of its own (the module-level ones read their group once per process)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from voicelab import _registry
from voicelab._registry import Registry
from voicelab.errors import ConfigError

GROUP = "voicelab.adapters"
KEY = "endpoint.adapter"
PLUGIN_MODULES = ("acme_voice_plugin", "other_voice_plugin", "broken_voice_plugin")

ADAPTER_MODULE = """
class PhoneAdapter:
    capabilities = {"streaming_input": True, "streaming_output": True}
"""


class Builtin:
    """What the registry's built-in name points to."""


def install(site: Path, distribution: str, entry_points: dict[str, str],
            modules: dict[str, str]) -> None:
    """An installed distribution, as pip leaves one: its metadata folder and its modules."""
    info = site / f"{distribution.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    lines = [f"{name} = {target}" for name, target in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join([f"[{GROUP}]", *lines, ""]))
    for module, text in modules.items():
        (site / f"{module}.py").write_text(text)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for module in PLUGIN_MODULES:
        sys.modules.pop(module, None)


def adapters() -> Registry:
    return Registry("endpoint adapter", {"websocket": f"{__name__}:Builtin"}, group=GROUP)


def test_a_name_a_distribution_registers_resolves_to_its_class(site: Path) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    adapter = adapters().resolve("acme_phone", key=KEY)
    assert adapter.__name__ == "PhoneAdapter" and adapter.__module__ == "acme_voice_plugin"


def test_a_built_in_name_wins_and_the_plug_in_is_never_imported(site: Path) -> None:
    install(site, "acme-voice", {"websocket": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": "raise RuntimeError('must not be imported')\n"})
    registry = adapters()
    assert registry.resolve("websocket", key=KEY) is Builtin
    assert "acme_voice_plugin" not in sys.modules
    with pytest.raises(ConfigError) as caught:
        registry.resolve("nothing_by_this_name", key=KEY)
    assert "websocket (acme-voice; hidden by the built-in)" in str(caught.value)


def test_entry_points_are_read_only_for_a_name_not_built_in_and_once(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    reads: list[str] = []
    real_entry_points = _registry.entry_points

    def counting(*, group: str) -> object:
        reads.append(group)
        return real_entry_points(group=group)

    monkeypatch.setattr(_registry, "entry_points", counting)
    registry = adapters()
    registry.resolve("websocket")
    registry.resolve(f"{__name__}.Builtin")
    assert reads == []
    registry.resolve("acme_phone")
    registry.resolve("acme_phone")
    assert reads == [GROUP]


def test_a_plug_in_failing_to_import_is_a_config_error_naming_the_distribution(
        site: Path) -> None:
    install(site, "broken-voice", {"acme_phone": "broken_voice_plugin:PhoneAdapter"},
            {"broken_voice_plugin": "raise RuntimeError('no licence file\\nfound')\n"})
    with pytest.raises(ConfigError) as caught:
        adapters().resolve("acme_phone", source="run.yaml", key=KEY)
    line = str(caught.value)
    assert line.startswith("run.yaml: endpoint.adapter: ") and "\n" not in line
    assert "'broken-voice'" in line and "RuntimeError: no licence file found" in line


def test_a_name_two_distributions_register_is_a_config_error_naming_both(site: Path) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    install(site, "other-voice", {"acme_phone": "other_voice_plugin:PhoneAdapter"},
            {"other_voice_plugin": ADAPTER_MODULE})
    with pytest.raises(ConfigError) as caught:
        adapters().resolve("acme_phone", key=KEY)
    assert caught.value.key == KEY
    assert "(acme-voice, other-voice)" in caught.value.message
    assert "acme_voice_plugin" not in sys.modules and "other_voice_plugin" not in sys.modules


def test_one_distribution_found_twice_on_the_path_is_not_a_duplicate(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    copy = site.parent / "copy"
    install(copy, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"}, {})
    monkeypatch.syspath_prepend(str(copy))
    assert adapters().resolve("acme_phone").__name__ == "PhoneAdapter"


def test_an_unknown_name_lists_the_built_ins_and_the_installed_plug_ins(site: Path) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    with pytest.raises(ConfigError) as caught:
        adapters().resolve("acme_fone", key=KEY)
    message = caught.value.message
    assert "unknown endpoint adapter 'acme_fone'; built-in: websocket" in message
    assert f"plug-ins installed under '{GROUP}': acme_phone (acme-voice)" in message


def test_a_registry_without_plug_ins_says_none_are_installed(site: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        adapters().resolve("acme_phone", key=KEY)
    assert f"plug-ins installed under '{GROUP}': none" in caught.value.message


def test_every_registry_reads_its_own_group() -> None:
    from voicelab.endpoints import ENDPOINTS
    from voicelab.execution import EXECUTORS
    from voicelab.personas import PERSONAS
    from voicelab.scoring import PROBES
    from voicelab.speech import SPEECH_PROVIDERS

    groups = [registry.group for registry in (ENDPOINTS, PERSONAS, SPEECH_PROVIDERS, PROBES,
                                              EXECUTORS)]
    assert groups == ["voicelab.adapters", "voicelab.personas", "voicelab.speech",
                      "voicelab.probes", "voicelab.executors"]


def test_a_distribution_without_a_name_is_listed_as_unnamed(site: Path) -> None:
    install(site, "acme-voice", {"acme_phone": "acme_voice_plugin:PhoneAdapter"},
            {"acme_voice_plugin": ADAPTER_MODULE})
    (site / "acme_voice-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\n")
    with pytest.raises(ConfigError) as caught:
        adapters().resolve("acme_fone", key=KEY)
    assert "acme_phone ((unnamed))" in caught.value.message
