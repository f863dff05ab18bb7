"""The decision core: the governor, its attempt loop, rules, policy, budgets and side effects.

Everything that decides whether a failed attempt is retried, waited for, stopped or handed
off, and the events that record it. It may import :mod:`retrylens.sdk.text` and
:mod:`retrylens.sdk.transport`, never an integration (``tests/foundation/test_sdk_rooms.py``
lists the written exceptions).
"""
