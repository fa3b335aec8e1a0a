"""Training on your own env: its module imported by env.imports / --import (also in the
factory a Ray worker unpickles), turnrl check-env, and the errors on the way."""

from __future__ import annotations

import pickle
import sys
import textwrap

import pytest

from turnrl.cli import main
from turnrl.config import ConfigError, load_config
from turnrl.config.checks import validate
from turnrl.envs import registry
from turnrl.train.setup import env_factory

MODULE = '''
import random

from turnrl.envs import register
from turnrl.types import StepResult


class Pick:
    """Say the number asked for, in one reply."""

    def reset(self, *, seed=None, options=None):
        self.target = random.Random(seed).randint(0, 3)
        return [{"role": "user", "content": f"Say {self.target}."}], {}

    def step(self, action):
        ok = action.strip() == str(self.target)
        return StepResult([{"role": "user", "content": "yes" if ok else "no"}], float(ok),
                          True, False, {"success": ok})

    def oracle_action(self):
        return str(self.target)

    def sample_action(self, rng):
        return str(rng.randint(0, 3))

    def close(self):
        pass


register("{id}", entry_point=Pick, max_turns=1, has_oracle=True,
         description="Say the number asked for.")
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``my_envs_<n>.py`` in a fresh current directory, registering ``pick-<n>-v0``; the
    registry and sys.modules are put back afterwards."""
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    monkeypatch.chdir(tmp_path)
    name = f"my_envs_{abs(hash(tmp_path)) % 10**8}"
    env_id = f"pick-{name.split('_')[-1]}-v0"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE.replace("{id}", env_id)))
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name, env_id
    sys.modules.pop(name, None)


def test_check_env_imports_the_users_module(user_module, capsys):
    name, env_id = user_module
    assert main(["check-env", env_id]) == 2
    assert "--import my_envs, or env.imports" in capsys.readouterr().err
    assert main(["check-env", env_id, "--import", name]) == 0
    out = capsys.readouterr().out
    assert f"{env_id}: follows the env contract on seeds 0-2" in out and "an oracle" in out


def test_env_imports_in_a_config_and_in_the_factory_workers_unpickle(user_module,
                                                                     monkeypatch):
    name, env_id = user_module
    cfg = load_config(None, [f"env.id={env_id}", f"env.imports=[{name}]"])
    validate(cfg)  # imports first, so the id is known to every check
    factory = pickle.loads(pickle.dumps(env_factory(cfg)))
    sys.modules.pop(name)  # as in a fresh worker process: neither imported nor registered
    monkeypatch.setattr(registry, "_SPECS", {k: v for k, v in registry._SPECS.items()
                                             if k != env_id})
    env = factory()
    messages, _ = env.reset(seed=1)
    assert env.step(env.oracle_action()).reward == 1.0 and messages[0]["role"] == "user"


def test_modules_that_cannot_be_imported_say_why(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken_envs.py").write_text("raise RuntimeError('no GPU here')\n")
    (tmp_path / "needy_envs.py").write_text("import not_installed_pkg\n")
    for module, expected in (("missing_envs", "no module 'missing_envs'; give a module "
                                              "importable from"),
                             ("broken_envs", "importing 'broken_envs' raised RuntimeError: no "
                                             "GPU here; fix the module"),
                             ("needy_envs", "importing 'needy_envs' failed: No module named "
                                            "'not_installed_pkg'")):
        with pytest.raises(ConfigError, match=f"^override 'env.imports=\\[{module}\\]': "
                                              f"env.imports: {expected}"):
            validate(load_config(None, [f"env.imports=[{module}]"]))
        sys.modules.pop(module, None)
