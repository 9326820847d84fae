"""The pydantic base of every model a user can build from Python.

Built from Python (``ParallelConfig(tp=0)``), a model reports bad values through the
project's error tree — a :class:`~fabricsim.errors.ConfigError` naming the field — not
pydantic's ``ValidationError``. Loaders that validate files call ``model_validate`` and
catch ``ValidationError`` themselves, to add file and line to the message.

Example
-------
>>> from pydantic import Field
>>> class Knob(StrictModel):
...     turns: int = Field(1, ge=1)
>>> Knob(turns=0)
Traceback (most recent call last):
...
fabricsim.errors.ConfigError: Knob.turns: Input should be greater than or equal to 1, got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from fabricsim.errors import ConfigError

#: Longest echo of a rejected value in an error message (a list of 2,000 items is named
#: by its length and first items, not printed whole).
ECHO_CHARS = 200


def _short(value: object) -> str:
    """``repr(value)``, cut to :data:`ECHO_CHARS` with the length of a long sequence.

    >>> _short(("ib-ndr",) * 3)
    "('ib-ndr', 'ib-ndr', 'ib-ndr')"
    >>> _short(("ib-ndr",) * 2000)[-25:]
    '... (2000 items in all)'
    """
    text = repr(value)
    if len(text) <= ECHO_CHARS:
        return text
    n = f" ({len(value)} items in all)" if isinstance(value, list | tuple) else ""
    return f"{text[:ECHO_CHARS]} ...{n}"


def config_error(e: ValidationError, prefix: str = "") -> ConfigError:
    """pydantic's first error as a ConfigError: ``<prefix>.<field>: <message>, got <value>``."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    got = err.get("input")
    got_s = f", got {_short(got)}" if got is not None and not isinstance(got, dict) else ""
    msg = str(err["msg"]).removeprefix("Value error, ")
    more = len(e.errors()) - 1
    tail = f" (and {more} more problem(s))" if more else ""
    field = ".".join(x for x in (prefix, loc) if x)
    return ConfigError(f"{msg}{got_s}{tail}", field=field or None)


if TYPE_CHECKING:  # for the type checker only; at run time the class itself is taken
    from pydantic._internal._model_construction import ModelMetaclass as _ModelMeta
else:
    _ModelMeta = type(BaseModel)  # pydantic's model metaclass, without its private module


class _StrictMeta(_ModelMeta):
    """Calling a model class (not ``model_validate``) reports errors as ConfigError.

    Only the call is wrapped: ``__init__`` stays pydantic's, so nested models and the file
    loaders' ``model_validate`` keep pydantic's errors with their locations.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as e:
            raise config_error(e, cls.__name__) from None


def _numeric_not_bool(annotation: Any) -> bool:
    """The field takes numbers (int or float somewhere in its type) and not booleans."""
    from typing import get_args

    seen: set[Any] = set()

    def walk(t: Any) -> None:
        if t in seen:
            return
        seen.add(t)
        for a in get_args(t):
            walk(a)

    walk(annotation)
    return bool(seen & {int, float}) and bool not in seen


class StrictModel(BaseModel, metaclass=_StrictMeta):
    """A pydantic model whose constructor raises :class:`~fabricsim.errors.ConfigError`.

    A number field refuses ``true``/``false`` (pydantic would read them as 1 and 0: a
    YAML ``nodes: true`` must not build one server).

    >>> from pydantic import Field
    >>> class Count(StrictModel):
    ...     n: int | None = Field(None, ge=0)
    >>> Count(n=True)
    Traceback (most recent call last):
    ...
    fabricsim.errors.ConfigError: Count.n: Input should be a number, not true/false, got True
    """

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, bool) and info.field_name is not None:
            f = cls.model_fields.get(info.field_name)
            if f is not None and _numeric_not_bool(f.annotation):
                raise PydanticCustomError("number_not_bool",
                                          "Input should be a number, not true/false")
        return v


def renamed_keys(data: Any, renames: Mapping[str, str], where: str) -> Any:
    """``data`` (a mapping about to be validated) with the keys in ``renames`` (old name
    -> new name) written by their new names, each with a
    :class:`~fabricsim.errors.DeprecatedName` warning naming both; a key given under both
    names is a :class:`~fabricsim.errors.ConfigError`. Anything else passes unchanged.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     renamed_keys({"interleave": 5}, {"interleave": "vp"}, "training")
    ...     print(w[0].message)
    {'vp': 5}
    training.interleave is the old name of training.vp; write vp (interleave is still read)
    """
    import warnings

    from fabricsim.errors import DeprecatedName

    if not isinstance(data, Mapping) or not any(k in data for k in renames):
        return data
    out = dict(data)
    for old, new in renames.items():
        if old not in out:
            continue
        if new in out:
            raise ConfigError(f"{old} and {new} are one field (the old and the new name); "
                              f"keep {new}", field=f"{where}.{old}")
        out[new] = out.pop(old)
        warnings.warn(f"{where}.{old} is the old name of {where}.{new}; write {new} ({old} "
                      f"is still read)", DeprecatedName, stacklevel=2)
    return out
