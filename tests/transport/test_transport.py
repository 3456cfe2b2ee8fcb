"""Transport seams: the file transport's four ends, made by the factories of dreamer_live/transport/, have every member
of the seam's interfaces, and the actor and the learner reach replay and parameters only through
those factories (so another transport plugs in without touching either loop)."""

import ast
import inspect
import pathlib

import numpy as np
import pytest

from dreamer_live import config, transport

PACKAGE = pathlib.Path(transport.__file__).parent.parent
FILE_TRANSPORT = ("dreamer_live.replay", "dreamer_live.transport.sync")


def members(protocol) -> set[str]:
    """The methods and attributes an interface (typing.Protocol) declares."""
    names = {n for n, v in vars(protocol).items() if not n.startswith("_")
             and (inspect.isfunction(v) or isinstance(v, property))}
    return names | set(getattr(protocol, "__annotations__", {}))


def test_the_file_ends_have_every_member_of_their_interfaces(tmp_path):
    cfg = config.resolve(["debug"])
    template = {"w": np.zeros(3, np.float32)}
    sink = transport.replay_sink(cfg, tmp_path, writer_id=0)
    source = transport.variable_source(cfg, tmp_path, template)
    replay = transport.replay_source(cfg, tmp_path / "replay")
    (tmp_path / "demos").mkdir()  # with demonstrations mixed in, the source is another class
    mixed = transport.replay_source(config.resolve(["debug"], {"replay.demo_fraction": 0.5}),
                                    tmp_path / "replay")
    publisher = transport.variable_publisher(cfg, tmp_path)
    try:
        for end, protocol in ((sink, transport.ReplaySink), (source, transport.VariableSource),
                              (replay, transport.ReplaySource), (mixed, transport.ReplaySource),
                              (publisher, transport.VariablePublisher)):
            missing = {name for name in members(protocol) if not hasattr(end, name)}
            assert not missing, f"{type(end).__name__} lacks {sorted(missing)} of {protocol.__name__}"
        assert replay.steps_written() == mixed.steps_written() == 0 and source.current.version == 0
    finally:
        for end in (sink, source, replay, mixed):
            end.close()


@pytest.mark.parametrize("module", ["actor/loop.py", "learner/loop.py"])
def test_the_loops_reach_the_file_transport_only_through_the_seams(module):
    tree = ast.parse((PACKAGE / module).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    direct = sorted(name for name in imported if name.startswith(FILE_TRANSPORT))
    assert not direct, f"{module} imports {direct}; use the factories of transport/__init__.py"
