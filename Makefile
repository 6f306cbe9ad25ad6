# Two entry points for a newcomer: `make serve` and `make test`. Both create .venv idempotently,
# install torch's CPU build first (so pip never pulls CUDA wheels), then the project with its dev extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-16)
PYTEST_ARGS ?=

.PHONY: install browser serve test lint typecheck layers pytest bench bench-mcp inspector clean

install: $(STAMP)

# Silent, and pip's output on stderr: `make serve` may be what an MCP client runs, and over stdio stdout is the
# protocol stream.
# PyPI's Linux torch wheels are CUDA builds (gigabytes); PyTorch's CPU index has 2.13.0+cpu, which pip prefers.
# Where that index cannot be reached, pip goes on with PyPI and any local wheels its configuration names.
$(STAMP): pyproject.toml
	@echo "mnemograph: installing into $(VENV) (torch's CPU build, then the project; the first time takes minutes)" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) 1>&2
	@$(BIN)/python -m pip install --quiet --upgrade pip 1>&2
	@$(BIN)/python -m pip install --quiet --retries 1 --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0 1>&2
	@$(BIN)/python -m pip install --quiet -e '.[dev]' 1>&2
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

# @: make must not echo the recipe on stdout, which over stdio is the MCP protocol stream.
serve: install
	@$(BIN)/mnemograph serve $(ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

layers: install
	$(BIN)/lint-imports

# Debian's chromium for the web UI's browser tests (tests/e2e/test_ui.py); installed once, when missing.
browser:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
		else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

pytest: install browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint typecheck layers pytest

bench: install
	$(BIN)/python bench/core.py

bench-mcp: install
	$(BIN)/python bench/mcp.py

# Node 22 and the pinned MCP Inspector CLI into .cache/ (the e2e tests call this themselves).
inspector:
	tests/e2e/install_inspector.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
