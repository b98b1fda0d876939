"""Stelis benchmark (JSON): how much of the parent's context a deep_work run consumes with Stelis threads
versus the same work done inline, and what entering/leaving a thread costs.

    python bench/stelis.py [--tasks 3] [--questions 3] [--no-embedded] [--overhead-runs 40]

- `embedded`: deep_work on the embedded model, Stelis vs inline (the same playbook with its
  stelis_start/stelis_end nodes turned into plain `set` nodes). Parent context = the parent thread's
  history as the model would see it after the run (`{{ history }}`), in the model's tokens.
- `scaling`: the same comparison on an instant fake LLM while the sub-task logs grow, to show the trend
  without model noise (every answer ~150 tokens; chronicles as long as their token cap allows).
- `overhead`: a one-node region run as a Stelis thread vs inline, SQLite checkpoints, median ms per run
  (without and with a chronicle call to an instant fake model).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graph.agent import build_agent  # noqa: E402
from graph.playbook import shipped_playbooks_dir  # noqa: E402
from graph.services import open_services  # noqa: E402
from nodes.stelis.history import render_timeline  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def inline_variant(source: Path, target: Path) -> Path:
    """The playbook with every Stelis region run inline: same nodes, same order, no child thread."""
    data = yaml.safe_load(source.read_text())
    data["name"] = data["name"] + "_inline"
    for node in data["nodes"]:
        if node["type"] == "stelis_start":
            node.update(type="set", assign={"stelis_inline": True})
            for key in ("label", "window_ratio", "max_depth", "chronicle_prompt", "result", "outputs"):
                node.pop(key, None)
        elif node["type"] == "stelis_end":
            node.update(type="set", assign={"stelis": {"status": "inline", "chronicle": "", "thread_id": None}})
            node.pop("generate_chronicle", None)
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return target


def render_timeline_own(repos, thread_id: str) -> list[str]:
    """A child's own messages as they would appear in the parent's history had the work been inline."""
    from nodes.stelis.history import render_message

    return [render_message(m) for m in repos.messages.log(thread_id, kinds=("step", "response"))]


def parent_cost(agent) -> dict:
    services = agent.services
    count = services.llms.primary().count_tokens
    with services.db.unit() as repos:
        history = render_timeline(services.managers.over(repos).threads, agent.thread_id)
        steps = repos.messages.log(agent.thread_id, kinds=("step",))
        synth = next((m for m in reversed(steps) if m.meta.get("node") == "synthesize"), None)
        children = repos.threads.children(agent.thread_id)
        child_messages = sum(repos.messages.count(c.id) for c in children)
        calls = repos.llm_calls.totals()
        # same run, same text: what each anchor costs the parent vs the child's log it stands for
        anchor_tokens = sum(count(h) for h in history if h.startswith("[Stelis thread"))
        log_tokens = sum(count("\n\n".join(render_timeline_own(repos, c.id))) for c in children)
    return {
        "parent_history_tokens": count("\n\n".join(history)),
        "parent_messages": len(history),
        "anchor_tokens": anchor_tokens,
        "child_log_tokens": log_tokens,
        "anchor_to_log_ratio": round(anchor_tokens / log_tokens, 3) if log_tokens else None,
        "synthesize_prompt_tokens": synth.meta.get("prompt_tokens") if synth else None,
        "child_threads": len(children),
        "child_messages": child_messages,
        "llm_calls": calls["calls"],
        "prompt_tokens": calls["prompt_tokens"],
        "completion_tokens": calls["completion_tokens"],
    }


def run_deep_work(playbook: Path | str, inputs: dict, **options) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        agent = build_agent(playbook, data_dir=tmp, checkpointer="memory", **options)
        started = time.perf_counter()
        for mode, data in agent.stream(inputs=inputs):
            if mode == "custom" and data.get("event") in ("step", "stelis_enter", "stelis_leave"):
                progress(f"  {data['event']} {data.get('node') or data.get('label')}")
        elapsed = time.perf_counter() - started
        result = parent_cost(agent)
        agent.close()
    return result, elapsed


def compare(result_stelis: dict, result_inline: dict) -> dict:
    a, b = result_stelis["parent_history_tokens"], result_inline["parent_history_tokens"]
    return {
        "stelis": result_stelis,
        "inline": result_inline,
        "parent_tokens_saved": b - a,
        "parent_tokens_ratio": round(a / b, 3) if b else None,
    }


def embedded(tasks: int | None, questions: int | None, inline_path: Path) -> dict:
    """deep_work with the playbook's own defaults (3 sub-tasks × 3 questions) unless told otherwise."""
    inputs = {"question": "Why is the sea salty, and why are some lakes salty too?"}
    inputs.update({k: v for k, v in (("max_tasks", tasks), ("max_questions", questions)) if v is not None})
    progress(f"embedded deep_work with Stelis threads ({inputs})…")
    with_stelis, t1 = run_deep_work("deep_work", inputs)
    progress("embedded deep_work inline…")
    inline, t2 = run_deep_work(inline_path, inputs)
    out = compare(with_stelis, inline)
    out["stelis"]["seconds"], out["inline"]["seconds"] = round(t1, 1), round(t2, 1)
    out["window_tokens"] = {"parent": 8192, "child": int(8192 * 0.8)}
    return out


def scaling(tasks: int, inline_path: Path, lengths: list[int]) -> list[dict]:
    rows = []
    for questions in lengths:
        progress(f"fake LLM: {tasks} sub-tasks × {questions} questions…")

        def plans(prompt: str, q=questions) -> dict:
            if "Sub-task:" in prompt:
                return {"questions": [f"question {k}" for k in range(q)]}
            return {"tasks": [f"sub-task {k}" for k in range(tasks)]}

        def answer(prompt: str) -> str:
            size = 4000 if "full log of a Stelis thread" in prompt or "Merge them" in prompt else 600
            return ("finding " * (size // 8))[:size]

        results = []
        for playbook in ("deep_work", inline_path):
            fake = FakeLLM("fake", responses=answer, json_answer=plans, context_window=100_000, honor_max_tokens=True)
            with tempfile.TemporaryDirectory() as tmp:
                services = open_services(
                    data_dir=tmp,
                    embedded=False,
                    providers={"fake": fake},
                    entries=[{"id": "fake", "provider": "fake", "priority": 1}],
                )
                agent = build_agent(playbook, services=services, data_dir=tmp, checkpointer="memory")
                agent.run(inputs={"question": "q", "max_tasks": tasks, "max_questions": questions})
                results.append(parent_cost(agent))
                agent.close()
        row = compare(*results)
        rows.append(
            {
                "child_messages_per_task": 2 * questions + 2,
                **{k: row[k] for k in ("parent_tokens_saved", "parent_tokens_ratio")},
                "stelis_parent_tokens": row["stelis"]["parent_history_tokens"],
                "inline_parent_tokens": row["inline"]["parent_history_tokens"],
            }
        )
    return rows


REGION = """name: overhead
outputs: [x]
start: {start}
nodes:
{nodes}"""


def overhead(runs: int) -> dict:
    stelis_nodes = """  - id: enter
    type: stelis_start
    label: region
    next: work
  - id: work
    type: set
    assign: {x: 1}
    next: leave
  - id: leave
    type: stelis_end
    generate_chronicle: %s
    next: END
"""
    inline_nodes = """  - id: work
    type: set
    assign: {x: 1}
    next: END
"""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        variants = {
            "inline": REGION.format(start="work", nodes=inline_nodes),
            "stelis_no_chronicle": REGION.format(start="enter", nodes=stelis_nodes % "false"),
            "stelis_with_chronicle": REGION.format(start="enter", nodes=stelis_nodes % "true"),
        }
        for name, text in variants.items():
            progress(f"overhead: {name} × {runs}…")
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            fake = FakeLLM("fake", responses=lambda p: "chronicle: it set x.")
            data = Path(tmp) / name
            services = open_services(
                data_dir=str(data),
                embedded=False,
                providers={"fake": fake},
                entries=[{"id": "fake", "provider": "fake", "priority": 1}],
            )
            agent = build_agent(str(path), services=services, data_dir=str(data), checkpointer="sqlite")
            agent.run()  # warm-up
            times = []
            for _ in range(runs):
                started = time.perf_counter()
                agent.run()
                times.append((time.perf_counter() - started) * 1000)
            results[name] = round(statistics.median(times), 2)
            agent.close()
    return {
        "median_ms_per_run": results,
        "enter_leave_ms": round(results["stelis_no_chronicle"] - results["inline"], 2),
        "enter_leave_with_chronicle_ms": round(results["stelis_with_chronicle"] - results["inline"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=None, help="sub-tasks (default: the playbook's, 3)")
    parser.add_argument(
        "--questions", type=int, default=None, help="questions per sub-task (default: the playbook's, 3)"
    )
    parser.add_argument("--no-embedded", action="store_true")
    parser.add_argument("--overhead-runs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inline_path = inline_variant(shipped_playbooks_dir() / "deep_work.yaml", Path(tmp) / "deep_work_inline.yaml")
        report = {
            "benchmark": "stelis",
            "overhead": overhead(args.overhead_runs),
            "scaling_fake_llm": scaling(3, inline_path, [1, 2, 3, 6]),
        }
        if not args.no_embedded:
            report["embedded_deep_work"] = embedded(args.tasks, args.questions, inline_path)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
