"""The env registry: versioned ids, make/spec/registered_ids, errors, entry-point plugins."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import types
from pathlib import Path

import pytest

from turnrl.envs import (
    Env,
    EnvPluginError,
    EnvSpec,
    HasOracle,
    HasStateKey,
    UnknownEnvError,
    make,
    parse_env_id,
    register,
    register_prefix,
    registered_ids,
    spec,
)
from turnrl.envs import registry as env_registry
from turnrl.envs.builtin.frozenlake import FrozenLake
from turnrl.types import StepResult


class Echo:
    """The smallest env: one turn, echoes the reply."""

    def __init__(self, *, greeting: str = "hi", max_turns: int = 1) -> None:
        self.greeting = greeting
        self.max_turns = max_turns

    def reset(self, *, seed=None, options=None):
        return [{"role": "user", "content": self.greeting}], {}

    def step(self, action):
        return StepResult([{"role": "user", "content": action}], 0.0, True, False, {})

    def close(self):
        pass


@pytest.fixture
def isolated(monkeypatch):
    """A private copy of the registry, with no plugins installed."""
    monkeypatch.setattr(env_registry, "_SPECS", dict(env_registry._SPECS))
    monkeypatch.setattr(env_registry, "_loaded_plugins", set())
    monkeypatch.setattr(env_registry, "_plugins_scanned", False)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda *, group: [])
    return monkeypatch


class FakeEntryPoint:
    def __init__(self, name: str, value: str, load) -> None:
        self.name, self.value, self.group = name, value, "turnrl.envs"
        self._load = load

    def load(self):
        return self._load()


def install_plugins(monkeypatch, *entry_points: FakeEntryPoint) -> None:
    def fake_entry_points(*, group):
        return list(entry_points) if group == "turnrl.envs" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)


# -- built-ins and make ---------------------------------------------------------------------


def test_builtins_are_registered():
    assert {"arithmetic-v0", "frozenlake-v0"} <= set(registered_ids())
    assert registered_ids() == sorted(registered_ids())


def test_make_returns_env_with_merged_spec():
    env = make("frozenlake-v0", hole_prob=0.0, max_turns=20)
    assert isinstance(env, Env) and isinstance(env, HasOracle) and isinstance(env, HasStateKey)
    assert env.spec.id == "frozenlake-v0"
    assert env.spec.max_turns == 20
    assert env.spec.kwargs == {
        "min_size": 4,
        "max_size": 5,
        "hole_prob": 0.0,
        "random_positions": False,
        "max_turns": 20,
        "progress_reward": 0.0,
    }
    env.reset(seed=0)
    results = [env.step("up") for _ in range(20)]
    assert [r.truncated for r in results] == [False] * 19 + [True]


def test_make_default_spec_matches_registered():
    env = make("arithmetic-v0")
    assert env.spec.max_turns == spec("arithmetic-v0").max_turns == 1
    assert env.spec.kwargs == {"min_value": 0, "max_value": 99, "ops": "+"}


def test_spec_returns_a_copy():
    copy = spec("frozenlake-v0")
    copy.kwargs["hole_prob"] = 0.9
    assert "hole_prob" not in spec("frozenlake-v0").kwargs


def test_register_callable_entry_point_and_kwargs(isolated):
    registered = register("echo-v0", Echo, max_turns=1, description="echo", greeting="yo")
    assert registered.kwargs == {"greeting": "yo"} and registered.name == "echo"
    env = make("echo-v0")
    assert env.reset()[0][0]["content"] == "yo"
    assert make("echo-v0", greeting="hey").reset()[0][0]["content"] == "hey"
    assert env.spec.kwargs == {"greeting": "yo", "max_turns": 1}


def test_register_passes_max_turns_to_constructor(isolated):
    register("echo-v0", Echo, max_turns=3, description="echo")
    assert make("echo-v0").max_turns == 3
    assert make("echo-v0", max_turns=5).spec.max_turns == 5


def test_register_declares_slow_steps(isolated):
    assert register("fast-echo-v0", Echo, max_turns=1, description="echo").slow_steps is False
    assert not make("fast-echo-v0").spec.slow_steps
    registered = register("slow-echo-v0", Echo, max_turns=1, description="blocks",
                          slow_steps=True)
    assert registered.slow_steps and registered.kwargs == {}  # not a constructor kwarg
    assert make("slow-echo-v0").spec.slow_steps
    assert spec("slow-echo-v0").slow_steps


def test_string_entry_point_loads_lazily(isolated):
    register("lake-v0", "turnrl.envs.builtin.frozenlake:FrozenLake", max_turns=12, description="")
    env = make("lake-v0")
    assert isinstance(env, FrozenLake) and env.max_turns == 12 and env.spec.id == "lake-v0"


def test_bad_string_entry_point_names_the_env(isolated):
    register("ghost-v0", "no_such_module_xyz:Env", max_turns=1, description="")
    with pytest.raises(ImportError, match=r"ghost-v0.*no_such_module_xyz:Env"):
        make("ghost-v0")
    with pytest.raises(ValueError, match="module:Attribute"):
        register("ghost-v1", "not an entry point", max_turns=1, description="")


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["FrozenLake", "frozenlake", "frozen lake-v0", "lake-v", ""])
def test_bad_id_format_names_the_fix(isolated, bad_id):
    with pytest.raises(ValueError, match=r"name-vN.*-v0"):
        register(bad_id, Echo, max_turns=1, description="")


def test_bad_id_suggests_a_valid_id(isolated):
    with pytest.raises(ValueError, match="'frozenlake-v0'"):
        register("FrozenLake", Echo, max_turns=1, description="")


def test_duplicate_id_says_bump_the_version(isolated):
    with pytest.raises(ValueError, match=r"already registered.*frozenlake-v1"):
        register("frozenlake-v0", Echo, max_turns=1, description="")


def test_unknown_id_did_you_mean_and_choices():
    with pytest.raises(UnknownEnvError) as caught:
        make("frozenlak-v0")
    message = str(caught.value)
    assert "did you mean 'frozenlake-v0'?" in message
    assert "arithmetic-v0" in message and "frozenlake-v0" in message
    assert isinstance(caught.value, KeyError)


def test_missing_version_suggests_latest(isolated):
    register("frozenlake-v1", FrozenLake, max_turns=10, description="")
    with pytest.raises(KeyError, match="no version; did you mean 'frozenlake-v1'"):
        make("frozenlake")
    with pytest.raises(KeyError, match="did you mean 'arithmetic-v0'"):
        spec("arithmetic")


def test_unknown_version_lists_versions():
    with pytest.raises(KeyError, match="registered versions of 'frozenlake': frozenlake-v0"):
        make("frozenlake-v7")


def test_unknown_kwarg_names_it_and_accepted():
    with pytest.raises(TypeError) as caught:
        make("frozenlake-v0", hole_probability=0.1)
    message = str(caught.value)
    assert "hole_probability" in message
    for accepted in ("hole_prob", "max_size", "min_size", "max_turns", "random_positions"):
        assert accepted in message


def test_max_turns_override_needs_constructor_support():
    with pytest.raises(TypeError, match=r"max_turns.*accepts: max_value, min_value, ops"):
        make("arithmetic-v0", max_turns=3)


def test_spec_validation():
    with pytest.raises(ValueError, match="max_turns"):
        EnvSpec(id="x-v0", entry_point=Echo, max_turns=0)
    with pytest.raises(ValueError, match="reward_range"):
        EnvSpec(id="x-v0", entry_point=Echo, max_turns=1, reward_range=(1.0, 0.0))
    with pytest.raises(TypeError, match="entry_point"):
        EnvSpec(id="x-v0", entry_point=42, max_turns=1)  # type: ignore[arg-type]


def test_parse_env_id():
    assert parse_env_id("frozenlake-v0") == ("frozenlake", 0)
    assert parse_env_id("my-org/maze-hard-v12") == ("my-org/maze-hard", 12)
    assert parse_env_id("frozenlake") is None
    assert parse_env_id("frozenlake-v0\n") is None
    assert EnvSpec(id="maze-hard-v3", entry_point=Echo, max_turns=1).version == 3


# -- entry-point plugins ----------------------------------------------------------------------


def test_plugin_hook_registers_lazily_once(isolated):
    calls = []

    def hook():
        calls.append(1)
        register("plugin-echo-v0", Echo, max_turns=1, description="from a plugin")

    install_plugins(isolated, FakeEntryPoint("echo", "plugin_pkg.envs:hook", lambda: hook))
    assert calls == []  # nothing is loaded before the first make/spec/registered_ids
    env = make("plugin-echo-v0")
    assert env.spec.description == "from a plugin"
    assert "plugin-echo-v0" in registered_ids()
    spec("plugin-echo-v0")
    assert calls == [1]


def test_plugin_module_import_may_register(isolated):
    def load_module():
        register("imported-echo-v0", Echo, max_turns=1, description="")
        return types.SimpleNamespace()  # a module: not callable, nothing more to call

    install_plugins(isolated, FakeEntryPoint("mod", "plugin_pkg.envs", load_module))
    assert "imported-echo-v0" in registered_ids()


def test_failing_plugin_names_the_entry_point(isolated):
    def broken():
        raise RuntimeError("boom")

    install_plugins(isolated, FakeEntryPoint("broken", "bad_pkg.envs:register", lambda: broken))
    with pytest.raises(EnvPluginError, match=r"'broken = bad_pkg.envs:register'.*boom"):
        make("frozenlake-v0")
    with pytest.raises(EnvPluginError):  # still reported, not silently skipped
        registered_ids()


def test_unloadable_plugin_names_the_entry_point(isolated):
    def load():
        raise ModuleNotFoundError("No module named 'gone'")

    install_plugins(isolated, FakeEntryPoint("gone", "gone:hook", load))
    with pytest.raises(EnvPluginError, match=r"'gone = gone:hook'.*No module named"):
        spec("frozenlake-v0")


# -- prefix resolvers -------------------------------------------------------------------------


class EchoResolver:
    """Resolves ``echo:<greeting>``: an Echo env greeting with the rest of the id."""

    def __init__(self, tag: str = "echo") -> None:
        self.tag = tag
        self.calls: list[tuple[str, str]] = []

    def spec(self, id):
        self.calls.append(("spec", id))
        return EnvSpec(id=f"{self.tag}-v0", entry_point=Echo, max_turns=1)

    def make(self, id, **kwargs):
        self.calls.append(("make", id))
        env = Echo(greeting=id.split(":", 1)[-1], **kwargs)
        env.spec = EnvSpec(id=f"{self.tag}-v0", entry_point=Echo, max_turns=1, kwargs=kwargs)
        return env


@pytest.fixture
def prefixes(isolated):
    isolated.setattr(env_registry, "_PREFIXES", dict(env_registry._PREFIXES))
    return isolated


def test_prefix_resolver_builds_unregistered_ids(prefixes):
    resolver = EchoResolver()
    register_prefix("echo:", resolver)
    env = make("echo:hello", max_turns=1)
    assert env.reset()[0][0]["content"] == "hello" and env.spec.kwargs == {"max_turns": 1}
    assert spec("echo:hello").id == "echo-v0"
    assert resolver.calls == [("make", "echo:hello"), ("spec", "echo:hello")]
    assert not any(i.startswith("echo") for i in registered_ids())


def test_registered_id_wins_then_the_longest_prefix(prefixes):
    short, long = EchoResolver("short"), EchoResolver("long")
    register_prefix("echo/", short)
    register_prefix("echo/deep/", long)
    register("echo/one-v0", Echo, max_turns=1, description="registered")
    assert make("echo/one-v0").spec.description == "registered"
    assert make("echo/two-v0").spec.id == "short-v0"
    assert make("echo/deep/three-v0").spec.id == "long-v0"
    assert short.calls == [("make", "echo/two-v0")]


def test_register_prefix_errors(prefixes):
    resolver = EchoResolver()
    register_prefix("echo:", resolver)
    register_prefix("echo:", resolver)  # the same resolver again: a no-op
    with pytest.raises(ValueError, match="'echo:' is already resolved by"):
        register_prefix("echo:", EchoResolver())
    with pytest.raises(ValueError, match="non-empty str"):
        register_prefix("", resolver)
    with pytest.raises(TypeError, match=r"has no make\(\) method"):
        register_prefix("bad:", types.SimpleNamespace(spec=lambda id: None))


def test_unknown_prefix_is_an_unknown_env():
    with pytest.raises(UnknownEnvError, match="unknown env 'nogym:FrozenLake-v1'"):
        make("nogym:FrozenLake-v1")


def test_turnrl_envs_registers_the_gym_prefixes():
    import turnrl.envs.gym as gym_package

    for prefix in gym_package.PREFIXES:
        assert env_registry._PREFIXES[prefix] is gym_package.RESOLVER
    assert env_registry.resolves(gym_package.GYM_PREFIX + "CartPole-v1")


def test_capabilities_lists_the_declared_methods():
    assert EnvSpec(id="x-v0", entry_point=Echo, max_turns=1).capabilities == ()
    declared = EnvSpec(id="x-v0", entry_point=Echo, max_turns=1, has_privileged_info=True,
                       has_oracle=True, tools=["search"])
    assert declared.capabilities == ("oracle_action", "privileged_info", "tool_schemas")


def test_registry_imports_no_gym_module():
    """The registry knows no env family: importing it (and so turnrl.envs, which registers
    the gym: resolver) loads neither gymnasium nor the adapter (only the gym package's ids
    module, which holds its prefixes), and works without gymnasium."""
    source = Path(env_registry.__file__).read_text(encoding="utf-8")
    imported = {alias.name for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not [m for m in imported if "gym" in m], imported
    script = (
        "import sys\n"
        "sys.modules['gymnasium'] = None  # `import gymnasium` fails, as when not installed\n"
        "import turnrl.envs.registry\n"
        "loaded = [m for m, module in sys.modules.items() if module is not None\n"
        "          and m.startswith(('gymnasium', 'turnrl.envs.gym.'))\n"
        "          and m != 'turnrl.envs.gym.ids']\n"
        "assert not loaded, loaded\n"
        "from turnrl.envs import make\n"
        "make('arithmetic-v0')\n"
        "try:\n"
        "    make('gym:FrozenLake-v1')\n"
        "except ImportError as error:\n"
        "    assert 'turnrl[gym]' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('gym: ids need gymnasium')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
