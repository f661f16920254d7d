"""Azure Speech provider pieces that need no socket: SSML, URLs, formats, Retry-After, check()."""

from __future__ import annotations

import email.utils
import time
import xml.etree.ElementTree as ElementTree

import pytest

from voicelab.config import Providers
from voicelab.errors import ConfigError, MissingDependencyError
from voicelab.speech import SpeechContext, _azure
from voicelab.speech._azure import (
    AzureSpeechProvider,
    build_ssml,
    output_sample_rate_hz,
    retry_after_seconds,
    tts_url,
    voice_locale,
)

NS = "{http://www.w3.org/2001/10/synthesis}"


def context(**azure_speech) -> SpeechContext:
    return SpeechContext(providers=Providers(azure_speech=azure_speech or None))


def parsed(ssml: str) -> tuple[ElementTree.Element, ElementTree.Element]:
    root = ElementTree.fromstring(ssml)
    return root, root.find(f"{NS}voice")


def test_ssml_escapes_markup_in_text_and_voice_and_round_trips():
    text = 'Tom & Jerry <b>"quoted"</b> it\'s 5 > 3'
    ssml = build_ssml(text, voice="en-US-Ava'Neural\"")
    assert "<b>" not in ssml and "&amp;" in ssml and "&lt;b&gt;" in ssml
    root, voice = parsed(ssml)
    assert root.tag == f"{NS}speak" and root.get("version") == "1.0"
    assert voice.get("name") == "en-US-Ava'Neural\""
    assert voice.text == text
    assert list(voice) == []  # the text's markup did not become elements


def test_ssml_language_comes_from_the_voice_or_the_setting():
    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    assert parsed(build_ssml("hola", voice="es-MX-DaliaNeural"))[0].get(lang) == "es-MX"
    assert parsed(build_ssml("x", voice="custom", language="fr-FR"))[0].get(lang) == "fr-FR"
    assert parsed(build_ssml("x", voice="custom"))[0].get(lang) == "en-US"


def test_ssml_drops_characters_xml_cannot_carry():
    _, voice = parsed(build_ssml("bell\x07 and nul\x00 gone", voice="en-US-AvaNeural"))
    assert voice.text == "bell and nul gone"


@pytest.mark.parametrize(("voice", "locale"), [
    ("en-US-AvaNeural", "en-US"),
    ("zh-CN-XiaoxiaoMultilingualNeural", "zh-CN"),
    ("Microsoft Server Speech Text to Speech Voice (de-DE, KatjaNeural)", "de-DE"),
    ("Ava", None),
])
def test_voice_locale(voice, locale):
    assert voice_locale(voice) == locale


def test_output_formats():
    assert output_sample_rate_hz("raw-24khz-16bit-mono-pcm") == 24_000
    assert output_sample_rate_hz("riff-16khz-16bit-mono-pcm") == 16_000
    assert output_sample_rate_hz("raw-22050hz-16bit-mono-pcm") == 22_050
    with pytest.raises(ConfigError, match="providers.azure_speech.output_format"):
        output_sample_rate_hz("audio-24khz-48kbitrate-mono-mp3")


@pytest.mark.parametrize(("config", "url"), [
    ({"region": "westeurope"}, "https://westeurope.tts.speech.microsoft.com/cognitiveservices/v1"),
    ({"endpoint": "http://127.0.0.1:8123"}, "http://127.0.0.1:8123/cognitiveservices/v1"),
    ({"endpoint": "https://my-res.cognitiveservices.azure.com/"},
     "https://my-res.cognitiveservices.azure.com/tts/cognitiveservices/v1"),
    ({"endpoint": "https://eastus.api.cognitive.microsoft.com/"},
     "https://eastus.tts.speech.microsoft.com/cognitiveservices/v1"),
    ({"endpoint": "https://proxy.example/speech/tts"}, "https://proxy.example/speech/tts"),
])
def test_tts_url(config, url):
    assert tts_url(Providers(azure_speech=config).azure_speech) == url


def test_retry_after_forms():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after_seconds({"retry-after": future}) <= 31


def test_check_needs_the_provider_section():
    with pytest.raises(ConfigError) as caught:
        AzureSpeechProvider.check_settings({}, SpeechContext())
    assert caught.value.key == "providers.azure_speech"


def test_check_needs_an_api_key_for_key_auth():
    with pytest.raises(ConfigError) as caught:
        AzureSpeechProvider.check_settings({}, context(region="eastus"))
    assert caught.value.key == "providers.azure_speech.api_key"


def test_check_default_credential_without_azure_identity(monkeypatch):
    monkeypatch.setattr(_azure, "_identity_installed", lambda: False)
    with pytest.raises(MissingDependencyError) as caught:
        AzureSpeechProvider.check_settings({}, context(region="eastus", auth="default_credential"))
    assert caught.value.message == ("Azure Speech with auth 'default_credential' needs the "
                                    "'azure-identity' package: pip install 'voicelab[azure]'")


def test_check_accepts_a_complete_configuration_without_network():
    AzureSpeechProvider.check_settings({"max_retries": 1}, context(region="eastus", api_key="k" * 32))
    AzureSpeechProvider.check_settings({}, context(endpoint="https://x.cognitiveservices.azure.com",
                                          auth="default_credential"))


def test_unknown_or_invalid_settings_are_config_errors():
    ctx = context(region="eastus", api_key="secret-key-value")
    with pytest.raises(ConfigError) as caught:
        AzureSpeechProvider({"retries": 2}, ctx)
    assert caught.value.key == "speech_settings.retries"
    assert "allowed:" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        AzureSpeechProvider({"timeout_seconds": 0}, ctx)
    assert caught.value.key == "speech_settings.timeout_seconds"


def test_provider_declares_caching_attributes():
    provider = AzureSpeechProvider({}, context(region="eastus", api_key="k" * 32))
    assert provider.cacheable is True and provider.seed_dependent is False
    assert provider.cache_identity["output_format"] == "raw-24khz-16bit-mono-pcm"
    assert "k" * 32 not in repr(provider.cache_identity)
