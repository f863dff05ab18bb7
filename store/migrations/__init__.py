"""Numbered schema migrations; each module ``mNNNN_<name>.py`` defines ``MIGRATION``.

Discovery is by module name, so adding a migration never means editing a shared list.
"""
