# Every target bootstraps .venv from the committed lockfiles; nothing needs to be installed by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test check lint types bench clean test-local-model test-crash test-corpus bytecode bench-agentdojo-local

$(STAMP): requirements/build.lock requirements/dev.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/build.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/dev.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

$(BENCH_STAMP): $(STAMP) requirements/bench.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/bench.lock
	touch $@

# Membrane's own byte code, compiled as pip compiles a wheel's when it installs it: an editable
# install has none, and where PYTHONDONTWRITEBYTECODE is set (as in many containers) every
# command would otherwise compile the package again. Only changed sources are compiled.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src/membrane

demo: bytecode
	$(BIN)/python examples/demo.py

# pytest exits 5 when it collects nothing; that is not a failure of the suite.
test: bytecode
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

types: $(STAMP)
	$(BIN)/mypy

check: lint types test

# The cost checks (`-m costs`: import lists, collector object counts, stat/parse counts) first,
# then every benchmark.
bench: $(BENCH_STAMP)
	$(BIN)/python -m pytest -m costs
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Opt-in, not part of `make test`: SmolLM2-135M behind llama.cpp's OpenAI-compatible server on
# 127.0.0.1 completes a delegation (lead -> Task -> reader -> Read) three times. The first run
# builds llama-cpp-python (compiles llama.cpp) into $(MEMBRANE_LOCAL_MODEL_HOME) (default
# ~/.cache/membrane/local-model); runs and their state are kept under its runs/ folder.
test-local-model: $(STAMP)
	$(BIN)/python examples/local_model.py

# Opt-in, not part of `make bench`: AgentDojo with test-local-model's SmolLM2-135M playing both
# agents instead of the deterministic attacker (its server, built there the first time). Slow:
# about 1.5 minutes per (user task, injection task) pair on 2 cores, so by default one user task
# and one injection task of slack; AGENTDOJO_ARGS replaces that choice.
AGENTDOJO_ARGS ?= --suite slack --limit 1 --injections 1
bench-agentdojo-local: $(BENCH_STAMP)
	$(BIN)/python bench/bench_agentdojo.py --local-model $(AGENTDOJO_ARGS)

# Opt-in, not part of `make test`: kill -9 at random points of a three-level delegation, 150
# times in a Python host and 60 times in `membrane serve` (MEMBRANE_CRASH_HOST_KILLS,
# MEMBRANE_CRASH_SERVER_KILLS, MEMBRANE_CRASH_SEED), each recovered and checked: one child per
# request id, exact depths, every notice delivered once, exact ledgers, no run left unfinished.
test-crash: bytecode
	$(BIN)/python -m pytest -m crash tests/crash

# Opt-in, not part of `make test` (which runs a sample): every agent of the shared corpus
# (../shared/corpus/agents, beside the checkout) in its product's folder starts and finishes one
# turn through `membrane run`, on loopback Anthropic and OpenAI endpoints; prints the start rate.
test-corpus: bytecode
	$(BIN)/python -m pytest -m corpus -s -W ignore::DeprecationWarning tests/models/test_corpus_turn.py

clean:
	rm -rf $(VENV) build src/*.egg-info
