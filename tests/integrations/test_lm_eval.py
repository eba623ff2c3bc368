"""moverkit.lm_eval (issue 62): moverkit's metrics in lm-evaluation-harness's registry. The per-item
function passes a document through, the aggregation scores a task's items in one call and reports
the mean of the function's scores; ``lm_eval.simple_evaluate`` runs docs/lm_eval_task (its metrics,
on a few WMT17 documents instead of WMT16) with a tiny causal LM made in the test. The task ships in
the wheel (``moverkit.lm_eval.TASKS``), and its metrics' arguments are checked when lm-eval loads
it, before any generation (issue 67)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from lm_eval.api.registry import get_aggregation, get_metric, get_metric_aggregation, is_higher_better  # noqa: E402

from moverkit import functional  # noqa: E402
from moverkit.facts.specs import SPECS  # noqa: E402
from moverkit.integrations import lm_eval as moverkit_lm_eval  # noqa: E402

TASK = moverkit_lm_eval.TASKS
PREDICTIONS = ["the cat sat on the mat", "stocks fell sharply on monday", "home"]
REFERENCES = ["a cat was sitting on the mat", "shares dropped on monday", "he went home"]


def _mean(values) -> float:
    return math.fsum(values) / len(values)


def _labels():
    for name, spec in SPECS.items():
        for output in spec.outputs:
            yield name, output, name if output == spec.main else f"{name}_{output}"


@pytest.mark.parametrize(("name", "output", "label"), list(_labels()))
def test_each_output_is_registered_with_its_aggregation_and_direction(name, output, label):
    passed = get_metric(label)
    assert passed is getattr(moverkit_lm_eval, label) and passed.__name__ == label
    assert get_metric_aggregation(label) is get_aggregation(label)
    assert is_higher_better(label) is SPECS[name].higher_is_better
    assert passed(references=[REFERENCES[0]], predictions=[PREDICTIONS[0]]) == (REFERENCES[0], PREDICTIONS[0], {})


def _aggregated_is_the_mean(name):
    items = [getattr(moverkit_lm_eval, name)(references=[r], predictions=[p]) for p, r in zip(PREDICTIONS, REFERENCES)]
    result = getattr(functional, name)(PREDICTIONS, REFERENCES)  # a whole-corpus door: the metric's defaults
    for output in SPECS[name].outputs:  # moverscore: IDF over the task's references, as the evaluate module
        label = name if output == SPECS[name].main else f"{name}_{output}"
        expected = result[output] if len(SPECS[name].outputs) > 1 else result[name]
        assert get_aggregation(label)(items) == _mean(expected), label


def test_the_aggregation_is_the_mean_of_the_functions_scores():
    _aggregated_is_the_mean("twmd")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(SPECS) - {"twmd"}))
def test_every_metrics_aggregation_is_the_mean_of_its_scores(name):
    _aggregated_is_the_mean(name)


def test_lm_evals_own_metrics_stay_registered():
    # moverkit.lm_eval imports lm-eval's metrics first: its registries load them only while empty
    assert get_aggregation("chrf") is not None and get_metric("bleu") is not None


def test_the_arguments_of_a_task_entry_reach_the_call(monkeypatch):
    passed = moverkit_lm_eval.twmd
    items = [passed(references=[r], predictions=[p], temperature=0.05) for p, r in zip(PREDICTIONS, REFERENCES)]
    assert get_aggregation("twmd")(items) == _mean(functional.twmd(PREDICTIONS, REFERENCES, temperature=0.05)["twmd"])
    with pytest.raises(ValueError, match="unknown argument 'temprature'"):  # not a TypeError: lm-eval would swallow it
        passed(references=["a"], predictions=["a"], temprature=0.05)


def test_metric_checks_its_arguments_by_name_and_value_when_made():
    twmd = moverkit_lm_eval.metric("twmd", temperature=0.05)
    assert twmd.__name__ == "twmd" and twmd(references=["a"], predictions=["b"]) == ("a", "b", {"temperature": 0.05})
    assert moverkit_lm_eval.metric("centered_bertscore", output="recall").__name__ == "centered_bertscore_recall"
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        moverkit_lm_eval.metric("twmd", temperature=-1)
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        moverkit_lm_eval.metric("twmd", temprature=0.1)
    with pytest.raises(ValueError, match="given by the task's entry and by the metric"):
        twmd(references=["a"], predictions=["b"], temperature=0.2)
    with pytest.raises(
        ValueError, match="temperature must be a finite number"
    ):  # an entry's own, at its first document
        moverkit_lm_eval.twmd(references=["a"], predictions=["b"], temperature=-1)


def _local_task(tmp_path, documents: Path, metrics: str | None = None) -> Path:
    """The shipped task, copied with its dataset replaced by a local file (and its metrics file by
    ``metrics``)."""
    task = tmp_path / "task"
    shutil.copytree(TASK, task)
    yaml = (task / "moverkit_wmt16.yaml").read_text(encoding="utf-8")
    hub = "dataset_path: wmt/wmt16\ndataset_name: de-en\n"
    assert hub in yaml and "max_gen_toks: 128" in yaml
    local = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {documents}\n"
    (task / "moverkit_wmt16.yaml").write_text(yaml.replace(hub, local).replace("max_gen_toks: 128", "max_gen_toks: 8"))
    if metrics is not None:
        (task / "moverkit_metrics.py").write_text(metrics, encoding="utf-8")
    return task


def test_a_wrong_argument_stops_the_task_when_lm_eval_loads_it(tmp_path):
    from lm_eval.tasks import TaskManager, get_task_dict

    documents = tmp_path / "documents.jsonl"
    documents.write_text(json.dumps({"translation": {"de": "a", "en": "b"}}) + "\n")
    shipped = (TASK / "moverkit_metrics.py").read_text(encoding="utf-8")
    assert 'metric("twmd", temperature=0.1)' in shipped
    wrong = _local_task(tmp_path, documents, shipped.replace("temperature=0.1", "temperature=-1"))
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        get_task_dict(["moverkit_wmt16_de_en"], TaskManager(include_path=str(wrong)))


def test_the_task_ships_in_the_wheel():
    import fnmatch

    import tomllib

    root = Path(__file__).resolve().parents[2]
    shipped = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = shipped["package-data"]["moverkit"]
    files = sorted(p.relative_to(root / "metrics").as_posix() for p in TASK.iterdir() if p.is_file())
    assert files == ["examples/lm_eval_task/moverkit_metrics.py", "examples/lm_eval_task/moverkit_wmt16.yaml"]
    assert all(
        any(fnmatch.fnmatch(f, pattern) and "/" not in f[len(pattern.split("*")[0]) :] for pattern in patterns)
        for f in files
    )


def test_the_outputs_of_one_metric_share_one_call(monkeypatch):
    from moverkit.integrations import adapter

    calls = []
    score = adapter.score
    monkeypatch.setattr(adapter, "score", lambda *a: calls.append(1) or score(*a))
    items = [
        moverkit_lm_eval.centered_bertscore(references=[r], predictions=[p])
        for p, r in zip(PREDICTIONS[:2], REFERENCES[::-1][:2])
    ]
    for label in ("centered_bertscore", "centered_bertscore_precision", "centered_bertscore_recall"):
        get_aggregation(label)(list(items))
    assert len(calls) == 1


def test_items_lm_eval_made_binary_or_mixed_are_refused():
    with pytest.raises(ValueError, match="multiple_target"):
        get_aggregation("twmd")([1.0, 0.0])
    with pytest.raises(ValueError, match="no item"):
        get_aggregation("twmd")([])
    with pytest.raises(ValueError, match="two sets of arguments"):
        get_aggregation("twmd")([("a", "a", {}), ("b", "b", {"temperature": 0.1})])


@pytest.mark.integration
@pytest.mark.slow
def test_simple_evaluate_reports_the_mean_of_the_functions_scores(tmp_path, wmt17_full, tiny_causal_lm):
    """The docs' task on 6 WMT17 documents (the system translation stands in for the German side:
    the tiny random LM writes nonsense either way), generated by a 2-layer GPT-2 with the embedded
    model's WordPiece vocabulary; each moverkit value lm-eval reports is the mean of the function's
    scores on the generations it logged."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    model, tokenizer = tiny_causal_lm(256)
    model.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    documents = tmp_path / "documents.jsonl"
    rows = zip(wmt17_full.predictions[:6], wmt17_full.references[:6])
    documents.write_text("".join(json.dumps({"translation": {"de": h, "en": r}}) + "\n" for h, r in rows))
    task = _local_task(tmp_path, documents)

    out = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={tmp_path / 'lm'},dtype=float32",
        tasks=["moverkit_wmt16_de_en"],
        device="cpu",
        batch_size=6,
        log_samples=True,
        task_manager=TaskManager(include_path=str(task)),
    )
    reported = out["results"]["moverkit_wmt16_de_en"]
    samples = sorted(out["samples"]["moverkit_wmt16_de_en"], key=lambda s: s["doc_id"])
    generations = [s["filtered_resps"][0] for s in samples]
    targets = [s["target"] for s in samples]
    assert targets == list(wmt17_full.references[:6]) and len(generations) == 6
    assert reported["twmd,none"] == _mean(functional.twmd(generations, targets)["twmd"])
    assert reported["centered_bertscore,none"] == _mean(functional.centered_bertscore(generations, targets)["f1"])
    assert reported["twmd_stderr,none"] == "N/A" and reported["chrf,none"] >= 0
