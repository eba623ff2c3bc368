#!/usr/bin/env bash
# verl's own environment, and moverkit's verl tests run in it (docs/generation.md, "verl's reward").
# verl 0.9 cannot install beside the test extra (it caps transformers < 5.11 and huggingface-hub < 2),
# so CI's environment skips these tests; this script is how they run:
#
#     bash deploy/verl_environment.sh [VENV]        (default VENV: .verl-venv, from the repository root)
#
# It makes VENV, installs torch, moverkit with its verl extra and pytest, prints the versions, and
# runs tests/integrations/test_verl_environment.py (verl 0.9's trainer configuration loaded by its
# reward loop, whose rewards are moverkit.reward_function's) and the verl manager test of
# tests/integrations/test_verl.py.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.verl-venv}"
export HF_HUB_OFFLINE=1 HF_EVALUATE_OFFLINE=1 HF_DATASETS_OFFLINE=1
python3 -m venv "$venv"
"$venv/bin/pip" install -q --no-compile torch==2.13.0
"$venv/bin/pip" install -q --no-compile -e ".[verl]" pytest pytest-xdist
"$venv/bin/python" -c "import verl, transformers, torch, moverkit; print('verl', verl.__version__, '| transformers', transformers.__version__, '| torch', torch.__version__, '| moverkit', moverkit.__version__)"
"$venv/bin/python" -m pytest -p no:cacheprovider -q \
  tests/integrations/test_verl_environment.py \
  "tests/integrations/test_verl.py::test_verls_batch_reward_manager_gives_the_reward_functions_scores"
