"""The SDK's public surface is deliberate (httpx's test_exported_members): one screen of names."""

from __future__ import annotations

import importlib

import retrylens.sdk as sdk

PUBLIC = {
    "Governor", "TaskRun", "Attempt", "Usage", "Failure", "current_run", "observe",
    "build_emitter", "Emitter", "EmitterSettings",
    "RetryPolicy", "load_policy", "parse_policy", "policy_from_env", "PolicySource", "FileWatcher", "ApiPoller",
    "poll_in_background",
    "MemoryKeyStore", "SqliteKeyStore", "ClickHouseKeyStore", "HandoffPackage", "CallbackChannel", "FileChannel",
    "WebhookChannel",
    "Preflight", "RetryLensClient",
    "GovernorError", "PolicyError", "TaskStopped", "GaveUp", "HandedOff", "ChainCancelled", "SideEffectError",
}


def test_all_is_exactly_the_public_surface_and_fits_on_one_screen() -> None:
    assert set(sdk.__all__) == PUBLIC
    assert len(sdk.__all__) == len(set(sdk.__all__)) <= 40


def test_every_public_name_resolves_to_an_object_of_the_package() -> None:
    for name in sdk.__all__:
        value = getattr(sdk, name)
        assert value.__module__.startswith("retrylens."), (name, value.__module__)
        assert value.__name__ == name


def test_errors_are_the_package_hierarchy() -> None:
    errors = importlib.import_module("retrylens.errors")
    for name in ("GovernorError", "PolicyError", "TaskStopped", "GaveUp", "HandedOff", "ChainCancelled",
                 "SideEffectError"):
        assert getattr(sdk, name) is getattr(errors, name)
        assert issubclass(getattr(sdk, name), errors.RetryLensError)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        sdk.NotAThing  # noqa: B018
    except AttributeError as exc:
        assert "NotAThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
