"""What a lossy phone line does to what the product understands: input WER against packet loss.

Runs the local speech demo (``examples/run-local-speech.yaml``: piper speaks, the demo agent
hears with pocketsphinx) through a line toward the product (G.711 mu-law unless ``--codec``
says otherwise), at several independent
packet-loss rates, a few seeded trials each, and reads back each turn's ``input_wer`` (what the
agent heard against what the user said) and ``to_product_loss_rate`` (the packets the line
actually dropped in that turn). Prints a table per configured rate and the rank correlation of
WER with the measured loss; with matplotlib installed (the ``notebooks`` extra) it also writes a
scatter plot. Run from the repository root (about 10 s per trial):

    python benchmarks/bench_channel_wer.py [--rates 0 0.05 0.1 0.2 0.3] [--trials 4]
        [--concealment silence|repeat] [--codec pcm|mulaw|alaw|opus]
        [--out artifacts/bench-channel-wer]

The environment is quiet apart from the line, so the loss is the only thing that changes.
Printed, not asserted: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import yaml

import voicelab
from voicelab.artifacts import read_json

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "examples" / "run-local-speech.yaml"


def environment(folder: Path, rate: float, concealment: str, codec: str) -> Path:
    path = folder / f"phone-loss-{rate:g}.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"phone-loss-{rate:g}", "impact": 0.0,
        "channel": {"to_product": {"codec": codec, "packet_ms": 20,
                                   "loss": {"model": "independent", "rate": rate},
                                   "concealment": {"policy": concealment}}}}))
    return path


def turns_of(bundle: Path) -> list[dict]:
    rows = []
    for folder in sorted(bundle.glob("trial-*")):
        for turn in read_json(folder / "voice-metrics.json")["turns"]:
            if turn.get("input_wer") is not None:
                rows.append(turn)
    return rows


def spearman(x: list[float], y: list[float]) -> float:
    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        result = [0.0] * len(values)
        start = 0
        while start < len(order):
            end = start
            while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
                end += 1
            for k in range(start, end + 1):
                result[order[k]] = (start + end) / 2
            start = end + 1
        return result

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else float("nan")


def plot(points: list[tuple[float, float, float]], path: Path, codec: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot (matplotlib is in the notebooks extra)"
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.scatter([p[1] for p in points], [p[2] for p in points], c=[p[0] for p in points],
                 cmap="viridis")
    axes.set_xlabel("packets lost toward the product in the turn (measured)")
    axes.set_ylabel("input WER (demo agent, pocketsphinx)")
    axes.set_title(f"{codec} line, independent loss (colour: configured rate)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return f"plot: {path}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.3])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--concealment", choices=("silence", "repeat"), default="silence")
    parser.add_argument("--codec", choices=("pcm", "mulaw", "alaw", "opus"), default="mulaw")
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "bench-channel-wer")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    points: list[tuple[float, float, float]] = []
    print(f"{'configured loss':>16} {'turns':>6} {'measured loss':>14} {'mean WER':>9} "
          f"{'median WER':>11}")
    with tempfile.TemporaryDirectory() as scratch:
        for rate in args.rates:
            env = environment(Path(scratch), rate, args.concealment, args.codec)
            outcome = voicelab.run(RUN, voicelab.RunOptions(
                trials=args.trials,
                artifacts_dir=args.out / "runs",
                overrides=[f"environment_path={env}"]))
            rows = turns_of(outcome.bundle_path)
            for row in rows:
                points.append((rate, row["to_product_loss_rate"], row["input_wer"]))
            wers = [row["input_wer"] for row in rows]
            losses = [row["to_product_loss_rate"] for row in rows]
            if not rows:
                print(f"{rate:>16.2f} {0:>6} (no turn with an input WER)")
                continue
            print(f"{rate:>16.2f} {len(rows):>6} {statistics.fmean(losses):>14.3f} "
                  f"{statistics.fmean(wers):>9.3f} {statistics.median(wers):>11.3f}")
    if len(points) > 2:
        rho = spearman([p[1] for p in points], [p[2] for p in points])
        print(f"Spearman rank correlation of WER with measured loss: {rho:.2f} "
              f"over {len(points)} turns")
    print(plot(points, args.out / f"wer-vs-loss-{args.codec}.png", args.codec))


if __name__ == "__main__":
    main()
