"""A simulated agent fleet: seeded tasks, a documented fault model, naive vs governed runs."""

from .fleet import FleetResult, fleet_policy, run_fleet
from .scenario import Scenario, load_scenario, parse_scenario
from .tasks import SimTask, generate_tasks

__all__ = [
    "FleetResult",
    "Scenario",
    "SimTask",
    "fleet_policy",
    "generate_tasks",
    "load_scenario",
    "parse_scenario",
    "run_fleet",
]
