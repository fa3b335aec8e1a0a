"""SFT: oracle demonstrations, JSONL loading with located errors, the loss mask, learning."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

from turnrl import envs
from turnrl.models.policy import token_logprobs
from turnrl.train.layout import layout
from turnrl.train.sft import (
    STOP_WINDOW,
    DatasetError,
    conversations_to_trajectories,
    load_conversations,
    oracle_demonstrations,
    sft_steps,
)

ENV_IDS = ["frozenlake-v0", "arithmetic-v0"]
SUCCESS_TEXT = {"frozenlake-v0": "Goal!", "arithmetic-v0": "Correct."}


def replay(env_id: str, seed: int, messages: list[dict]) -> list[bool]:
    """Replay a demo's actions; for each, whether it was the oracle's action there."""
    env = envs.make(env_id)
    observation, _ = env.reset(seed=seed)
    assert messages[: len(observation)] == observation
    agreed = []
    for message in messages:
        if message["role"] != "assistant":
            continue
        agreed.append(message["content"] == env.oracle_action())
        env.step(message["content"])
    return agreed


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_oracle_demonstrations_without_noise_reproduce_the_oracle(env_id: str) -> None:
    seeds = range(20)
    demos = oracle_demonstrations(functools.partial(envs.make, env_id), seeds,
                                  random_action_prob=0.0)
    assert len(demos) == len(seeds)
    for seed, messages in zip(seeds, demos, strict=True):
        assert all(replay(env_id, seed, messages))
        assert messages[-1] == {"role": "user", "content": SUCCESS_TEXT[env_id]}


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_oracle_demonstrations_with_full_noise_contain_non_oracle_actions(env_id: str) -> None:
    seeds = range(20)
    demos = oracle_demonstrations(functools.partial(envs.make, env_id), seeds,
                                  random_action_prob=1.0, seed=1)
    agreed = [a for seed, messages in zip(seeds, demos, strict=True)
              for a in replay(env_id, seed, messages)]
    assert agreed.count(False) >= len(agreed) // 2
    successes = sum(m[-1]["content"] == SUCCESS_TEXT[env_id] for m in demos)
    assert successes < len(demos)
    # the noise is seeded: the same seed gives the same demonstrations
    again = oracle_demonstrations(functools.partial(envs.make, env_id), seeds,
                                  random_action_prob=1.0, seed=1)
    assert again == demos


def test_sft_trajectories_mask_exactly_assistant_tokens_and_eos(tokenizer) -> None:
    demos = oracle_demonstrations(functools.partial(envs.make, "frozenlake-v0"), range(4),
                                  random_action_prob=0.3)
    for messages, traj in zip(demos, conversations_to_trajectories(tokenizer, demos),
                              strict=True):
        assert traj.messages == messages
        runs: dict[int, list[int]] = {}
        for token, mask, turn in zip(traj.token_ids, traj.loss_mask, traj.turn_index,
                                     strict=True):
            if mask:
                runs.setdefault(turn, []).append(token)
        contents = [m["content"] for m in messages if m["role"] == "assistant"]
        assert [tokenizer.decode(runs[k], skip_special_tokens=False)
                for k in sorted(runs)] == [c + tokenizer.eos_token for c in contents]
        assert traj.num_sampled_tokens == sum(len(c) + 1 for c in contents)  # char-level
        # everything else (system, user, template markup) is context
        context = [t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if not m]
        assert tokenizer.decode(context, skip_special_tokens=False).count("Reach G") == 1


def test_noise_injected_demos_train_only_the_oracle_actions(tokenizer) -> None:
    """``train_random_actions=False``: the random actions still steer the episode, but each
    one that differs from the oracle's has weight 0 and no loss-mask tokens."""
    seeds = range(20)
    make = functools.partial(envs.make, "frozenlake-v0")
    demos = oracle_demonstrations(make, seeds, random_action_prob=0.5,
                                  train_random_actions=False, seed=3)
    # the same episodes as with every action trained: only the weights differ
    plain = oracle_demonstrations(make, seeds, random_action_prob=0.5, seed=3)
    assert [[{k: v for k, v in m.items() if k != "weight"} for m in d] for d in demos] == plain
    weights = []
    for seed, messages in zip(seeds, demos, strict=True):
        replies = [m for m in messages if m["role"] == "assistant"]
        agreed = replay("frozenlake-v0", seed, messages)
        assert [m.get("weight", 1) for m in replies] == [int(a) for a in agreed]
        weights += agreed
    assert 0 < weights.count(False) < len(weights)  # both kinds occur
    for messages, traj in zip(demos, conversations_to_trajectories(tokenizer, demos),
                              strict=True):
        trained = [t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m]
        expected = "".join(m["content"] + tokenizer.eos_token for m in messages
                           if m["role"] == "assistant" and m.get("weight", 1))
        assert tokenizer.decode(trained, skip_special_tokens=False) == expected
        # the untrained replies are still in the context, in order
        assert tokenizer.decode(traj.token_ids, skip_special_tokens=False).count(
            "<|im_start|>assistant\n") == sum(m["role"] == "assistant" for m in messages)


def mean_nll(policy, trajectories, pad_token_id: int) -> float:
    batch = layout(trajectories, pad_token_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask)
    return float(-(logprobs * batch.loss_mask).sum() / batch.loss_mask.sum())


def test_sft_steps_lower_the_loss_on_oracle_demos(load_tiny, tokenizer) -> None:
    demos = oracle_demonstrations(functools.partial(envs.make, "frozenlake-v0"), range(16),
                                  random_action_prob=0.0)
    trajectories = conversations_to_trajectories(tokenizer, demos)
    policy = load_tiny()
    frozen = {k: v.clone() for k, v in policy.state_dict().items()}
    before = mean_nll(policy, trajectories, tokenizer.pad_token_id)
    metrics = list(sft_steps(policy, trajectories, pad_token_id=tokenizer.pad_token_id,
                             epochs=8, batch_size=4, lr=1e-2, max_grad_norm=1.0))
    assert len(metrics) == 32
    after = mean_nll(policy, trajectories, tokenizer.pad_token_id)
    assert after < 0.5 * before
    losses = [m["sft/loss"] for m in metrics]
    assert all(map(lambda x: x == x and x < float("inf"), losses))
    assert sum(losses[-4:]) / 4 < 0.5 * sum(losses[:4]) / 4
    assert metrics[-1]["sft/lr"] == pytest.approx(0.0, abs=1e-12)  # cosine decay to 0
    assert metrics[0]["sft/lr"] < 1e-2
    assert {m["sft/epoch"] for m in metrics} == set(map(float, range(8)))
    changed = [k for k, v in policy.state_dict().items() if not torch.equal(v, frozen[k])]
    assert changed


def test_sft_stops_once_the_mean_loss_of_the_last_steps_reaches_stop_loss(
        load_tiny, tokenizer) -> None:
    """sft.stop_loss ends SFT at the first step whose trailing mean loss (STOP_WINDOW steps)
    is at most it; the learning rate follows the whole run's schedule up to there."""
    demos = oracle_demonstrations(functools.partial(envs.make, "frozenlake-v0"), range(16),
                                  random_action_prob=0.0)
    trajectories = conversations_to_trajectories(tokenizer, demos)
    kwargs = dict(pad_token_id=tokenizer.pad_token_id, epochs=8, batch_size=4, lr=1e-2,
                  max_grad_norm=1.0)
    full = [m["sft/loss"] for m in sft_steps(load_tiny(), trajectories, **kwargs)]
    window = STOP_WINDOW
    means = [sum(full[i - window + 1:i + 1]) / window for i in range(window - 1, len(full))]
    target = (means[0] + min(means)) / 2  # reached part-way through
    first = next(i for i, mean in enumerate(means) if mean <= target) + window - 1
    assert window - 1 < first < len(full) - 1
    stopped = list(sft_steps(load_tiny(), trajectories, stop_loss=target, **kwargs))
    assert len(stopped) == first + 1
    assert [m["sft/loss"] for m in stopped] == pytest.approx(full[:first + 1])
    assert stopped[-1]["sft/lr"] > 0  # cut where it stopped, not decayed to 0
    never = list(sft_steps(load_tiny(), trajectories, stop_loss=1e-9, **kwargs))
    assert len(never) == len(full)


def test_sft_loss_ignores_context_tokens(load_tiny, tokenizer) -> None:
    """Changing the user's text (context) cannot change which tokens carry loss."""
    policy = load_tiny()
    a = [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]
    b = [{"role": "user", "content": "1+1= please answer"}, {"role": "assistant", "content": "2"}]
    ta, tb = conversations_to_trajectories(tokenizer, [a, b])
    assert ta.num_sampled_tokens == tb.num_sampled_tokens == 2  # "2" + EOS
    (m,) = sft_steps(policy, [ta], pad_token_id=tokenizer.pad_token_id, epochs=1,
                     batch_size=1, lr=1e-9, max_grad_norm=1.0)
    assert m["sft/tokens"] == 2.0


# ------------------------------------------------------------------ JSONL loading
def write_lines(path: Path, *lines: object) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


GOOD = {"messages": [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]}


def test_load_conversations_reads_jsonl_and_skips_blank_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl", GOOD, "", "   ", GOOD)
    assert load_conversations(path) == [GOOD["messages"], GOOD["messages"]]


@pytest.mark.parametrize("lines, line, fragment", [
    ((GOOD, "", "{not json"), 3, "not valid JSON"),
    ((GOOD, {"msgs": []}), 2, "non-empty 'messages' list"),
    (({"messages": []},), 1, "non-empty 'messages' list"),
    (([1, 2],), 1, "non-empty 'messages' list"),
    ((GOOD, {"messages": [{"role": "robot", "content": "hi"},
                          {"role": "assistant", "content": "x"}]}), 2, "messages[0]"),
    (({"messages": [{"role": "user", "content": 3}, {"role": "assistant", "content": "x"}]},),
     1, "messages[0]"),
    ((GOOD, GOOD, {"messages": [{"role": "user", "content": "hi"}]}), 3, "no assistant message"),
    (({"messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "x", "weight": 0}]},), 1,
     "no assistant message with weight 1"),
    (({"messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "x", "weight": 0.5}]},), 1,
     "messages[1].weight must be 0 (context only) or 1"),
])
def test_load_conversations_errors_name_the_file_and_line(tmp_path: Path, lines, line: int,
                                                          fragment: str) -> None:
    path = write_lines(tmp_path / "demos.jsonl", *lines)
    with pytest.raises(DatasetError) as info:
        load_conversations(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ")
    assert fragment in message
    assert "\n" not in message


def test_load_conversations_missing_or_empty_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist") as info:
        load_conversations(tmp_path / "nope.jsonl")
    assert str(tmp_path / "nope.jsonl") in str(info.value)
    empty = write_lines(tmp_path / "empty.jsonl", "")
    with pytest.raises(DatasetError, match="no conversations") as info:
        load_conversations(empty)
    assert str(empty) in str(info.value)


def test_oracle_demonstrations_need_an_oracle() -> None:
    class NoOracle:
        spec = envs.EnvSpec(id="no-oracle-v0", entry_point="x:y", max_turns=1)

    with pytest.raises(DatasetError, match="no oracle"):
        oracle_demonstrations(NoOracle, [0], random_action_prob=0.0)


def test_demonstrations_with_nothing_to_train_are_left_out_and_counted(load_tiny,
                                                                        tokenizer) -> None:
    """A demonstration whose only reply has weight 0 (a random first move that ended the
    episode) gives no step a loss of -0.000: it is left out and counted."""
    untrained = [[{"role": "user", "content": "go"},
                  {"role": "assistant", "content": "left", "weight": 0}]] * 3
    trained = [[{"role": "user", "content": "go"}, {"role": "assistant", "content": "up"}]]
    trajectories = conversations_to_trajectories(tokenizer, untrained + trained * 4)
    metrics = list(sft_steps(load_tiny(), trajectories, pad_token_id=tokenizer.pad_token_id,
                             epochs=1, batch_size=2, lr=1e-3, max_grad_norm=1.0))
    assert len(metrics) == 2  # the four trainable demos, two per step
    assert all(m["sft/empty_demos"] == 3.0 and m["sft/tokens"] > 0 for m in metrics)
    with pytest.raises(ValueError, match="none of the 3 SFT demonstrations has a reply"):
        list(sft_steps(load_tiny(), conversations_to_trajectories(tokenizer, untrained),
                       pad_token_id=tokenizer.pad_token_id, epochs=1, batch_size=2, lr=1e-3,
                       max_grad_norm=1.0))
