"""Leave-one-group-out fine-tuning of TWMD-b, the tempered-WMD paper's Table 4 experiment at this
project's scale (Chen et al., 2020, Section 6: fine-tuned on some human ratings, evaluated on others).

For each group (language pair) of a judgments TSV: fine-tune the encoder on the other groups
(:func:`moverkit.finetune.finetune`), then score the held-out group with TWMD-b on the fine-tuned
folder, and report per-group Kendall tau / Pearson r against TWMD-b and BERTScore-F1 on the base
model::

    python -m benchmarks._finetune --data wmt17_seg_da_to_en.tsv --work /tmp/lolo --out lolo.md

Each fold's figures are appended to ``WORK/folds.jsonl`` as soon as they exist (a rerun skips the
folds already there); the Markdown table is written at the end.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def evaluate(predictions, references, human, model_type=None) -> dict:
    """Kendall tau and Pearson r of TWMD-b and BERTScore-F1 on one held-out group (one call each:
    batch centering over the group)."""
    from moverkit.functional.centered_bertscore import centered_bertscore
    from moverkit.functional.twmd import twmd as twmd_scores
    from moverkit.judgments.correlation import correlate

    twmd = twmd_scores(predictions, references, model_type=model_type, centering="batch")
    bertscore = centered_bertscore(predictions, references, model_type=model_type, centering="none")
    figures = {}
    for label, scores in (("twmd_b", twmd["twmd"]), ("bertscore_f1", bertscore["f1"])):
        r, tau = correlate(scores, human)
        figures[label] = {"pearson": r, "kendall": tau}
    figures["twmd_b_hashcode"] = twmd["hashcode"]
    return figures


def run(data_path: Path, work: Path, epochs: int, seed: int, groups: list[str] | None) -> list[dict]:
    import datasets

    from moverkit.finetune import finetune
    from moverkit.judgments import read_judgments

    data = read_judgments(data_path)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "folds.jsonl"
    done = {}
    if log.exists():
        done = {f["held_out"]: f for f in map(json.loads, log.read_text().splitlines())}
    index = data.by_group()
    for held_out in groups or list(index):
        if held_out in done:
            continue
        test = index[held_out]
        train = [i for g, members in index.items() if g != held_out for i in members]
        table = datasets.Dataset.from_dict(
            {
                "lp": [data.groups[i] for i in train],
                "hypothesis": [data.predictions[i] for i in train],
                "reference": [data.references[i] for i in train],
                "human": [data.human[i] for i in train],
            }
        )
        folder = work / f"twmd-b-without-{held_out}"
        result = finetune(table, folder, epochs=epochs, seed=seed)
        args = ([data.predictions[i] for i in test], [data.references[i] for i in test], [data.human[i] for i in test])
        fold = {
            "held_out": held_out,
            "n_train": result.n_train,
            "n_validation": result.n_validation,
            "seconds_per_epoch": result.seconds_per_epoch,
            "cpu_seconds_per_epoch": result.cpu_seconds_per_epoch,
            "epochs_run": len(result.history),
            "validation_before": result.validation_before,
            "validation_after": result.validation_after,
            "history": result.history,
            "untrained": evaluate(*args),
            "finetuned": evaluate(*args, model_type=str(folder)),
        }
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(fold) + "\n")
        done[held_out] = fold
        print(json.dumps({k: fold[k] for k in ("held_out", "seconds_per_epoch", "untrained", "finetuned")}), flush=True)
    return [done[g] for g in (groups or list(index)) if g in done]


def format_table(folds: list[dict]) -> str:
    """Markdown: per held-out group, tau / r (x100) of BERTScore-F1 and TWMD-b untrained, TWMD-b
    fine-tuned, its gain, and the training time per epoch; then the averages."""
    lines = [
        "| held-out pair | BERTScore-F1 (base) | TWMD-b (base) | TWMD-b (fine-tuned) | gain tau / r | BERTScore-F1 (fine-tuned) | s / epoch |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(f):
        return f"{100 * f['kendall']:.1f} / {100 * f['pearson']:.1f}"

    rows = []
    for fold in folds:
        base, tuned = fold["untrained"], fold["finetuned"]
        gain = {k: tuned["twmd_b"][k] - base["twmd_b"][k] for k in ("kendall", "pearson")}
        rows.append((base["bertscore_f1"], base["twmd_b"], tuned["twmd_b"], gain, tuned["bertscore_f1"]))
        lines.append(
            f"| {fold['held_out']} | {cell(base['bertscore_f1'])} | {cell(base['twmd_b'])} | {cell(tuned['twmd_b'])} "
            f"| {100 * gain['kendall']:+.1f} / {100 * gain['pearson']:+.1f} | {cell(tuned['bertscore_f1'])} "
            f"| {fold['seconds_per_epoch']:.0f} |"
        )
    if rows:
        mean = [{k: float(np.mean([row[c][k] for row in rows])) for k in ("kendall", "pearson")} for c in range(5)]
        seconds = np.mean([fold["seconds_per_epoch"] for fold in folds])
        lines.append(
            f"| **average** | {cell(mean[0])} | {cell(mean[1])} | {cell(mean[2])} "
            f"| {100 * mean[3]['kendall']:+.1f} / {100 * mean[3]['pearson']:+.1f} | {cell(mean[4])} | {seconds:.0f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="judgments TSV (lp, hypothesis, reference, human)")
    parser.add_argument("--work", required=True, type=Path, help="folder for the fine-tuned models and folds.jsonl")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--groups", nargs="*", help="held-out groups to run (default: all)")
    parser.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args(argv)
    table = format_table(run(args.data, args.work, args.epochs, args.seed, args.groups))
    print(table)
    if args.out:
        from moverkit.formats.lines import write_atomic

        write_atomic(args.out, table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
