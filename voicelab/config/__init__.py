"""Configuration: models of every file a run reads, loading, overrides, secrets and hashing."""

from ._base import StrictModel
from ._channel import (
    ChannelConfig,
    ConcealmentConfig,
    GilbertElliottLoss,
    IndependentLoss,
    JitterConfig,
    LineConfig,
    OpusConfig,
)
from ._cost import (
    COMPONENTS,
    UNITS,
    BudgetConfig,
    Component,
    LowerBoundGate,
    MinPassRateGate,
    Price,
    PricingConfig,
    StageConfig,
    StageGate,
    Unit,
)
from ._entities import EntityKind, EntitySpec
from ._environment import (
    QUIET_ENVIRONMENT,
    EchoConfig,
    EnvironmentConfig,
    NoiseProbe,
    RoomImpulseResponse,
    TransientEvent,
)
from ._launch import LaunchConfig
from ._loader import load_environment, load_pricing, load_run, read_yaml
from ._overrides import (
    DOCUMENT_KINDS,
    Override,
    apply_overrides,
    format_key_path,
    validate_model,
)
from ._pauses import (
    MAX_PAUSE_SECONDS,
    MAX_PAUSES_PER_SCRIPT,
    MAX_PAUSES_PER_TURN,
    SpokenPieces,
    has_pause_markers,
    split_pauses,
)
from ._persona import PersonaConfig, ScriptConfig, ScriptTurn, SessionBehavior
from ._providers import (
    AzureOpenAIProvider,
    AzureSpeechProvider,
    OpenAIProvider,
    Providers,
    VoiceLiveProvider,
)
from ._quality import AzureEvaluator, CustomJudge, JudgeConfig, QualityEvaluation, Redaction
from ._recorded import RECORDED_KINDS, load_recorded_run
from ._resolved import LoadedRun, file_sha256, recorded_overrides
from ._retention import AudioRetention, BundleAccess, RetentionConfig, TranscriptRetention
from ._run import (
    EndpointConfig,
    ListenerConfig,
    MeasurementConfig,
    OutcomeProbeConfig,
    RunConfig,
    TranscriptionConfig,
)
from ._scenario import (
    CAPABILITY_NAMES,
    MAX_TRIAL_SECONDS,
    ConversationSpec,
    EvalSpec,
    IvrPrompt,
    IvrSpec,
    Limits,
    ScenarioConfig,
)
from ._secrets import (
    MASK,
    SecretScrubber,
    command_secret_values,
    distinct_key,
    is_secret_env_var,
    is_secret_name,
    known_secrets_scrubber,
    mask_known,
    mask_url,
    remember_secrets,
    remember_text_filter,
    url_secret_values,
)
from ._settings import parse_settings, settings_error
from ._statistics import GateConfig, StatisticsConfig
from ._suite import (
    LoadedSuite,
    cell_overrides,
    check_names_unique,
    load_suite,
    pricing_overrides,
)
from ._suite_models import EndpointingAxis, SuiteConfig, SuitePersona
from ._turn_taking import OLD_TURN_TAKING, TURN_TAKING, spelled_for, with_old_spelling
from ._voice import DISFLUENCY_PROFILES, DisfluencyConfig, PersonaSpeech

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__ = [
    "EndpointingAxis",
    "MeasurementConfig",
    "SecretScrubber",
    "parse_settings",
    "mask_known",
    "load_environment",
    "load_run",
    "load_suite",
    "PersonaSpeech",
]
