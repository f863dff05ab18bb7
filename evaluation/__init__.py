"""Evidence for the next retry policy before it goes live.

``history`` (logged attempts as task-level arrays) → ``replay`` (counterfactual replay
with bootstrap CIs; ``limits`` turns a policy into arrays, ``replay_loop`` is the
readable per-attempt reference) and ``off_policy`` (IPS, SNIPS, doubly robust from
logged propensities) → ``report`` / ``report_html`` (JSON + offline HTML with a
recommendation). ``shadow`` compares live and shadow decisions in ClickHouse,
``candidates`` loads candidate policy files, ``ground_truth`` runs every candidate on the
same seeded fleet so the estimators can be checked against the truth.
"""
