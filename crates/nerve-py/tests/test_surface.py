"""The public surface: everything exported exists, and the stubs name every native item."""

import pathlib
import re

import nerve
from nerve import _nerve


def test_everything_in_all_exists():
    missing = [n for n in nerve.__all__ if not hasattr(nerve, n)]
    assert not missing


def test_stubs_cover_the_native_module():
    stub = (pathlib.Path(nerve.__file__).parent / "_nerve.pyi").read_text()
    declared = set(re.findall(r"^(?:class|def) (\w+)", stub, re.M))
    native = {n for n in dir(_nerve) if not n.startswith("_")}
    assert native - declared == set(), "add these to _nerve.pyi"


def test_stubs_name_every_message_and_service_type():
    from nerve import msgs, srv
    for module in (msgs, srv):
        stub = pathlib.Path(module.__file__).with_suffix(".pyi").read_text()
        declared = set(re.findall(r"^(\w+): ", stub, re.M))
        assert set(module.__all__) - declared == set(), f"add these to {module.__name__}.pyi"
        assert declared - set(module.__all__) == set(), f"{module.__name__}.pyi names too much"


def test_errors_are_named_after_the_rust_enums_under_one_base():
    for name in ["ContextError", "NodeError", "TopicError", "LoanError", "PublishError",
                 "RecvError", "ServiceError", "CallError", "ServeError", "SchemaError",
                 "TensorError", "WaitError", "ClosedError"]:
        assert issubclass(getattr(nerve, name), nerve.NerveError)


def test_the_package_has_its_version():
    import tomllib
    root = pathlib.Path(__file__).resolve().parents[3]
    cargo = tomllib.loads((root / "Cargo.toml").read_text())
    assert nerve.__version__ == cargo["workspace"]["package"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", nerve.__version__)
