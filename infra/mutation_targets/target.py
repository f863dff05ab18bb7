"""What a mutation target is: a module, the functions carrying its guarantee, their tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    module: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]


#: Survivors no test can kill, each with the reason: (module, function, operator, the
#: mutated line as cosmic-ray writes it, stripped) -> why it behaves as the original does.
Equivalent = dict[tuple[str, str, str, str], str]
