"""moverkit.torchmetrics against the real torchmetrics and Lightning: update/compute gives the
function's numbers for all the pairs at once (both state layouts), in a MetricCollection, in a
Lightning validation loop, and under DDP with two gloo processes."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch
from torchmetrics import MetricCollection
from warm_python import offline_environment

import moverkit
from moverkit import functional
from moverkit.facts.specs import SPECS
from moverkit.integrations import torchmetrics as moverkit_torchmetrics
from moverkit.integrations.registry import REGISTRY
from moverkit.integrations.torchmetrics import TWMD, CenteredBERTScore, LazyEMD, MoverkitMetric, SBERTScore, pair_order

HERE = os.path.dirname(os.path.abspath(__file__))
"""This file's folder and, above it, tests/ (warm_python), on the path of the ranks' fresh Python."""
CLASS_NAMES = {name: metric.class_name for name, metric in REGISTRY.items()}

# One pair given as two strings, one with two references, then the rest: every update form.
UPDATES = ((0, 1), (1, 4), (4, 12))


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = (list(side[:12]) for side in wmt_pairs)
    references[2] = [references[2], references[3]]  # several references: the best one counts
    return predictions, references


def _arguments(name, path, tiny_model_path, tiny_centering_stats):
    """The tiny model, and a setting of each state layout: scores (corpus centering, no IDF) or
    texts (batch centering, and moverscore's default IDF over the call)."""
    arguments = {"model_type": tiny_model_path}
    if path == "scores":
        arguments.update(centering="corpus", centering_stats=tiny_centering_stats(name))
        if name == "moverscore":
            arguments["idf"] = False
    else:
        arguments["centering"] = "batch"
    return arguments


def _update(metric, predictions, references):
    for start, stop in UPDATES:
        if stop - start == 1:
            metric.update(predictions[start], references[start])
        else:
            metric.update(predictions[start:stop], references[start:stop])


@pytest.mark.parametrize("path", ["scores", "texts"])
@pytest.mark.parametrize("name", sorted(CLASS_NAMES))
def test_three_updates_give_the_function_on_all_pairs(name, path, pairs, tiny_model_path, tiny_centering_stats):
    arguments = _arguments(name, path, tiny_model_path, tiny_centering_stats)
    metric = getattr(moverkit_torchmetrics, CLASS_NAMES[name])(**arguments)
    assert bool(metric.keeps_texts) == (path == "texts")
    _update(metric, *pairs)
    result = metric.compute()
    expected = getattr(functional, name)(*pairs, **arguments)
    assert metric.hashcode == expected["hashcode"]
    for output in SPECS[name].outputs:
        assert result[output].shape == (12,)
        torch.testing.assert_close(
            result[output], torch.tensor(expected[output], dtype=torch.float64), atol=1e-5, rtol=0
        )
        assert math.isclose(result[f"{output}_mean"].item(), sum(expected[output]) / 12, abs_tol=1e-5)
    if path == "scores":  # only scores are kept: the first update's one pair, its outputs in a row
        assert metric.scores[0].shape == (len(SPECS[name].outputs),) and not hasattr(metric, "pred_bytes")


@pytest.mark.slow
def test_scores_are_batch_invariant(pairs):
    """The embedded model at the defaults: a pair scores the same alone, in any update and in one
    call of the function over all pairs (bert-score 0.3.13 does not: WMT17 pair 1812 scores
    0.54910 in its set and 0.54826 alone)."""
    predictions, references = pairs
    metric = CenteredBERTScore()
    metric.update(predictions[:5], references[:5])
    metric.update(predictions[5:], references[5:])
    together = functional.centered_bertscore(predictions, references)["f1"]
    alone = [functional.centered_bertscore([p], [r])["f1"][0] for p, r in zip(predictions, references)]
    torch.testing.assert_close(metric.compute()["f1"], torch.tensor(together, dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.tensor(alone), torch.tensor(together), atol=1e-6, rtol=0)


def test_each_metric_has_a_class_with_its_specs_facts():
    assert set(CLASS_NAMES) == set(moverkit.METRICS) == set(SPECS)
    for name, class_name in CLASS_NAMES.items():
        cls = getattr(moverkit_torchmetrics, class_name)
        spec = SPECS[name]
        assert issubclass(cls, MoverkitMetric) and cls.metric == name
        assert cls.higher_is_better is spec.higher_is_better
        assert (cls.is_differentiable, cls.full_state_update) == (False, False)
        assert cls.plot_lower_bound == spec.low
        assert cls.plot_upper_bound == (spec.high if math.isfinite(spec.high) else None)
    assert LazyEMD.higher_is_better is False


def test_metric_collection_prefixes_the_shared_output_names(pairs, tiny_model_path):
    predictions, references = pairs
    kwargs = {"model_type": tiny_model_path, "centering": "none"}
    collection = MetricCollection(
        [CenteredBERTScore(**kwargs), SBERTScore(model_type=tiny_model_path), LazyEMD(**kwargs)]
    )
    collection.update(predictions[:6], references[:6])
    collection.update(predictions[6:], references[6:])
    result = collection.compute()
    assert {"CenteredBERTScore_f1", "SBERTScore_f1_mean", "LazyEMD_lazy_emd_mean"} <= set(result)
    expected = functional.lazy_emd(predictions, references, **kwargs)["lazy_emd"]
    torch.testing.assert_close(
        result["LazyEMD_lazy_emd"], torch.tensor(expected, dtype=torch.float64), atol=1e-5, rtol=0
    )


def test_arguments_are_checked_when_the_metric_is_made(tiny_model_path):
    with pytest.raises(TypeError, match="TWMD does not take return_alignment"):
        TWMD(return_alignment=True)
    with pytest.raises(TypeError, match="TWMD got an unknown argument 'temprature'"):
        TWMD(temprature=0.1)
    with pytest.raises(ValueError, match="centering"):
        TWMD(model_type=tiny_model_path, centering="bogus")
    metric = TWMD(model_type=tiny_model_path, variant="trwmd", centering="none", compute_on_cpu=True)
    assert metric.outputs == ("trwmd",) and metric.compute_on_cpu


def test_no_pairs_give_empty_scores_and_nan_means(tiny_model_path):
    metric = TWMD(model_type=tiny_model_path, centering="none")
    with pytest.warns(UserWarning, match="before the ``update`` method"):
        result = metric.compute()
    assert result["twmd"].shape == (0,) and math.isnan(result["twmd_mean"])
    metric.update([], [])
    assert metric.compute()["twmd"].shape == (0,)


def test_pair_order_interleaves_the_ranks_as_a_distributed_sampler():
    # 5 pairs over two ranks: rank 0 scored pairs 0, 2, 4 and rank 1 pairs 1, 3, gathered rank by rank.
    ranks = torch.tensor([0, 0, 0, 1, 1])
    assert pair_order(ranks).tolist() == [0, 3, 1, 4, 2]
    assert pair_order(torch.zeros(3, dtype=torch.long)).tolist() == [0, 1, 2]


def _start_processes(worker, args: tuple, nprocs: int, tmp_path, warm_python) -> None:
    """``torch.multiprocessing.start_processes(worker, args, nprocs, start_method="fork")`` run from
    a fresh ``python -c`` (forked from a warm interpreter: tests/warm_python.py), whose ranks are
    forked from it in turn: no rank pays torch's imports again.

    A child Python process, not pytest's own: ``torch.multiprocessing.spawn`` started
    multiprocessing's resource tracker in the process that called it, which outlived the tests and
    kept the run's output open past pytest's summary; and forking pytest's process, which has run
    torch's thread pools, is not safe."""
    job = tmp_path / "spawn.pt"
    torch.save({"worker": worker.__name__, "args": args, "nprocs": nprocs}, job)
    code = (
        f"import sys, torch; sys.path[:0] = {[HERE, os.path.dirname(HERE)]!r}; import test_torchmetrics as t; "
        f"job = torch.load({str(job)!r}, weights_only=False); "
        "torch.multiprocessing.start_processes(getattr(t, job['worker']), args=job['args'], nprocs=job['nprocs'], "
        "start_method='fork')"
    )
    done = warm_python.run([sys.executable, "-c", code], tmp_path, offline_environment(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


ONE_EMPTY_PAIRS = 5
"""Pairs of the ``one_empty`` run: all on one rank, none on the other."""


def _ddp_worker(rank, world, init_file, out_dir, pairs, settings, empty_rank=1):
    """Each rank's TWMD over its pairs, in two updates, saved, in two runs of one process group: a
    DistributedSampler's share without shuffling (``shared``), and every pair on the other rank
    with none (``update([], [])``) on ``empty_rank`` (``one_empty``; the first :data:`ONE_EMPTY_PAIRS`)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        predictions, references = pairs
        shares = {
            "shared": list(range(rank, len(predictions), world)),
            "one_empty": [] if rank == empty_rank else list(range(ONE_EMPTY_PAIRS)),
        }
        results = {}
        for run, mine in shares.items():
            for label, arguments in settings.items():
                metric = TWMD(**arguments)
                for half in (mine[:2], mine[2:]):
                    metric.update([predictions[i] for i in half], [references[i] for i in half])
                results[run, label] = {key: value.cpu() for key, value in metric.compute().items()}
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.integration
def test_two_gloo_processes_give_the_single_process_numbers_in_pair_order(
    pairs, tiny_model_path, tmp_path, warm_python
):
    """11 pairs, 6 on rank 0 and 5 on rank 1; then 5 pairs all on rank 0 and none on rank 1, which
    gets rank 0's scores. One process group runs both (each process start costs seconds)."""
    predictions, references = pairs[0][:11], pairs[1][:11]
    settings = {
        "scores": {"model_type": tiny_model_path, "centering": "none"},
        "texts": {"model_type": tiny_model_path, "centering": "batch"},
    }
    arguments = (2, str(tmp_path / "init"), str(tmp_path), (predictions, references), settings, 1)
    _start_processes(_ddp_worker, arguments, 2, tmp_path, warm_python)
    for run, n_pairs, atol in (("shared", 11, 1e-5), ("one_empty", ONE_EMPTY_PAIRS, 1e-6)):
        for label, arguments in settings.items():
            expected = functional.twmd(predictions[:n_pairs], references[:n_pairs], **arguments)["twmd"]
            expected = torch.tensor(expected, dtype=torch.float64)
            for rank in (0, 1):
                result = torch.load(tmp_path / f"rank{rank}.pt")[run, label]
                torch.testing.assert_close(result["twmd"], expected, atol=atol, rtol=0)
                assert math.isclose(result["twmd_mean"].item(), expected.mean().item(), abs_tol=1e-6)


@pytest.mark.integration
def test_lightning_validation_logs_the_function_means(pairs, tiny_model_path, tmp_path, monkeypatch):
    import lightning

    predictions, references = pairs
    arguments = {"model_type": tiny_model_path, "centering": "none"}

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.metrics = MetricCollection([CenteredBERTScore(**arguments), TWMD(**arguments)])

        def validation_step(self, batch, batch_idx):
            self.metrics.update(*batch)

        def on_validation_epoch_end(self):
            result = self.metrics.compute()
            self.log_dict({key: value for key, value in result.items() if key.endswith("_mean")})
            self.metrics.reset()

    data = torch.utils.data.DataLoader(
        list(zip(predictions, references)), batch_size=5, collate_fn=lambda rows: tuple(map(list, zip(*rows)))
    )
    monkeypatch.chdir(tmp_path)
    trainer = lightning.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    (logged,) = trainer.validate(Module(), dataloaders=data, verbose=False)
    assert list(tmp_path.iterdir()) == []  # no lightning_logs or checkpoints left behind
    expected_f1 = functional.centered_bertscore(predictions, references, **arguments)["f1"]
    expected_twmd = functional.twmd(predictions, references, **arguments)["twmd"]
    assert math.isclose(logged["f1_mean"], sum(expected_f1) / len(expected_f1), abs_tol=1e-5)
    assert math.isclose(logged["twmd_mean"], sum(expected_twmd) / len(expected_twmd), abs_tol=1e-5)


@pytest.mark.integration
def test_the_core_imports_neither_torchmetrics_nor_lighteval():
    code = (
        "import sys, moverkit, moverkit.functional\n"
        "print(sorted(m for m in ('torchmetrics', 'lightning', 'lighteval') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# Trust round 5: each metric keeps its own scores, whatever its first batch and whatever is done to it.

# Each trigger: the collection's metrics and a first batch after which their states were equal.
COLLECTION_TRIGGERS = {
    "an empty prediction scores 0 under both": (("TWMD", {}), ("MoverScore", {"idf": False}), ([""], ["a reference"])),
    "an empty first update": (("TWMD", {}), ("MoverScore", {"idf": False}), ([], [])),
    "an identical first pair": (("SBERTScore", {}), ("CenteredBERTScore", {}), (["the same"], ["the same"])),
    "two variants of one class": (("TWMD", {}), ("TWMD", {"variant": "trwmd"}), (["the same"], ["the same"])),
}


@pytest.mark.parametrize("trigger", sorted(COLLECTION_TRIGGERS))
def test_each_metric_keeps_its_own_scores_in_a_collection(trigger, pairs, tiny_model_path):
    """torchmetrics' compute groups merge metrics whose states are equal after the first update;
    moverkit's states are scores, so two metrics must never share them by chance."""
    first, second, batch = COLLECTION_TRIGGERS[trigger]
    members = []
    for class_name, extra in (first, second):
        arguments = {"model_type": tiny_model_path, "centering": "none", **extra}
        members.append((getattr(moverkit_torchmetrics, class_name)(**arguments), class_name, arguments))
    collection = MetricCollection({f"m{k}": metric for k, (metric, _, _) in enumerate(members)})
    predictions, references = pairs
    for _ in range(2):  # and again after reset(): a grouping made in the first round would survive it
        collection.update(*batch)
        collection.update(predictions[:5], references[:5])
        result = collection.compute()
        for k, (metric, class_name, arguments) in enumerate(members):
            name = CLASS_TO_NAME[class_name]
            expected = getattr(functional, name)(
                list(batch[0]) + predictions[:5], list(batch[1]) + references[:5], **arguments
            )
            for output in metric.outputs:
                shared = all(output in other.outputs for other, _, _ in members)  # then prefixed by its key
                torch.testing.assert_close(
                    result[f"m{k}_{output}" if shared else output],
                    torch.tensor(expected[output], dtype=torch.float64),
                    atol=1e-6,
                    rtol=0,
                )
        collection.reset()


CLASS_TO_NAME = {class_name: name for name, class_name in CLASS_NAMES.items()}

CONVERSIONS = {
    "set_dtype(float64)": lambda m: m.set_dtype(torch.float64),
    "set_dtype(float16)": lambda m: m.set_dtype(torch.float16),
    "to(bfloat16)": lambda m: m.to(torch.bfloat16),
    "double()": lambda m: m.double(),
    "half()": lambda m: m.half(),
}


@pytest.mark.parametrize("path", ["scores", "texts"])
@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_a_dtype_change_keeps_the_kept_scores(conversion, path, pairs, tiny_model_path, tiny_centering_stats):
    """Integer states stay integer and float64 scores are not rounded: compute() gives the scores
    kept before the change (within 1e-12), and update() goes on after it."""
    arguments = _arguments("twmd", path, tiny_model_path, tiny_centering_stats)
    metric = TWMD(**arguments)
    predictions, references = pairs
    metric.update(predictions[:6], references[:6])
    before = metric.compute()["twmd"]
    converted = CONVERSIONS[conversion](metric)
    torch.testing.assert_close(converted.compute()["twmd"], before, atol=1e-12, rtol=0)
    converted.update(predictions[6:], references[6:])
    expected = functional.twmd(predictions, references, **arguments)["twmd"]
    torch.testing.assert_close(
        converted.compute()["twmd"], torch.tensor(expected, dtype=torch.float64), atol=1e-6, rtol=0
    )


def test_the_base_class_names_the_five_classes():
    with pytest.raises(TypeError, match="MoverkitMetric is the base class.*CenteredBERTScore.*TWMD"):
        MoverkitMetric()


def test_one_pair_gives_one_score_per_output_not_a_scalar(tiny_model_path):
    metric = CenteredBERTScore(model_type=tiny_model_path, centering="none")
    metric.update("the cat sat on the mat", "a cat sat on the mat")
    result = metric.compute()
    assert result["f1"].shape == (1,) and len(result["f1"]) == 1
    assert result["f1_mean"].shape == () and result["f1_mean"] == result["f1"][0]


def test_merge_state_keeps_arrival_order_and_refuses_other_settings(pairs, tiny_model_path):
    predictions, references = pairs
    arguments = {"model_type": tiny_model_path, "centering": "none"}
    first, second = TWMD(**arguments), TWMD(**arguments)
    first.update(predictions[:4], references[:4])
    second.update(predictions[4:7], references[4:7])
    first.merge_state(second)
    expected = functional.twmd(predictions[:7], references[:7], **arguments)["twmd"]
    torch.testing.assert_close(first.compute()["twmd"], torch.tensor(expected, dtype=torch.float64), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="other settings"):
        first.merge_state(TWMD(variant="trwmd", **arguments))


def test_merge_state_changes_nothing_when_refused_and_takes_gathered_tensors(pairs, tiny_model_path):
    """Review findings: a refused merge left the incoming pairs in place of the metric's own; a
    state of tensors (as DDP's gathering leaves it) could not be merged; a cached result survived."""
    predictions, references = pairs
    arguments = {"model_type": tiny_model_path, "centering": "none"}
    synced = TWMD(dist_sync_on_step=True, **arguments)
    synced.update(predictions[:2], references[:2])
    other = TWMD(**arguments)
    other.update(predictions[2:3], references[2:3])
    with pytest.raises(RuntimeError, match="merge_state"):
        synced.merge_state(other)
    assert synced.compute()["twmd"].shape == (2,)
    first = TWMD(**arguments)
    first.update(predictions[:2], references[:2])
    first.compute()  # cached
    first.merge_state({key: torch.cat(value) for key, value in other.metric_state.items() if value} | {
        key: value for key, value in other.metric_state.items() if not value})  # fmt: skip
    expected = functional.twmd(predictions[:3], references[:3], **arguments)["twmd"]
    torch.testing.assert_close(first.compute()["twmd"], torch.tensor(expected, dtype=torch.float64), atol=1e-6, rtol=0)


def test_a_saved_state_loads_under_other_versions(tiny_model_path, monkeypatch):
    """The state that keeps settings apart in a collection is named by the settings, not by the
    versions the hashcode also names: a state_dict saved before an upgrade still loads."""
    import moverkit._core.call.closing as hashing

    arguments = {"model_type": tiny_model_path, "centering": "none"}
    saved = TWMD(**arguments)
    saved.persistent(True)
    state = saved.state_dict()
    monkeypatch.setattr(hashing, "__version__", "9.9.9")
    upgraded = TWMD(**arguments)
    assert "9.9.9" in upgraded.hashcode and upgraded.hashcode != saved.hashcode
    upgraded.persistent(True)
    upgraded.load_state_dict(state)  # strict: the same keys


def test_forwards_batch_value_is_not_cast(pairs, tiny_model_path):
    predictions, references = pairs
    metric = TWMD(model_type=tiny_model_path, centering="none")
    batch = metric(predictions[:3], references[:3])["twmd"]
    metric.to(torch.float16)
    assert metric._forward_cache["twmd"].dtype == torch.float64
    torch.testing.assert_close(metric._forward_cache["twmd"], batch, atol=0, rtol=0)


def test_plot_draws_the_means_within_the_metrics_range(pairs, tiny_model_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    predictions, references = pairs
    metric = CenteredBERTScore(model_type=tiny_model_path, centering="none")
    metric.update(predictions[:3], references[:3])
    figure, axes = metric.plot()
    assert {text.get_text() for text in axes.get_legend().get_texts()} == {"precision", "recall", "f1"}
    low, high = SPECS["centered_bertscore"].low, SPECS["centered_bertscore"].high
    bottom, top = axes.get_ylim()  # the metric's range, with torchmetrics' margin
    assert bottom <= low < high <= top and top - bottom <= 1.5 * (high - low)
    matplotlib.pyplot.close(figure)
