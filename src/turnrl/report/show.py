"""``turnrl show RUN [--step N] [--episode K] [--eval]``: a run's episodes in the terminal.

Reads ``samples/step_<n>.jsonl`` (or ``samples/eval_<n>.jsonl`` with ``--eval``) and prints
the step's episodes (group, reward, success, turns), then episode ``K``'s transcript: each
message, each reply with its turn's reward and mean advantage, and the tool calls found in
it. The newest step (or evaluation) by default.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from turnrl.report.episodes import episode_view, index_row, read_samples
from turnrl.report.runs import ReportError, load_run, sample_files

__all__ = ["show"]


def show(run_dir: Path, console: Console, *, step: int | None = None, episode: int = 0,
         evaluation: bool = False) -> None:
    """Print the episodes of a step (or of an evaluation) and one episode's transcript."""
    run = load_run(run_dir)
    kind = "eval" if evaluation else "step"
    files = sample_files(run.path, kind)
    if not files:
        raise ReportError(f"{run_dir}: no samples/{kind}_<n>.jsonl ("
                          + ("the run kept no evaluation episodes" if evaluation else
                             "train.save_samples is 0, or no RL step ran yet") + ")")
    chosen = max(files) if step is None else step
    if chosen not in files:
        raise ReportError(f"{run_dir}: no samples for {kind} {chosen}; there are: "
                          f"{', '.join(map(str, sorted(files)))}")
    episodes = read_samples(files[chosen])
    if not 0 <= episode < len(episodes):
        raise ReportError(f"--episode {episode}: {kind} {chosen} kept episodes 0 to "
                          f"{len(episodes) - 1}")
    what = "evaluation at step" if evaluation else "step"
    table = Table(title=f"{run.name}: {what} {chosen} ({files[chosen]})")
    agents = any(e.get("agent") for e in episodes)  # a multi-agent env: whose episode it is
    columns = ("#", "group", "seed", *(("agent",) if agents else ()), "reward", "success",
               "turns", "tokens", "")
    for column in columns:
        table.add_column(column, justify="left" if column in ("", "success", "agent")
                         else "right")
    for i, e in enumerate(episodes):
        row = index_row(chosen, i, e)
        notes = ", ".join(n for n, on in (("truncated", row["truncated"]),
                                          ("env error", row["error"])) if on)
        table.add_row(str(i) + (" <" if i == episode else ""), str(row["group"]),
                      str(row["seed"]), *((str(row["agent"] or "-"),) if agents else ()),
                      f"{row['reward']:.3f}", "yes" if row["success"] else "no",
                      str(row["turns"]), str(row["sampled"]), notes)
    console.print(table)
    view = episode_view(run, chosen, episode, episodes[episode], {})
    agent = f", agent {episodes[episode]['agent']}" if episodes[episode].get("agent") else ""
    console.print(f"\n[bold]episode {episode}[/] (group {view['group']}, seed {view['seed']}, "
                  f"{view['env_id']}{agent}): reward {view['reward']:.3f}, "
                  f"{'success' if view['success'] else 'failure'}, {view['turns']} "
                  f"turn{'' if view['turns'] == 1 else 's'}")
    if view["error"]:
        console.print(f"[red]env error[/]: {escape(str(view['error']))}")
    k = 0
    for message in view["messages"]:
        role = message["role"]
        if role == "assistant":
            turn = view["turn_rewards"][k] if k < len(view["turn_rewards"]) else {}
            advantage = turn.get("advantage")
            said = f"reward {turn.get('reward', 0.0):.3f}" + (
                f", advantage {advantage:+.3f}" if advantage is not None and not evaluation
                else "")
            console.print(f"[bold green]assistant[/] (turn {k}: {said})")
            for call in message.get("calls", []):
                console.print(f"  [yellow]tool call[/] {escape(str(call['name']))}"
                              f"({escape(str(call['arguments']))})"
                              + (f" [red]{escape(call['problem'])}[/]" if call["problem"]
                                 else ""))
            k += 1
        else:
            console.print(f"[bold]{role}[/]")
        console.print(escape(str(message["content"])), highlight=False)
