"""Jitted functions whose traced and lowered form is kept on disk (`jax.export`): a later process
calls the saved program instead of tracing and lowering the Python again, and XLA's compilation
cache then holds its compiled form (a warm debug-preset learner start: 4.1 -> 3.0 s of CPU;
docs/testing.md).

A saved program's key holds everything that shapes it: this package's source, the versions of the
libraries that trace it, the caller's salt (the agent's config and spaces), the function's name, its
static arguments and each argument's shape, dtype, weak type and sharding. Any change is a new key;
an unreadable file is traced again and overwritten."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import pathlib
import pickle
import re
import warnings

import numpy as np

from dreamer_live.atomic import write_atomic

_folder: pathlib.Path | None = None
SUFFIX = ".jaxexport"


def use_folder(path: pathlib.Path | None) -> None:
    """Keep programs under `path` from now on in this process (None: each program is a plain jit)."""
    global _folder
    _folder = path


@functools.cache
def code_version() -> str:
    """A hash of this package's source and of the libraries' versions that trace its programs."""
    digest = hashlib.sha256()
    for name in ("jax", "jaxlib", "flax", "optax", "numpy"):
        digest.update(f"{name} {importlib.metadata.version(name)}\n".encode())
    root = pathlib.Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode() + path.read_bytes())
    return digest.hexdigest()


def _leaf_signature(x) -> tuple:
    """What a jitted program depends on of one argument (hashable, and cheap: ~1 us, the actor's
    tick pays it for each of its parameters)."""
    import jax

    if isinstance(x, jax.Array):
        return x.shape, x.dtype, x.weak_type, x.sharding
    return np.shape(x), getattr(x, "dtype", None), type(x).__name__, None


class Program:
    """`jax.jit(fun, in_shardings, out_shardings, static_argnames)`, its programs kept per argument
    signature under use_folder's folder. `jitted` is the plain jit (for jax.eval_shape, and where
    no folder is set)."""

    def __init__(self, fun, salt: str, name: str | None = None, in_shardings=None,
                 out_shardings=None, static_argnames: tuple[str, ...] = ()):
        import jax

        self.fun, self.salt, self.name = fun, salt, name or fun.__name__
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        kwargs = {} if in_shardings is None else {"in_shardings": in_shardings,
                                                  "out_shardings": out_shardings}
        self.jitted = jax.jit(fun, static_argnames=static_argnames, **kwargs)
        self._calls: dict = {}  # argument signature -> (jitted flat call, output tree)

    def __call__(self, *args, **static):
        import jax

        leaves, in_tree = jax.tree.flatten(args)
        if _folder is None or any(isinstance(x, jax.core.Tracer) for x in leaves):
            return self.jitted(*args, **static)
        signature = (in_tree, tuple(map(_leaf_signature, leaves)), tuple(sorted(static.items())))
        if signature not in self._calls:
            try:
                self._calls[signature] = self._load_or_export(_folder, args, in_tree, signature,
                                                              static)
            except Exception as e:  # e.g. an op jax.export cannot save: traced at each start
                warnings.warn(f"{self.name} is traced again at each start: jax.export: "
                              f"{str(e).splitlines()[0][:200]}", stacklevel=2)
                self._calls[signature] = None
        if self._calls[signature] is None:
            return self.jitted(*args, **static)
        call, out_tree = self._calls[signature]
        return jax.tree.unflatten(out_tree, call(*leaves))

    def _load_or_export(self, folder, args, in_tree, signature, static):
        import jax

        key = hashlib.sha256(repr((code_version(), self.salt, self.name, signature)).encode())
        path = folder / f"{re.sub(r'[^A-Za-z0-9_]', '', self.name)}-{key.hexdigest()[:40]}{SUFFIX}"
        in_shardings = (None if self.in_shardings is None else
                        [s for s, arg in zip(self.in_shardings, args) for _ in jax.tree.leaves(arg)])
        try:
            serialized, out_tree = pickle.loads(path.read_bytes())
            exported = jax.export.deserialize(serialized)
        except Exception:  # absent, or unreadable: traced again and written anew
            exported, out_tree = self._export(args, in_tree, in_shardings, static)
            folder.mkdir(parents=True, exist_ok=True)
            write_atomic(path, pickle.dumps((exported.serialize(), out_tree)))

        def call(*leaves):
            return exported.call(*leaves)

        call.__name__ = self.name  # compile events name the program as jax.jit(fun) names its own
        if in_shardings is None:
            return jax.jit(call), out_tree
        placeholder = jax.tree.unflatten(out_tree, [0] * out_tree.num_leaves)
        out_shardings = jax.tree.leaves(jax.tree.map(
            lambda s, sub: [s] * len(jax.tree.leaves(sub)), self.out_shardings, placeholder))
        return jax.jit(call, in_shardings=in_shardings, out_shardings=out_shardings), out_tree

    def _export(self, args, in_tree, in_shardings, static):
        """(the jax.export.Exported of fun over flat leaves, its output tree) for these arguments."""
        import jax

        trees = []

        def flat(*leaves):
            out = self.fun(*jax.tree.unflatten(in_tree, leaves), **static)
            if self.out_shardings is not None:
                out = jax.lax.with_sharding_constraint(out, self.out_shardings)
            out_leaves, out_tree = jax.tree.flatten(out)
            trees.append(out_tree)
            return out_leaves

        flat.__name__ = f"export_{self.name}"  # its trace events, apart from the call's (cheap)
        jitted = jax.jit(flat) if in_shardings is None else jax.jit(flat, in_shardings=in_shardings)
        exported = jax.export.export(jitted)(*jax.tree.leaves(args))
        return exported, trees[-1]
