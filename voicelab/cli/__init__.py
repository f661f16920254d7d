"""`voice-evaluator`: the command line. It turns library errors into exit codes and one-line messages.

Exit codes (:mod:`voicelab._exit_codes`): 0 all trials executed and passed pass^k; 2 configuration,
asset or override error; 3 execution finished but a critical verdict failed; 4 a trial or provider
failed to execute; 130 interrupted (Ctrl-C) and 143 terminated (SIGTERM) after writing what was
gathered.

One private module per command group: ``_main`` (parser, dispatch, errors as exit codes),
``_validate`` (validate, plan), ``_run`` (run, sweep: progress, summaries, signals), ``_report``,
``_rescore`` and ``_init``. The commands call the same public API a notebook uses.
"""

from ._main import main
from ._parser import build_parser

# The public API (docs/api.md): what notebooks, scripts, plug-ins and the command line use.
# The other names imported above are voicelab's own, for its other packages.
__all__: list[str] = []
