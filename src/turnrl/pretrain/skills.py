"""The corpus's skills, one generator each: ``skill(rng, budget) -> list[Message]``.

Each generator writes one ChatML conversation (OpenAI message dicts) that exercises one skill
over random strings (:mod:`turnrl.pretrain.text`); ``budget`` bounds the conversation's length
in characters, so long-range skills (copying, lookup) reach as far as the context allows. The
assistant's turns are what the model is trained to write; everything else is context it must
read. Tool calls over random schemas are :mod:`turnrl.pretrain.tool_skill`.

Nothing here knows any env: the phrasings are generic and drawn at random, so what the model
learns is to copy, look up, choose, remember, compute and count, whatever the words.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from turnrl.pretrain import text
from turnrl.types import Message

Skill = Callable[[random.Random, int], list[Message]]

# a small, generic instruction, sometimes given as the system message
SYSTEMS = ("", "", "You are a helpful assistant.", "Answer exactly and briefly.",
           "Reply with the answer only.", "Be precise.")
COPY_LABELS = ("code", "key", "secret", "password", "string", "token", "tag", "id")


def _system(rng: random.Random) -> list[Message]:
    content = rng.choice(SYSTEMS)
    return [{"role": "system", "content": content}] if content else []


def _payload(rng: random.Random, length: int) -> str:
    """A string to copy: a code, mixed-case characters, or pseudo-words."""
    kind = rng.randrange(3)
    if kind == 0:
        return text.code(rng, length)
    if kind == 1:
        return text.code(rng, length, text.MIXED_ALPHABET)
    found = " ".join(text.word(rng) for _ in range(max(1, length // 5)))
    return found[:length].strip() or text.word(rng)


def copy(rng: random.Random, budget: int, *, distance: int | None = None,
         length: int | None = None) -> list[Message]:
    """Copy a string seen ``distance`` characters earlier (log-uniform up to the budget)."""
    label = rng.choice(COPY_LABELS)
    payload = _payload(rng, length or rng.randint(4, 40))
    room = max(0, budget - len(payload) * 2 - 120)
    gap = text.log_uniform(rng, 0, room) if distance is None else distance
    between = text.filler(rng, gap)
    ask = rng.choice((f"What is the {label}?", f"Repeat the {label} exactly.",
                      f"Write the {label}.", f"Copy the {label}."))
    if rng.random() < 0.3:  # the string in an earlier turn, the question in a later one
        return [*_system(rng),
                {"role": "user", "content": f"The {label} is {payload}. {between}"},
                {"role": "assistant", "content": rng.choice(("OK.", "Noted.", "Got it."))},
                {"role": "user", "content": ask},
                {"role": "assistant", "content": payload}]
    context = f"The {label} is {payload}.\n{between}" if between else f"The {label} is {payload}."
    return [*_system(rng), {"role": "user", "content": f"{context}\n{ask}"},
            {"role": "assistant", "content": payload}]


def echo(rng: random.Random, budget: int) -> list[Message]:
    """Repeat a whole text verbatim (codes, mixed characters or pseudo-words, up to half the
    budget): every reply token is a copy of the token as far back as the text is long."""
    length = text.log_uniform(rng, 8, max(8, min(400, budget // 2 - 40)))
    payload = _payload(rng, length)
    ask = rng.choice(("Repeat exactly:", "Say this back:", "Copy:", "Echo the text."))
    return [*_system(rng), {"role": "user", "content": f"{ask}\n{payload}"},
            {"role": "assistant", "content": payload}]


def induction(rng: random.Random, budget: int) -> list[Message]:
    """Continue a sequence seen earlier: ``... A B C D ... Continue: A B`` → ``C D``."""
    sequence = " ".join(text.words(rng, rng.randint(4, 12), (1, 2)))
    cut = rng.randint(1, max(1, len(sequence) // 2))
    room = max(0, budget - len(sequence) * 2 - 80)
    before = text.filler(rng, text.log_uniform(rng, 0, room // 2))
    after = text.filler(rng, text.log_uniform(rng, 0, room // 2))
    content = f"{before} {sequence}. {after}".strip()
    return [*_system(rng),
            {"role": "user", "content": f"{content}\nContinue the text: {sequence[:cut]}"},
            {"role": "assistant", "content": sequence[cut:] if cut < len(sequence) else "."}]


def _table(rng: random.Random, rows: int, budget: int) -> tuple[list[str], list[str],
                                                                 list[list[str]]]:
    keys = text.words(rng, rows, (1, 3)) if rng.random() < 0.5 else \
        list(dict.fromkeys(text.name(rng) for _ in range(rows)))
    columns = text.words(rng, rng.randint(1, 3), (1, 2))
    cells = [[text.value(rng) for _ in columns] for _ in keys]
    while len(keys) > 2 and sum(len(k) + 3 + sum(len(c) + 3 for c in row)
                                for k, row in zip(keys, cells, strict=True)) > budget:
        keys, cells = keys[:-1], cells[:-1]
    return keys, columns, cells


def _question(rng: random.Random, key: str, column: str | None) -> str:
    if column is None:
        return rng.choice((f"What is {key}?", f"Look up {key}.", f"{key}?"))
    return rng.choice((f"What is the {column} of {key}?", f"{key}: {column}?"))


def lookup(rng: random.Random, budget: int, *, queries: int | None = None) -> list[Message]:
    """Find a key's value in a list (``key: value``) or a table (``key | a | b``); then, in
    later turns, the values of up to ``queries`` - 1 more keys (one to four queries in all when
    ``None``): each answer is a fresh search of the same table."""
    keys, columns, cells = _table(rng, text.log_uniform(rng, 2, 60), budget - 150)
    row = rng.randrange(len(keys))
    column = rng.randrange(len(columns))
    plain = len(columns) == 1 and rng.random() < 0.5
    if plain:
        lines = [f"{k}: {r[0]}" for k, r in zip(keys, cells, strict=True)]
    else:
        lines = [" | ".join(["name", *columns])]
        lines += [" | ".join([k, *r]) for k, r in zip(keys, cells, strict=True)]
    question = _question(rng, keys[row], None if plain else columns[column])
    table = "\n".join(lines)
    order = rng.random() < 0.7
    content = f"{table}\n{question}" if order else f"{question}\n{table}"
    messages: list[Message] = [*_system(rng), {"role": "user", "content": content},
                               {"role": "assistant", "content": cells[row][column]}]
    for _ in range((queries or rng.randint(1, 4)) - 1):
        row, column = rng.randrange(len(keys)), rng.randrange(len(columns))
        messages += [{"role": "user",
                      "content": _question(rng, keys[row], None if plain else columns[column])},
                     {"role": "assistant", "content": cells[row][column]}]
    return messages


def _option(rng: random.Random) -> str:
    """A command or a name of one to four pseudo-words, e.g. ``vask the brelo``."""
    parts = [text.word(rng, (1, 2)) for _ in range(rng.randint(1, 4))]
    if len(parts) > 2 and rng.random() < 0.5:
        parts.insert(1, rng.choice(("the", "to", "a", "with", "on")))
    return " ".join(parts)


def choose(rng: random.Random, budget: int) -> list[Message]:
    """Pick one of a listed set of commands or names and write it exactly."""
    options = list(dict.fromkeys(_option(rng) for _ in range(rng.randint(2, 15))))
    index = rng.randrange(len(options))
    target = options[index]
    bullet = rng.choice(("- ", "* ", "", "{n}. "))
    listing = "\n".join(bullet.format(n=i + 1) + o for i, o in enumerate(options))
    unique = [w for w in target.split() if sum(w in o.split() for o in options) == 1]
    ways = [f"Write option {index + 1}."] if bullet == "{n}. " else []
    if index == 0:
        ways.append("Write the first one.")
    if index == len(options) - 1:
        ways.append("Write the last one.")
    if unique:
        ways.append(f"Write the one with {rng.choice(unique)!r}.")
    ways.append(f"Write the one that starts with {target.split()[0]!r}."
                if sum(o.split()[0] == target.split()[0] for o in options) == 1
                else f"Write {target!r} exactly.")
    head = rng.choice(("Options:", "Valid commands:", "Names:", "You can say:", "Choices:"))
    return [*_system(rng), {"role": "user", "content": f"{head}\n{listing}\n{rng.choice(ways)}"},
            {"role": "assistant", "content": target}]


def memory(rng: random.Random, budget: int) -> list[Message]:
    """A dialogue of several turns whose last answer is a fact given in an earlier turn."""
    facts = {w: text.value(rng) for w in text.words(rng, rng.randint(1, 5), (1, 2))}
    messages = _system(rng)
    for key, val in facts.items():
        messages += [{"role": "user", "content": rng.choice((f"Remember: my {key} is {val}.",
                                                             f"Note that the {key} is {val}.",
                                                             f"My {key} is {val}."))},
                     {"role": "assistant", "content": rng.choice(("OK.", "Noted.", "Sure."))}]
        if rng.random() < 0.4:  # an unrelated exchange between the facts
            a, b = text.number(rng, (1, 2)), text.number(rng, (1, 2))
            messages += [{"role": "user", "content": f"What is {a} + {b}?"},
                         {"role": "assistant", "content": str(a + b)}]
    key = rng.choice(list(facts))
    messages += [{"role": "user", "content": rng.choice((f"What is my {key}?",
                                                         f"What was the {key}?"))},
                 {"role": "assistant", "content": facts[key]}]
    return messages


def arithmetic(rng: random.Random, budget: int) -> list[Message]:
    """Addition, subtraction and multiplication with carries, sometimes with the working."""
    op = rng.choice("++--*")
    a = text.number(rng, (1, 4) if op != "*" else (1, 2))
    b = text.number(rng, (1, 4) if op != "*" else (1, 2))
    if op == "-" and b > a:
        a, b = b, a
    result = a + b if op == "+" else a - b if op == "-" else a * b
    ask = rng.choice((f"What is {a} {op} {b}?", f"{a} {op} {b} =", f"Compute {a}{op}{b}."))
    answer = str(result) if rng.random() < 0.8 else f"{a} {op} {b} = {result}"
    return [*_system(rng), {"role": "user", "content": ask},
            {"role": "assistant", "content": answer}]


def count_compare(rng: random.Random, budget: int) -> list[Message]:
    """Count items or a letter; compare two numbers; find the largest of a list."""
    kind = rng.randrange(4)
    if kind == 0:
        items = [text.word(rng, (1, 2)) for _ in range(rng.randint(1, 12))]
        ask, answer = f"How many items are in this list? {', '.join(items)}", str(len(items))
    elif kind == 1:
        letters = text.code(rng, rng.randint(3, 20), "abcde")
        letter = rng.choice("abcde")
        ask = f"How many times does {letter!r} appear in {letters}?"
        answer = str(letters.count(letter))
    elif kind == 2:
        a, b = text.number(rng), text.number(rng)
        bigger = rng.random() < 0.5
        ask = f"Which is {'larger' if bigger else 'smaller'}: {a} or {b}?"
        answer = str(max(a, b) if bigger else min(a, b))
    else:
        numbers = [text.number(rng, (1, 3)) for _ in range(rng.randint(2, 8))]
        ask = f"Which is the largest of {', '.join(map(str, numbers))}?"
        answer = str(max(numbers))
    return [*_system(rng), {"role": "user", "content": ask},
            {"role": "assistant", "content": answer}]
