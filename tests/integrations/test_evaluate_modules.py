"""The evaluate modules past one process: evaluate's distributed mode under torch.distributed (the
door of :mod:`moverkit.integrations.evaluate_modules`)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import numpy as np
import pytest
from warm_python import offline_environment

from moverkit.functional import twmd


@pytest.fixture(scope="module")
def pairs(wmt_pairs):
    predictions, references = wmt_pairs
    return list(predictions[:24]), list(references[:24])


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


@pytest.mark.integration
def test_evaluate_distributed_under_torch_distributed(pairs, tmp_path, warm_python):
    """Two real processes in a gloo process group: rank 0 gets every example, in shard order.
    Each is a fresh ``python -c``, forked from a warm interpreter (tests/warm_python.py)."""
    predictions, references = pairs
    out = tmp_path / "rank0.json"
    data = json.dumps({"predictions": predictions, "references": references})
    port = str(29500 + os.getpid() % 1000)
    env = {**offline_environment(), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2"}
    args = [sys.executable, "-c", RANK, str(out), f"dist-{os.getpid()}", data]
    ranks = [warm_python.start(args, tmp_path, {**env, "RANK": str(rank)}) for rank in range(2)]
    done = [rank.wait(timeout=600) for rank in ranks]
    assert [d.returncode for d in done] == [0, 0], "\n".join(d.stderr[-2000:] for d in done)
    result = json.loads(out.read_text())
    order = [i for rank in range(2) for i in range(rank, len(predictions), 2)]  # evaluate concatenates shards
    direct = twmd([predictions[i] for i in order], [references[i] for i in order], centering="none")
    np.testing.assert_allclose(result["twmd"], direct["twmd"], atol=1e-6)
    assert result["hashcode"] == direct["hashcode"]
