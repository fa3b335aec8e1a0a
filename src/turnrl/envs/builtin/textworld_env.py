"""``textworld-v0``: solve a small generated text adventure (Microsoft TextWorld).

Tests language grounding and multi-step planning under partial observability: the agent
reads room descriptions, moves between rooms and manipulates objects (open, take, unlock,
put, eat, ...) to reach the goal stated in the game's first message. Needs the optional extra
``pip install 'turnrl[textworld]'`` (the ``textworld`` package, which ships the Inform 7
compiler and, through ``jericho``, the Z-machine interpreter)::

    system:    You are playing a text adventure. Reply with one command per turn, e.g. go
               north, take key, open box.
    user:      Welcome to another exciting session of TextWorld! First of all, venture
               south. That done, take a trip east. Then, doublecheck that the cuboid locker
               in the studio is shut. Got that? Good!

               -= Cookhouse =-
               You arrive in a cookhouse. A normal kind of place. ...
    assistant: go south
    user:      -= Spare Room =-                                         reward 0.0
               You arrive in a spare room. ...
    assistant: go east
    ...
    assistant: close cuboid locker
    user:      You close the cuboid locker.                             reward 1.0, terminated

               Your score has just gone up by one point.

               *** The End ***

**Games.** Each reset draws a generator seed from the reset seed and builds a game with
TextWorld's own generator (what ``tw-make custom --world-size R --nb-objects O
--quest-length L --seed S`` does): ``num_rooms`` rooms, ``num_objects`` objects and a quest
of ``quest_length`` actions (the walkthrough is at most that long). Generation is
deterministic per seed (checked across processes and hash seeds). The game is compiled
offline to a Z-machine file (``.z8``, the only format TextWorld 1.7 compiles; the ``ni`` and
``inform6`` compilers ship inside the ``textworld`` wheel, nothing else is needed) plus the
``.json`` that TextWorld needs to track the game state. Compiled games are cached in
``cache_dir`` (default ``$XDG_CACHE_HOME/turnrl/textworld``, else
``~/.cache/turnrl/textworld``) under ``textworld-<version>/<game id>.z8``, where the game id
encodes the options and the generator seed, so later resets with the same seed skip
generation (about 1 s per new game) and only restart the interpreter. Games are written to a
temporary folder and renamed into place, so processes may share a cache.

**Threads.** The spec declares ``slow_steps`` (a reset may compile a game), so the runner
calls ``reset`` and ``step`` in worker threads. Within a process, a lock per game file makes
the envs of a group (which reset on the same seed at once) generate and compile each game
once: the first builds it, the others wait and then read it from the cache. TextWorld itself
is not thread-safe (one global logic parser, used when a game is generated or loaded, and a
global RNG), so every call into it holds one process-wide lock; only the Inform 7 compiler,
a subprocess, runs outside it, so different games still compile in parallel.

**Prompt.** The episode opens with a system message, the instruction above (plus a sentence
about the command list with ``show_admissible``), then the game's intro as the user turn.
``system_prompt`` replaces that system message (``""`` drops it: the instruction is the same
in every episode, and a small model trained from scratch learns the game from its
demonstrations without it).

**Observations.** The game's own text, compacted: the ASCII-art banner of the intro and the
restart prompt after the end are cut, lines are stripped and blank lines collapsed. With
``show_admissible=True`` every observation (except the last) ends with ``Available
commands: ...``, TextWorld's sorted list of admissible commands.

**Actions.** One game command, as text. Characters other than printable ASCII become spaces
(the Z-machine reads plain text; a NUL byte crashes the interpreter) and whitespace is
collapsed, so a multi-line reply is one line. The game's parser answers anything it does not
understand (``That's not a verb I recognise.``); that is a normal turn. Two kinds of reply
are refused without reaching the game, the observation says why and the turn is used up
(``info["invalid_action"]`` is True): several commands in one reply (``take key. go east``,
``take key then go east``, a ``;``, ``!`` or ``?`` between commands: the parser would play
them as several turns in one step, which breaks the per-turn score; a ``.`` counts only
before a word, so ``examine 1.5`` and ``go north.`` are one command) and interpreter
meta-commands that would put the game out of step with TextWorld's state tracking
(``quit``, ``restart``, ``save``, ``restore``, ``undo``, ``again``, ``script``, ``version``,
``verbose``, ``tw-...`` and a few others).
``info["admissible"]`` says whether the command was one of the admissible commands (case
aside; the parser also accepts synonyms, so False does not mean the command did nothing).

**Rewards and ends.** Per-turn reward is the increase of the game's score. Generated games
have one quest worth one point (``max_score`` is 1), so the reward is 1.0 on the turn the
quest is completed and 0.0 otherwise. ``terminated`` when the game is won (``*** The End
***``, ``info["success"]`` True) or lost (``*** You lost! ***``; generated games have no
losing condition); ``truncated`` after ``max_turns`` turns.

**Capabilities.** ``oracle_action()`` is the first command of TextWorld's winning policy
(``policy_commands``), re-planned from the current state after every turn, so it stays valid
after the agent deviates from the walkthrough; ``None`` when the game is over or no winning
policy exists. ``privileged_info()`` is that whole plan. ``state_key()`` is the game id plus
the sorted logical facts of the world (rooms, object locations, open/closed/locked...), so
turns that only look (``look``, ``examine``, a parser error) keep the key.
``sample_action(rng)`` is a random admissible command.
"""

from __future__ import annotations

import importlib
import os
import random
import re
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from turnrl.envs.prompts import system_messages
from turnrl.envs.protocol import EnvSpec
from turnrl.types import Message, StepResult

SPEC = EnvSpec(
    id="textworld-v0",
    entry_point="turnrl.envs.builtin.textworld_env:TextWorldEnv",
    max_turns=20,
    description="Solve a small generated TextWorld text adventure; reply with one command a turn.",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    has_state_key=True,
    has_privileged_info=True,
    slow_steps=True,  # reset may generate and compile a game (seconds)
)

INSTALL_HINT = "pip install 'turnrl[textworld]'"
INSTRUCTION = (
    "You are playing a text adventure. Reply with one command per turn, e.g. go north, "
    "take key, open box."
)
ADMISSIBLE_INSTRUCTION = " Each observation ends with the available commands."
ADMISSIBLE_PREFIX = "Available commands: "
EXAMPLES = "Reply with one game command, e.g. look, inventory, go north or take key."
META_REFUSAL = "The command {command!r} is not available in this game. " + EXAMPLES
SEVERAL_REFUSAL = "One command per turn: {command!r} holds several. " + EXAMPLES
NO_RESPONSE = "(The game printed nothing.)"
WON_MARK = "*** The End ***"
LOST_MARK = "*** You lost! ***"
# Interpreter commands that would put the Z-machine out of step with TextWorld's tracking
# (quit/restart ask a yes/no question, restore/undo rewind) or print the banner again.
META_VERBS = frozenset({
    "quit", "q", "restart", "save", "restore", "undo", "script", "unscript", "transcript",
    "noscript", "version", "verbose", "brief", "superbrief", "notify", "again", "g",
})
# What the parser takes as "next command": ; ! ? "then", and a full stop before a word (not
# the "." of "1.5", nor a final one).
COMMAND_BREAK = re.compile(r"[;!?]|\.(?=\s*[a-z])|\bthen\b", re.IGNORECASE)
# A line of the ASCII-art "TEXTWORLD" banner that opens every game.
BANNER_LINE = re.compile(r"(?=.*[_|$\\/])[ _|$\\/<>]+")
Z_MACHINE_SEED = 1234  # the interpreter's RNG; generated games draw no random numbers
MAX_GENERATION_ATTEMPTS = 10

# TextWorld's logic parser and RNG are module globals: one call into textworld at a time.
_TEXTWORLD_LOCK = threading.RLock()
_BUILD_LOCKS: dict[Path, threading.Lock] = {}  # game file -> its lock (one per game built)
_BUILD_LOCKS_GUARD = threading.Lock()


def _build_lock(game_file: Path) -> threading.Lock:
    """The process-wide lock that serialises generating and compiling ``game_file``."""
    with _BUILD_LOCKS_GUARD:
        return _BUILD_LOCKS.setdefault(game_file.resolve(), threading.Lock())


def import_textworld() -> Any:
    """The ``textworld`` module, or an ImportError naming the ``turnrl[textworld]`` extra."""
    try:
        return importlib.import_module("textworld")
    except ImportError as exc:
        raise ImportError(
            f"env 'textworld-v0' needs Microsoft TextWorld, which is not installed; install "
            f"it with {INSTALL_HINT}"
        ) from exc


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/turnrl/textworld``, else ``~/.cache/turnrl/textworld``."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "turnrl" / "textworld"


class TextWorldEnv:
    """A TextWorld game generated from the reset seed, played through the Z-machine."""

    def __init__(
        self,
        *,
        num_rooms: int = 3,
        num_objects: int = 5,
        quest_length: int = 3,
        show_admissible: bool = False,
        max_turns: int = 20,
        cache_dir: str | None = None,
        system_prompt: str | None = None,
    ) -> None:
        _validate(num_rooms, num_objects, quest_length, max_turns)
        instruction = INSTRUCTION + (ADMISSIBLE_INSTRUCTION if show_admissible else "")
        self.system_messages = system_messages(instruction, system_prompt, SPEC.id)
        self._tw = import_textworld()
        self.num_rooms, self.num_objects, self.quest_length = num_rooms, num_objects, quest_length
        self.show_admissible, self.max_turns = show_admissible, max_turns
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        kwargs = {
            "num_rooms": num_rooms,
            "num_objects": num_objects,
            "quest_length": quest_length,
            "show_admissible": show_admissible,
            "max_turns": max_turns,
            "cache_dir": cache_dir,
            "system_prompt": system_prompt,
        }
        self.spec = replace(SPEC, max_turns=max_turns, kwargs=kwargs)
        self._rng: random.Random | None = None
        self._game: Any = None  # the running textworld Environment
        self._game_file: Path | None = None
        self._state: Any = None  # the textworld GameState after the last command
        self._score = 0
        self._turn = 0
        self._done = True

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """New episode on the game generated from ``seed`` (compiled once, then cached)."""
        if options:
            raise ValueError(f"textworld: unknown reset option(s) {sorted(options)}; none exist")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        game_file, game_seed = self._game_file_for(self._rng)
        if game_file != self._game_file:
            self._start(game_file)
        with _TEXTWORLD_LOCK:
            self._state = self._game.reset()
        self._score, self._turn, self._done = int(self._state["score"] or 0), 0, False
        info = {
            "game_file": str(game_file),
            "game_seed": game_seed,
            "objective": self._state["objective"],
            "walkthrough": list(self._state["extra.walkthrough"] or []),
            "max_score": self._state["max_score"],
        }
        return [
            *self.system_messages,
            {"role": "user", "content": self._render(self._state["feedback"], ended=False)},
        ], info

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RuntimeError("textworld: the episode is over; call reset() first")
        self._turn += 1
        command = normalize_command(action)
        refusal = why_refused(command)
        admissible = command.lower() in {c.lower() for c in self.admissible_commands()}
        if refusal is not None:
            text, reward, won, lost = refusal, 0.0, False, False
        else:
            with _TEXTWORLD_LOCK:
                self._state, _, _ = self._game.step(command)
            score = int(self._state["score"] or 0)
            reward, self._score = float(score - self._score), score
            won, lost = bool(self._state["won"]), bool(self._state["lost"])
            text = self._state["feedback"]
        terminated = won or lost
        truncated = not terminated and self._turn >= self.max_turns
        self._done = terminated or truncated
        return StepResult(
            observation=[{"role": "user", "content": self._render(text, ended=self._done)}],
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            info={
                "success": won,
                "score": self._score,
                "invalid_action": refusal is not None,
                "admissible": admissible,
            },
        )

    def close(self) -> None:
        if self._game is not None:
            with _TEXTWORLD_LOCK:
                self._game.close()
        self._game, self._game_file, self._state, self._done = None, None, None, True

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The next command of TextWorld's winning policy from the current state."""
        if self._done:
            return None
        plan = self._state["policy_commands"] or []
        return plan[0] if plan else None

    def privileged_info(self) -> str:
        """The winning plan from here, e.g. ``"plan: go east > take key (2 commands)"``."""
        plan = [] if self._state is None else self._state["policy_commands"] or []
        if not plan:
            return "no winning plan from here"
        return f"plan: {' > '.join(plan)} ({len(plan)} commands)"

    def state_key(self) -> tuple[str, tuple[str, ...]]:
        """(game id, sorted world facts): identical world states share a key."""
        facts = [] if self._state is None else self._state["facts"] or []
        game_id = self._game_file.stem if self._game_file is not None else ""
        return game_id, tuple(sorted(map(str, facts)))

    def sample_action(self, rng: random.Random) -> str:
        """A random admissible command from the caller's ``rng`` (``look`` if none)."""
        commands = self.admissible_commands()
        return rng.choice(commands) if commands else "look"

    def admissible_commands(self) -> list[str]:
        """TextWorld's admissible commands in the current state, sorted."""
        return list(self._state["admissible_commands"] or []) if self._state is not None else []

    # -- helpers ------------------------------------------------------------------------------

    def _render(self, feedback: str, *, ended: bool) -> str:
        text = compact_feedback(feedback)
        if self.show_admissible and not ended:
            text += "\n\n" + ADMISSIBLE_PREFIX + ", ".join(self.admissible_commands())
        return text

    def _start(self, game_file: Path) -> None:
        self.close()
        request_infos = self._tw.EnvInfos(
            admissible_commands=True,
            policy_commands=True,
            facts=True,
            score=True,
            max_score=True,
            won=True,
            lost=True,
            objective=True,
            extras=["walkthrough"],
        )
        with _TEXTWORLD_LOCK:  # loading parses the game's logic with textworld's global parser
            self._game = self._tw.start(str(game_file), request_infos=request_infos)
            self._game.seed(Z_MACHINE_SEED)
        self._game_file = game_file

    def _game_options(self, game_seed: int) -> Any:
        options = self._tw.GameOptions()
        options.seeds = game_seed
        options.nb_rooms = self.num_rooms
        options.nb_objects = self.num_objects
        options.quest_length = self.quest_length
        return options

    def _game_file_for(self, rng: random.Random) -> tuple[Path, int]:
        """The compiled game for the next generator seed drawn from ``rng`` (cached; built
        under the game file's lock, so threads asking for the same game build it once)."""
        folder = self.cache_dir / f"textworld-{self._tw.__version__}"
        for _ in range(MAX_GENERATION_ATTEMPTS):
            game_seed = rng.randrange(2**31)
            options = self._game_options(game_seed)
            game_file = folder / f"{options.uuid}.z8"
            if _is_built(game_file):
                return game_file, game_seed
            with _build_lock(game_file):
                if _is_built(game_file) or self._build(options, game_file):
                    return game_file, game_seed
            # no quest of that length in this world: draw another seed
        raise RuntimeError(
            f"textworld: no quest of length {self.quest_length} could be generated in "
            f"{MAX_GENERATION_ATTEMPTS} worlds of {self.num_rooms} room(s) and "
            f"{self.num_objects} object(s); lower quest_length or raise num_rooms/num_objects"
        )

    def _build(self, options: Any, game_file: Path) -> bool:
        """Generate and compile the game of ``options`` to ``game_file``; False when the
        world has no quest of the asked length."""
        from textworld.generator.chaining import QuestGenerationError

        try:
            with _TEXTWORLD_LOCK:
                game = self._tw.generator.make_game(options)
        except QuestGenerationError:
            return False
        _compile(self._tw, game, game_file)
        return True


def _is_built(game_file: Path) -> bool:
    return game_file.is_file() and game_file.with_suffix(".json").is_file()


def _compile(tw: Any, game: Any, game_file: Path) -> None:
    """Compile ``game`` to ``game_file`` (+ ``.json``) atomically: build aside, then rename.

    The steps of TextWorld's ``compile_game``: the Inform 7 source and the ``.json`` are
    written under the process-wide TextWorld lock, the compiler subprocess runs outside it.
    """
    game_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=game_file.parent, prefix=".build-") as build_dir:
        built = Path(build_dir) / game_file.name
        with _TEXTWORLD_LOCK:
            source = tw.generator.generate_inform7_source(game)
            game.save(str(built.with_suffix(".json")))
        tw.generator.compile_inform7_game(source, str(built))
        os.replace(built.with_suffix(".json"), game_file.with_suffix(".json"))
        os.replace(built, game_file)  # last: a .z8 in the cache means both files are there


def normalize_command(action: str) -> str:
    """Printable ASCII only (anything else becomes a space), without backslashes (the
    interpreter, dumb-frotz, reads ``\\x`` in a command as one of its own escapes: ``\\h``
    waits for input forever, others have crashed the process), whitespace collapsed."""
    text = "".join(char if " " <= char <= "~" and char != "\\" else " " for char in str(action))
    return " ".join(text.split())


def why_refused(command: str) -> str | None:
    """The observation for a reply not sent to the game (several commands, a meta-command),
    or ``None`` when ``command`` goes to the game."""
    sentences = [words for s in COMMAND_BREAK.split(command.lower()) if (words := s.split())]
    if len(sentences) > 1:
        return SEVERAL_REFUSAL.format(command=command)
    if sentences and (sentences[0][0] in META_VERBS or sentences[0][0].startswith("tw-")):
        return META_REFUSAL.format(command=command)
    return None


def compact_feedback(text: str) -> str:
    """The game's text without the banner, the restart prompt and runs of blank lines."""
    for mark in (WON_MARK, LOST_MARK):
        if mark in text:
            text = text[: text.index(mark) + len(mark)]
    lines = [line.strip() for line in text.splitlines() if not BANNER_LINE.fullmatch(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() or NO_RESPONSE


def _validate(num_rooms: int, num_objects: int, quest_length: int, max_turns: int) -> None:
    for name, value, low in (
        ("num_rooms", num_rooms, 1),
        ("num_objects", num_objects, 0),
        ("quest_length", quest_length, 1),
        ("max_turns", max_turns, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"textworld: {name} must be an int >= {low}, got {value!r}")
    if max_turns < quest_length:
        raise ValueError(
            f"textworld: max_turns={max_turns} is shorter than quest_length={quest_length} "
            f"(the walkthrough can take that many commands); raise max_turns to >= "
            f"{quest_length} or lower quest_length"
        )
