"""Cold start of `voice-evaluator validate`: fresh processes, and which heavy modules they import.

Target (issue): `voice-evaluator validate examples/run-workload-neutral-voice.yaml` under 1 s
cold, with pandas, librosa (numba), scipy and the cloud SDKs off the start-up path. Run from
anywhere:

    python benchmarks/bench_validate.py [--runs 7]

Each run is a new interpreter running the installed console script. Two bytecode situations are
timed: as this environment is (PYTHONDONTWRITEBYTECODE may forbid .pyc files, so voicelab is
compiled from source on every start) and with a warmed private bytecode cache
(PYTHONPYCACHEPREFIX in a temporary folder, so the repository gets no __pycache__ folders).
Printed, not asserted: this is not a timed test.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("examples/run-workload-neutral-voice.yaml", "examples/run-office-noise.yaml")
HEAVY = ("pandas", "librosa", "numba", "scipy", "sklearn", "matplotlib", "openai", "azure",
         "torch", "onnxruntime")
TARGET_SECONDS = 1.0

SYS_MODULES_PROBE = """
import sys
from voicelab.cli import main
code = main(['validate', sys.argv[1]])
heavy = {heavy!r}
found = sorted({{m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy}})
print('HEAVY-MODULES', ','.join(found) or '-', len(sys.modules))
sys.exit(code)
"""


def command() -> list[str]:
    script = Path(sys.executable).parent / "voice-evaluator"
    return [str(script)] if script.exists() else [sys.executable, "-m", "voicelab"]


def time_runs(run_file: str, runs: int, environ: dict[str, str]) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        completed = subprocess.run([*command(), "validate", run_file], cwd=REPO, env=environ,
                                   capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if completed.returncode != 0:
            raise SystemExit(f"validate failed ({completed.returncode}): {completed.stderr}")
    return times


def print_times(label: str, times: list[float]) -> None:
    best, median = min(times), statistics.median(times)
    verdict = "meets" if median < TARGET_SECONDS else "MISSES"
    print(f"  {label:<58} min {best:.3f} s | median {median:.3f} s | max {max(times):.3f} s "
          f"-> {verdict} the {TARGET_SECONDS:.0f} s target")


def heavy_modules(run_file: str, environ: dict[str, str]) -> str:
    probe = SYS_MODULES_PROBE.format(heavy=HEAVY)
    completed = subprocess.run([sys.executable, "-c", probe, run_file], cwd=REPO, env=environ,
                               capture_output=True, text=True, check=True)
    _, found, count = completed.stdout.splitlines()[-1].split()
    return f"heavy modules imported: {found if found != '-' else 'none'} ({count} modules)"


def slowest_imports(run_file: str, environ: dict[str, str], top: int = 8) -> list[str]:
    """The top-level imports with the largest cumulative time, from ``python -X importtime``."""
    code = f"import sys; from voicelab.cli import main; sys.exit(main(['validate', {run_file!r}]))"
    completed = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=REPO,
                               env=environ, capture_output=True, text=True, check=True)
    rows = []
    for line in completed.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if match and len(match.group(3)) <= 1:  # top-level entries only
            rows.append((int(match.group(2)), match.group(4)))
    rows.sort(reverse=True)
    return [f"{micros / 1000:7.1f} ms  {name}" for micros, name in rows[:top]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    base = dict(os.environ)
    print(f"bench_validate: {args.runs} fresh processes per line, {' '.join(command())}")
    print(f"  PYTHONDONTWRITEBYTECODE={base.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    with tempfile.TemporaryDirectory(prefix="voicelab-pycache-") as cache:
        cached = {**base, "PYTHONPYCACHEPREFIX": cache}
        cached.pop("PYTHONDONTWRITEBYTECODE", None)
        for run_file in EXAMPLES:
            print(f"{run_file}")
            print_times("as this environment is", time_runs(run_file, args.runs, base))
            time_runs(run_file, 1, cached)  # warms the private bytecode cache
            print_times("with a warm bytecode cache", time_runs(run_file, args.runs, cached))
            print(f"  {heavy_modules(run_file, base)}")
    print("slowest top-level imports of validate (python -X importtime, cumulative):")
    for line in slowest_imports(EXAMPLES[0], base):
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
