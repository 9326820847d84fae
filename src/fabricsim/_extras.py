"""Optional dependencies (extras): import one, or say which extra to install.

Figures need ``matplotlib`` (``pip install 'fabricsim[plot]'``) and Parquet/CSV tables
need ``pyarrow`` (``fabricsim[io]``); everything else works without them.

Example
-------
>>> require("math", "plot", "plotting").sqrt(4.0)
2.0
>>> try:
...     require("fabricsim_no_such_module", "plot", "plotting")
... except ConfigError as e:
...     print(e)
plotting needs fabricsim_no_such_module, which is not installed: pip install 'fabricsim[plot]'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fabricsim.errors import ConfigError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module``; if its package is missing, a ConfigError naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        if e.name is not None and e.name.split(".")[0] != top:
            raise  # the package is there but broken: show the real error
        raise ConfigError(f"{purpose} needs {top}, which is not installed: "
                          f"pip install 'fabricsim[{extra}]'") from None
