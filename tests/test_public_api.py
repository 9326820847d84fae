import fabricsim


def test_all_is_curated_and_importable() -> None:
    for name in fabricsim.__all__:
        assert hasattr(fabricsim, name), name
    public = {n for n in dir(fabricsim) if not n.startswith("_")}
    # every public attribute that is not a submodule is listed in __all__
    import types

    leaked = {n for n in public - set(fabricsim.__all__)
              if not isinstance(getattr(fabricsim, n), types.ModuleType)}
    assert leaked == set()


def test_error_tree() -> None:
    from fabricsim import errors

    for name in ("ConfigError", "TopologyError", "NoRouteError", "ScheduleError",
                 "SimulationError", "ModelError"):
        assert issubclass(getattr(errors, name), errors.FabricsimError)
    assert issubclass(errors.UnknownPresetError, errors.ConfigError)
    e = errors.unknown("system", "dgx-h10", ["dgx-h100", "dgx-a100"], field="cluster.system")
    assert "dgx-h100" in str(e) and "cluster.system" in str(e)
