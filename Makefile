# Two commands for a fresh clone (see README):
#   make run    install into .venv and run the main job on the built-in defaults
#   make test   install into .venv and run lint, format check, type check and the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU build of torch by default; a GPU user sets TORCH_CONSTRAINTS= after installing CUDA torch.
TORCH_CONSTRAINTS ?= -c constraints/cpu.txt
PYTEST_WORKERS ?= 2
# `make run` installs what running needs; `make test` adds the dev tools and Ray (the tests
# run a local Ray instance). Each install is stamped, so neither repeats.
RUN_EXTRAS ?= nvml,survival
TEST_EXTRAS ?= dev,nvml,survival,ray,graph

.PHONY: install install-test run test lint typecheck layers unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip

$(BIN)/.installed-run: pyproject.toml constraints/cpu.txt | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check $(TORCH_CONSTRAINTS) -e '.[$(RUN_EXTRAS)]'
	touch $@

$(BIN)/.installed-test: pyproject.toml constraints/cpu.txt | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check $(TORCH_CONSTRAINTS) -e '.[$(TEST_EXTRAS)]'
	touch $@ $(BIN)/.installed-run

install: $(BIN)/.installed-run
install-test: $(BIN)/.installed-test

# Published measurements beside the clone calibrate spot lifetimes and start-up times.
DATA_DIR ?= ../shared/data
DATA_FLAG := $(if $(wildcard $(DATA_DIR)/transient),--data-dir $(DATA_DIR),)

run: install
	$(BIN)/gpucast plan train --workload resnet50 --epochs 90 --dataset-size 1281167 \
		--deadline 24h $(DATA_FLAG) --report plan-report.html

lint: install-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install-test
	$(BIN)/mypy

# the layering of docs/architecture.md (contracts in pyproject.toml)
layers: install-test
	$(BIN)/lint-imports

unit: install-test
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) -p no:cacheprovider

test: lint typecheck layers unit

bench: install-test
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
