"""moverkit.serve on Ray Serve's own terms (issue 67): the default application ``moverkit.serve:app``
built when first asked for, the application builder ``moverkit.serve:build`` of one args object,
the config files of deploy/ (a Serve config file and a KubeRay RayService, validated with Serve's
own schema) and the Dockerfile beside them, the shutdown that leaves a shared cluster's other
applications running, and ``serve run`` itself in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray.serve")

import yaml  # noqa: E402
from ray.serve.schema import ServeDeploySchema  # noqa: E402

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_importing_the_module_builds_nothing_and_app_is_built_when_asked_for():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, moverkit.serve as s; print('app' in vars(s), 'torch' in sys.modules); "
            "from ray._common.utils import import_attr; from ray.serve.deployment import Application; "
            "app = import_attr('moverkit.serve:app'); print(isinstance(app, Application), app is s.app)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "True", "True"]


def test_the_builder_takes_serve_runs_text_and_a_config_files_values():
    from moverkit.integrations.serve import build

    # serve run moverkit.serve:build metric=twmd temperature=0.1 ...: every value is text
    app = build(
        {
            "metric": "twmd",
            "temperature": "0.1",
            "max_batch_size": "16",
            "request_rows": "8",
            "max_texts": "100",
            "end_markers": "<|im_end|>",
            "replicas": "2",
            "request_timeout_s": "30",
        }
    )
    metric, output, arguments, options = app._bound_deployment.init_args
    assert (metric, output, arguments) == ("twmd", None, {"temperature": 0.1})
    assert options["batching"] == {"max_batch_size": 16, "wait_s": 0.05, "request_rows": 8}
    assert options["limits"]["texts"] == 100 and options["end_markers"] == ["<|im_end|>"]
    assert options["request_timeout_s"] == 30 and app._bound_deployment._deployment_config.num_replicas == 2
    scaled = build({"metric": "twmd", "autoscaling_config": {"min_replicas": 1, "max_replicas": 3}})
    assert scaled._bound_deployment._deployment_config.autoscaling_config.max_replicas == 3
    with pytest.raises(ValueError, match="temperature must be a finite number"):
        build({"metric": "twmd", "temperature": "-1"})  # by value, before any replica starts
    with pytest.raises(TypeError, match="unknown argument 'temprature'"):
        build({"metric": "twmd", "temprature": 0.1})


def _config_files() -> dict:
    configs = {"serve_config.yaml": yaml.safe_load((DEPLOY / "serve_config.yaml").read_text(encoding="utf-8"))}
    service = yaml.safe_load((DEPLOY / "rayservice.yaml").read_text(encoding="utf-8"))
    assert service["apiVersion"] == "ray.io/v1" and service["kind"] == "RayService"
    configs["rayservice.yaml serveConfigV2"] = yaml.safe_load(service["spec"]["serveConfigV2"])
    return configs


@pytest.mark.parametrize("name", ["serve_config.yaml", "rayservice.yaml serveConfigV2"])
def test_the_deploy_files_are_serve_configs_whose_args_build(name):
    from moverkit.integrations.serve import build

    config = ServeDeploySchema.model_validate(_config_files()[name])
    (application,) = config.applications
    assert application.import_path == "moverkit.serve:build" and application.route_prefix == "/"
    (deployment,) = application.deployments
    assert deployment.name == "moverkit" and deployment.autoscaling_config["max_replicas"] >= 1
    build(application.args)  # the args checked by name and value, as the cluster will build them


def test_the_dockerfile_runs_the_config_on_the_installed_ray():
    import ray

    lines = [
        line.strip()
        for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    instructions = {line.split()[0]: line.split(None, 1)[1] for line in lines}
    assert instructions["FROM"].startswith(f"rayproject/ray:{ray.__version__}-")
    assert '"moverkit[serve]"' in instructions["RUN"]
    source, target = instructions["COPY"].split()
    assert (DEPLOY.parent / source).is_file()
    assert json.loads(instructions["CMD"]) == ["serve", "run", target]
    service = yaml.safe_load((DEPLOY / "rayservice.yaml").read_text(encoding="utf-8"))
    assert service["spec"]["rayClusterConfig"]["rayVersion"] == ray.__version__


def test_the_stop_of_a_shared_cluster_deletes_moverkits_application_only(monkeypatch):
    from moverkit.integrations import serve as server

    calls = []
    monkeypatch.setattr(server.serve, "delete", lambda name: calls.append(("delete", name)))
    monkeypatch.setattr(server.serve, "shutdown", lambda: calls.append(("shutdown",)))
    assert server.stop(shared=True) == "delete" and calls == [("delete", "moverkit")]
    assert server.stop(shared=False) == "shutdown" and calls[-1] == ("shutdown",)


@pytest.mark.parametrize(("address", "expected"), [("10.0.0.1:6379", "delete"), (None, "shutdown")])
def test_moverkit_serve_stops_on_ctrl_c_and_sigterm_as_its_cluster_asks(monkeypatch, capsys, address, expected):
    """``moverkit serve --address``: Ctrl-C deletes moverkit's application only; without it, Serve
    is shut down. SIGTERM is handled as Ctrl-C. (Ray is not started: ``start`` and ``stop`` are
    recorded; tests/test_serve.py deletes the application on a live Serve beside another one.)"""
    import time as time_module

    from moverkit.cli import main
    from moverkit.integrations import serve as server

    calls = {}

    def start(metric, **options):
        calls["start"] = options
        return "http://127.0.0.1:8000"

    def stop(shared):
        calls["stop"] = shared
        return "delete" if shared else "shutdown"

    monkeypatch.setattr(server, "start", start)
    monkeypatch.setattr(server, "stop", stop)

    def sleep(seconds):
        os.kill(os.getpid(), signal.SIGTERM)  # as docker stop or Kubernetes sends it

    monkeypatch.setattr(time_module, "sleep", sleep)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        argv = ["serve", "--metric", "twmd", *(["--address", address] if address else [])]
        assert main(argv) == 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert calls["stop"] is (address is not None)
    assert calls["start"]["end_markers"] is None and calls["start"]["tokenizer"] is None
    assert ("its application deleted" if expected == "delete" else "Serve shut down") in capsys.readouterr().out


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.integration
@pytest.mark.slow
def test_serve_run_with_the_config_file_answers_health_and_score(tmp_path):
    """``serve run`` (Ray Serve's command) on deploy/serve_config.yaml, on loopback and a free port,
    one replica, a local Ray cluster of its own: /health and /score answer, then SIGINT stops it.
    Bounded: 300 s to start, 60 s to stop (then killed)."""
    import requests

    config = yaml.safe_load((DEPLOY / "serve_config.yaml").read_text(encoding="utf-8"))
    port = _free_port()
    config["proxy_location"] = "HeadOnly"
    config["http_options"] = {"host": "127.0.0.1", "port": port}
    (deployment,) = config["applications"][0]["deployments"]
    deployment["autoscaling_config"] = {"min_replicas": 1, "max_replicas": 1, "initial_replicas": 1}
    path = tmp_path / "serve_config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "RAY_ADDRESS": "local", "RAY_TMPDIR": temp, "HF_HUB_OFFLINE": "1"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    serve_command = shutil.which("serve", path=str(Path(sys.executable).parent)) or "serve"
    process = subprocess.Popen(
        [serve_command, "run", str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        health = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                answer = requests.get(f"{url}/health", timeout=5)
                if answer.status_code == 200:
                    health = answer.json()
                    break
            except requests.RequestException:
                pass
            time.sleep(2)
        assert health is not None, (process.poll(), process.stdout.read()[-3000:] if process.poll() is not None else "")
        assert health["metric"] == "twmd" and health["request_timeout_s"] == 120
        assert health["batching"]["request_rows"] == 32
        scored = requests.post(f"{url}/score", json={"predictions": ["a cat"], "references": ["the cat"]}, timeout=120)
        assert scored.status_code == 200 and len(scored.json()["twmd"]) == 1
        reward = requests.post(
            f"{url}/get_reward",
            json={"query": ["p: the cat<|im_end|>"], "prompts": ["p: "], "labels": ["a cat"]},
            timeout=120,
        )
        assert reward.status_code == 200 and len(reward.json()["rewards"]) == 1
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)
