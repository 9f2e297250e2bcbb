"""The declared library: ``cclg.__all__`` is the public surface, served from ``cclg.api``.

Like httpx's test of its exported members: a public function added to an api area
module without being declared in its ``__all__`` (or a declared name that no longer
exists) fails here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import cclg
from cclg import api

AREA_SOURCES = {area: Path(api.__file__).with_name(f"{area}.py").read_text(encoding="utf-8") for area in api.AREAS}


def test_every_declared_name_exists_and_is_offered_by_the_package() -> None:
    assert len(cclg.__all__) == len(set(cclg.__all__)), "no name is declared twice"
    assert cclg.__all__ == api.__all__
    for name in cclg.__all__:
        assert getattr(api, name) is getattr(cclg, name), name
    assert set(cclg.__all__) <= set(dir(cclg))


def test_every_public_function_and_class_of_the_api_is_declared() -> None:
    """By its area module, whose ``__all__`` the package's is made of (each name declared once)."""
    import importlib

    declared = []
    for area, source in AREA_SOURCES.items():
        module = importlib.import_module(f"cclg.api.{area}")
        defined = {
            node.name
            for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
        }
        assert defined <= set(module.__all__), (area, sorted(defined - set(module.__all__)))
        declared += module.__all__
    assert sorted(declared) == sorted(cclg.__all__)


def test_no_public_name_is_also_a_module_of_the_package() -> None:
    """``cclg.ledger.purge`` is the module once anything imported it, so the library's operation is
    ``purge_memory`` (as ``search_memories``): ``cclg/__init__.py`` tells the two apart by the files."""
    modules = {path.stem for path in Path(cclg.__file__).parent.iterdir()}
    assert not modules & set(cclg.__all__), sorted(modules & set(cclg.__all__))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        cclg.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "no_such_thing" in str(error)
    else:
        raise AssertionError("cclg.no_such_thing should not exist")


def test_star_import_and_a_light_package_import() -> None:
    """``from cclg import *`` gives the whole surface; ``import cclg`` alone loads none of it
    (the hook imports the package on every prompt)."""
    code = (
        "import sys\n"
        "import cclg\n"
        "assert 'cclg.api' not in sys.modules, sorted(m for m in sys.modules if m.startswith('cclg'))\n"
        "from cclg import errors, api\n"  # a module of the package, and the library's light package
        "assert not [m for m in sys.modules if m.startswith('cclg.api.')], sorted(sys.modules)\n"
        "namespace = {}\n"
        "exec('from cclg import *', namespace)\n"
        "missing = [n for n in cclg.__all__ if n not in namespace]\n"
        "assert not missing, missing\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_error_class_of_the_package_is_importable_from_cclg_and_drawn_in_the_tree() -> None:
    """httpx-style: one exception tree (``cclg.errors``' docstring draws it), every class in it
    importable from ``cclg``. A new ``CclgError`` anywhere in the package that is not exported, or not
    drawn, fails here."""
    import importlib
    import inspect
    import pkgutil

    from cclg import errors

    found = {}
    for info in pkgutil.walk_packages(cclg.__path__, "cclg."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, errors.CclgError) and value.__module__ == info.name:
                found[name] = value
    assert len(found) >= 12, sorted(found)  # the walk reached the modules that define them
    for name, value in found.items():
        assert name in cclg.__all__, f"{name} ({value.__module__}) is not exported"
        assert getattr(cclg, name) is value, name
        assert f" {name} " in (errors.__doc__ or ""), f"{name} is not drawn in cclg.errors' tree"
