# Two commands for a fresh clone (see README):
#   make run    install into .venv and run the main job on the built-in defaults
#   make test   install into .venv and run lint, format check, type check and the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU build of torch by default; a GPU user sets TORCH_CONSTRAINTS= after installing CUDA torch.
TORCH_CONSTRAINTS ?= -c constraints/cpu.txt
PYTEST_WORKERS ?= 2
# ray is optional for users; the tests run a local Ray instance, so the dev install has it.
EXTRAS ?= dev,nvml,survival,ray

.PHONY: install run test lint typecheck layers unit bench clean

$(BIN)/.installed: pyproject.toml constraints/cpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check $(TORCH_CONSTRAINTS) -e '.[$(EXTRAS)]'
	touch $@

install: $(BIN)/.installed

# Published measurements beside the clone calibrate spot lifetimes and start-up times.
DATA_DIR ?= ../shared/data
DATA_FLAG := $(if $(wildcard $(DATA_DIR)/transient),--data-dir $(DATA_DIR),)

run: install
	$(BIN)/gpucast plan train --workload resnet50 --epochs 90 --dataset-size 1281167 \
		--deadline 24h $(DATA_FLAG) --report plan-report.html

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: install
	$(BIN)/mypy

# the layering of docs/architecture.md (contracts in pyproject.toml)
layers: install
	$(BIN)/lint-imports

unit: install
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) -p no:cacheprovider

test: lint typecheck layers unit

bench: install
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
