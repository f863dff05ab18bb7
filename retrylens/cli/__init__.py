"""The ``retrylens`` command line: one sub-module per area, registered in :mod:`.main`."""
