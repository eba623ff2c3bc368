"""Past one process: Ray Data actors, and evaluate's distributed mode under torch.distributed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import moverkit
from moverkit.functional import centered_bertscore, twmd


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return list(predictions[:24]), list(references[:24])


def test_ray_data_equals_one_process(pairs):
    ray = pytest.importorskip("ray")
    from moverkit.ray import RayScorer, score_dataset

    predictions, references = pairs
    stats = moverkit.fit_centering(references)
    kwargs = {"centering": "corpus", "centering_stats": stats}
    direct = centered_bertscore(predictions, references, **kwargs)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        rows = [{"id": i, "hyp": p, "ref": r} for i, (p, r) in enumerate(zip(predictions, references))]
        dataset = ray.data.from_items(rows, override_num_blocks=4)
        scored = score_dataset(dataset, "centered_bertscore", "hyp", "ref", concurrency=2, batch_size=5, **kwargs)
        out = sorted(scored.take_all(), key=lambda row: row["id"])
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert [row["hyp"] for row in out] == predictions
    np.testing.assert_allclose([row["f1"] for row in out], direct["f1"], atol=1e-6)
    with pytest.raises(ValueError, match="centering='batch'"):
        RayScorer("twmd", "hyp", "ref")  # twmd's default centering is batch: refused


# Each rank scores its shard through evaluate's distributed mode (num_process, process_id);
# evaluate gathers every shard to rank 0, which writes its result.
RANK = textwrap.dedent(
    """
    import json, os, sys
    import torch.distributed as dist
    import moverkit

    out, experiment, data = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    metric = moverkit.load("twmd", num_process=world, process_id=rank, experiment_id=experiment)
    for i in range(rank, len(data["predictions"]), world):
        metric.add(prediction=data["predictions"][i], reference=data["references"][i])
    result = metric.compute(centering="none")
    dist.barrier()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    else:
        assert result is None
    dist.destroy_process_group()
    """
)


def test_evaluate_distributed_under_torch_distributed(pairs, tmp_path):
    """Two real processes in a gloo process group: rank 0 gets every example, in shard order."""
    predictions, references = pairs
    out = tmp_path / "rank0.json"
    data = json.dumps({"predictions": predictions, "references": references})
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(29500 + os.getpid() % 1000), "WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(out), f"dist-{os.getpid()}", data],
            env={**env, "RANK": str(rank)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(e[-2000:] for e in errors)
    result = json.loads(out.read_text())
    order = [i for rank in range(2) for i in range(rank, len(predictions), 2)]  # evaluate concatenates shards
    direct = twmd([predictions[i] for i in order], [references[i] for i in order], centering="none")
    np.testing.assert_allclose(result["twmd"], direct["twmd"], atol=1e-6)
    assert result["hashcode"] == direct["hashcode"]
