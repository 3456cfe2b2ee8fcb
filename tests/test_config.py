"""Presets, overrides, type checks and the logdir's config guard."""

import re
import subprocess
import sys

import pytest

from dreamer_live import cli, config
from dreamer_live.errors import UserError


def test_presets_merge_in_order_then_overrides():
    cfg = config.resolve(["debug"], config.parse_overrides(["--batch_size", "8", "--env.size=32,32"]))
    assert cfg.batch_size == 8 and cfg.batch_length == 16  # override beats preset beats default
    assert cfg.env.size == [32, 32]
    assert cfg.replay.chunk_steps == 64


def test_int_promotes_to_float_and_flow_lists_parse():
    cfg = config.resolve([], config.parse_overrides(["--run.train_ratio", "8", "--env.size", "[48, 48]"]))
    assert cfg.run.train_ratio == 8.0 and isinstance(cfg.run.train_ratio, float)
    assert cfg.env.size == [48, 48]


def test_free_form_kwargs_merge():
    cfg = config.resolve([], {"env.kwargs.speed": 2})
    cfg = cfg.update({"env.kwargs.lives": 5})
    assert cfg.env.kwargs.to_dict() == {"speed": 2, "lives": 5}


@pytest.mark.parametrize("overrides, message", [
    ({"agent.compute_dtyp": "float32"}, "did you mean 'agent.compute_dtype'"),
    ({"run.steps": "many"}, "'run.steps' expects int"),
    ({"run.quiet": 1}, "'run.quiet' expects bool"),
    ({"env.size": "a,b"}, r"'env\.size\[0\]' expects int"),
])
def test_bad_keys_and_types_name_the_key(overrides, message):
    with pytest.raises(UserError, match=message):
        config.resolve([], overrides)


def test_a_preset_builds_on_its_base_presets(tmp_path):
    pixels = config.resolve(["catcher_pixels"])
    catcher = config.resolve(["catcher"])
    assert pixels.env.obs == "image" and catcher.env.obs == "vector"
    assert pixels.env.time_cap_s == catcher.env.time_cap_s == 30.0
    assert pixels.agent.rssm.deter == catcher.agent.rssm.deter == 64
    loop = tmp_path / "loop.yaml"
    loop.write_text("base: [" + str(loop) + "]\n")
    with pytest.raises(UserError, match="is its own base"):
        config.resolve([str(loop)])


def test_unknown_preset_names_nearest():
    with pytest.raises(UserError, match="did you mean 'debug'"):
        config.resolve(["debgu"])


def test_logdir_refuses_conflicting_restart(tmp_path):
    first = cli.logdir_config(tmp_path, ["debug"], {})
    assert (tmp_path / "config.yaml").exists()
    # same identity, different run-local settings: accepted, and no presets means "as before"
    again = cli.logdir_config(tmp_path, [], {"run.steps": 5})
    assert again.batch_size == first.batch_size and again.run.steps == 5
    with pytest.raises(UserError, match="env.obs"):
        cli.logdir_config(tmp_path, ["debug"], {"env.obs": "image"})
    forced = cli.logdir_config(tmp_path, ["debug"], {"env.obs": "image"}, force=True)
    assert config.read_yaml(tmp_path / "config.yaml")["env"]["obs"] == forced.env.obs == "image"



def test_a_logdir_from_an_older_version_still_opens(tmp_path):
    (tmp_path / "config.yaml").write_text("actor:\n  late_ms: 5.0\n  hz: 30.0\n")  # late_ms: retired
    assert cli.logdir_config(tmp_path, [], {}).actor.hz == 30.0
    with pytest.raises(UserError, match="unknown config key 'actor.late_ms'"):
        cli.logdir_config(tmp_path, [], {"actor.late_ms": 5.0})  # asked for today: refused


def test_a_renamed_key_keeps_its_meaning(tmp_path):
    """agent.enc/dec.outer_patch (in every older config.yaml) reads as patch 2 (true) or 1."""
    (tmp_path / "config.yaml").write_text("agent:\n  enc: {outer_patch: true}\n"
                                          "  dec: {outer_patch: false}\n")
    agent = cli.logdir_config(tmp_path, [], {}).agent
    assert (agent.enc.patch, agent.dec.patch) == (2, 1)


def test_command_line_error_is_one_line():
    out = subprocess.run([sys.executable, "-c",
                          "import sys; from dreamer_live import cli\n"
                          "@cli.main\n"
                          "def m(argv):\n"
                          "    p = cli.parser('x', 'y', logdir_required=False)\n"
                          "    cli.parse(p, argv)\n"
                          "sys.exit(m(['--agent.nope', '1']))"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "unknown config key 'agent.nope'" in out.stderr


def test_attaching_to_the_game_is_not_identity(tmp_path):
    first = cli.logdir_config(tmp_path, ["debug"], {})
    # accepted: same model, same game, and the same identity the parameters are published under
    windowed = cli.logdir_config(tmp_path, ["debug"], {"env.window": True, "env.live.display": ":1"})
    assert windowed.env.window and windowed.env.live.display == ":1"
    assert config.identity(windowed) == config.identity(first)


def test_every_default_key_says_what_it_is():
    """Each leaf of CONFIG_DIR/defaults.yaml carries a comment on its line (its documentation)."""
    bare = [line for line in (config.CONFIG_DIR / "defaults.yaml").read_text().splitlines()
            if re.match(r"^\s*[a-z_0-9]+:\s*\S", line) and "#" not in line]
    assert not bare, bare


def test_every_number_and_choice_has_its_rule_beside_its_default():
    table = config.rules()
    for name, value in config.defaults().flat().items():
        if isinstance(value, (int, float, list)) and not isinstance(value, bool):
            assert name in table, f"{name} has no [range] in defaults.yaml"
        if name in table:
            for item in value if isinstance(value, list) else [value]:
                assert table[name].allows(item), (name, value)  # every default is valid
    for name in ("env.clock", "env.obs", "agent.norm", "agent.act", "agent.opt.name", "actor.mode"):
        assert table[name].choices, name
    assert config.resolve(overrides={"agent.opt.beta1": 0.0, "actor.hz": 1000})  # bounds included
    with pytest.raises(UserError, match=r"'agent\.opt\.beta1' must be in \[0, 1\), got 1\.0"):
        config.resolve(overrides={"agent.opt.beta1": 1})
    with pytest.raises(UserError, match=r"'agent\.enc\.mults' must be in \[1, 64\], got \[2, 0\]"):
        config.resolve(overrides={"agent.enc.mults": [2, 0]})


# The keys that the defaults' one CPU default owns: a game's preset may set them only with a measured
# reason in docs/games.md's table "Settings a game keeps".
AGENT_KEYS = ("agent.", "batch_size", "batch_length", "run.train_ratio", "run.prefill")
KEPT_ROW = re.compile(r"^\| `([a-z0-9_]+)` \| `([a-z0-9_.]+)` \| [^|]+ \| [^|]*\S[^|]* \|$")


def names_a_game(name: str) -> bool:
    """Whether preset `name`, or a preset it builds on, sets env.name."""
    body = config.presets()[name] or {}
    return "name" in (body.get("env") or {}) or any(names_a_game(b) for b in body.get("base") or [])


def test_a_game_preset_sets_agent_keys_only_with_a_measured_reason():
    docs = (config.CONFIG_DIR.parents[1] / "docs" / "games.md").read_text()
    section = docs.split("## Settings a game keeps", 1)[1].split("\n## ", 1)[0]
    kept = {m.groups() for line in section.splitlines() if (m := KEPT_ROW.match(line.strip()))}
    table = config.presets()
    found = set()
    for name, body in table.items():
        if not names_a_game(name):
            continue
        for key in config.flatten({k: v for k, v in body.items() if k != "base"}):
            if key.startswith(AGENT_KEYS):
                found.add((name, key))
    assert found <= kept, f"game presets set agent keys with no row in docs/games.md: {sorted(found - kept)}"
    assert kept <= found, f"docs/games.md names settings no preset sets: {sorted(kept - found)}"
    assert ("supertux", "agent.opt.lr") in found  # the rule sees the keys it is about


# Presets that ask more than 4x what their machine was measured to give, each with its reason in
# docs/tuning.md: 64x64 frames, whose one-pixel objects a smaller frame loses.
ASK_MORE = {"monsterkong_pixels", "catcher_live", "lbreakout2"}
RATE_ROW = re.compile(r"^\| (`[^|]+) \| [^|]+ \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)[^|]* \|$")


def asked_updates(cfg) -> float:
    """Learner updates per second a config asks: decisions per second x train ratio / batch steps."""
    return cfg.actor.hz / cfg.env.action_repeat * cfg.run.train_ratio / (cfg.batch_size * cfg.batch_length)


def test_every_live_preset_asks_what_its_machine_gives():
    """docs/tuning.md's tables name every live preset once per machine (a 2-core CPU; a GPU with
    gpu_learner for the pixel ones), with the updates/s its config asks, between a quarter of and 4x
    the measured rate (ASK_MORE excepted, and only they ask more)."""
    docs = (config.CONFIG_DIR.parents[1] / "docs" / "tuning.md").read_text()
    games = {name: config.resolve([name]) for name in config.presets() if names_a_game(name)}
    live = {name for name, c in games.items() if c.env.name == "live" or c.env.clock == "realtime"}
    assert {"catcher", "supertux", "lbreakout2_state", "catcher_live"} <= live
    images = {name for name in live if games[name].env.obs == "image"}
    for machine, heading, wanted, extra in (("cpu", "### On 2 CPU cores", live, []),
                                            ("gpu", "### On a GPU", images, ["gpu_learner"])):
        section = docs.split(heading, 1)[1].split("\n#", 1)[0]
        named, over = [], set()
        for line in section.splitlines():
            if not (m := RATE_ROW.match(line.strip())):
                continue
            measured, asked = float(m.group(2)), float(m.group(3))
            for name in re.findall(r"`([a-z0-9_]+)`", m.group(1)):
                if name == "gpu_learner":
                    continue
                named.append(name)
                got = asked_updates(config.resolve([name, *extra]))
                assert abs(got - asked) < 0.01, f"{machine}: {name} asks {got:.2f} updates/s, the table {asked}"
                assert got >= measured / 4, f"{machine}: {name} asks {got:.2f}, under a quarter of {measured}"
                if got > 4 * measured:
                    over.add(name)
        assert sorted(named) == sorted(wanted), f"{machine}: rows name {sorted(named)}, live presets {sorted(wanted)}"
        assert over == (ASK_MORE if machine == "cpu" else set()), f"{machine}: asking more than 4x: {over}"
