# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make demo   -> creates .venv, installs ecgtrace, runs `ecgtrace demo`
#   make test   -> creates .venv, installs ecgtrace with its test tools, runs the tests
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ecgtrace demo $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(ARGS)

clean:
	rm -rf $(VENV) demo-out .pytest_cache
