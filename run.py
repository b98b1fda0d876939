"""anima's command line — the commands live in cli/ (one module per family); this page only starts them.

python run.py --playbook playbooks/repl.yaml --ticks 5
python run.py say "hello"
python run.py approvals            # and: approve ID, deny ID --reason …
python run.py inspect --json
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing downloads at run time: models come from PyPI packages
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from cli import app  # noqa: E402

if __name__ == "__main__":
    app()
