# Two entry points: `make quickstart` and `make test`. Both create .venv when missing.
# torch is pinned to the CPU build first: an unpinned torch requirement pulls a multi-GB CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0

.PHONY: quickstart test install install-dev clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

quickstart: $(VENV)/.installed
	$(BIN)/rlvr quickstart

# The report test renders report.html in headless Chromium (Debian's package); as root it is
# installed here when missing, otherwise that one test is skipped with its reason.
test: $(VENV)/.installed-dev
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
		echo "could not install chromium: the browser test will be skipped"
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) runs
