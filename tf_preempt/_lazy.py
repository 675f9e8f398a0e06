"""Lazy re-exports (PEP 562), so that importing a package stays cheap.

`tf_preempt`, `tf_preempt.models` and `tf_preempt.training` re-export names
whose modules import TensorFlow or Keras; they are imported on first use,
so the planner, flag validation and model-name checks run without them.
"""

import importlib
from typing import Callable, Dict, Iterable, Tuple


def lazy_exports(package: str, package_globals: Dict[str, object],
                 table: Dict[str, str], submodules: Iterable[str] = ()
                 ) -> Tuple[Callable[[str], object], Callable[[], list]]:
  """Returns the `__getattr__` and `__dir__` of a package with lazy names.

  Args:
    package: the package's `__name__`.
    package_globals: the package's `globals()`; a loaded name is cached
      there, so `__getattr__` runs once per name.
    table: public name -> module that defines it.
    submodules: submodule names that are imported on attribute access.

  Returns:
    (`__getattr__`, `__dir__`) for the package's module namespace.
  """
  submodules = tuple(submodules)

  def getattr_(name):
    if name in submodules:
      return importlib.import_module(f"{package}.{name}")
    module = table.get(name)
    if module is None:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    package_globals[name] = value
    return value

  def dir_():
    return sorted(set(package_globals) | set(table) | set(submodules))

  return getattr_, dir_
