"""Loading embedded models from several threads at once must not leave stdout and stderr on /dev/null.

llama-cpp-python (verbose=False) silences a model load by dup2-ing /dev/null over fds 1 and 2 and restoring what
it saved on entry; two overlapping loads save each other's /dev/null, and the process ends with exit 0 and no
output (bench/reflexes.py's 2-validator stage, whose validators load their models in parallel). The fake model
below loads under llama-cpp-python's own `suppress_stdout_stderr`; it runs in a child process, since the
failure it guards against silences the process's real file descriptors.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import sys, threading, time
    import langchain_community.llms
    from llama_cpp._utils import suppress_stdout_stderr
    from llm.providers.llamacpp import EmbeddedLlamaCpp

    loading = []

    class FakeLlamaCpp:
        def __init__(self, **kwargs):
            with suppress_stdout_stderr(disable=kwargs["verbose"]):
                loading.append(kwargs["model_path"])
                time.sleep(0.3)  # a model load: long enough for the other thread to start its own
                loading.append(len(loading))

    langchain_community.llms.LlamaCpp = FakeLlamaCpp
    models = [EmbeddedLlamaCpp(id=f"validator-{i}", model_path=f"/fake/{i}.gguf") for i in range(2)]
    start = threading.Barrier(len(models))

    def load(model):
        start.wait()
        model._ensure()

    threads = [threading.Thread(target=load, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(m._ensure(), FakeLlamaCpp) for m in models)
    print("stdout survived", flush=True)
    print("stderr survived", file=sys.stderr, flush=True)
    print("loads:", [x for x in loading if isinstance(x, int)], file=sys.stderr, flush=True)
""")


def test_parallel_model_loads_keep_stdout_and_stderr():
    run = subprocess.run(
        [sys.executable, "-c", CHILD], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "stdout survived\n"
    assert "stderr survived" in run.stderr
    # one load at a time: each load ended (its count appended) before the next began
    assert "loads: [1, 3]" in run.stderr


def test_a_loaded_model_is_not_loaded_again(monkeypatch):
    import langchain_community.llms

    from llm.providers.llamacpp import EmbeddedLlamaCpp

    built = []
    monkeypatch.setattr(langchain_community.llms, "LlamaCpp", lambda **kw: built.append(kw) or object(), raising=False)
    model = EmbeddedLlamaCpp(model_path="/fake/model.gguf", context_window=512)
    assert model._ensure() is model._ensure()
    assert len(built) == 1 and built[0]["model_path"] == "/fake/model.gguf" and built[0]["verbose"] is False


def test_a_text_counted_again_is_not_tokenized_again():
    from types import SimpleNamespace

    from llm.providers.llamacpp import EmbeddedLlamaCpp

    tokenized: list[bytes] = []
    model = EmbeddedLlamaCpp()
    model._llm = SimpleNamespace(
        client=SimpleNamespace(tokenize=lambda data, add_bos, special: tokenized.append(data) or data.split())
    )
    identity = "I am Lumen, a persona who thinks continuously."
    assert model.count_tokens(identity) == model.count_tokens(identity) == 8
    assert model.count_tokens("a new thought") == 3
    assert tokenized == [identity.encode(), b"a new thought"]  # the prompt's fixed blocks: once, not every tick
