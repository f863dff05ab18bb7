"""Text hygiene: what an agent's text becomes before it leaves the process.

Failures classified and redacted (:mod:`.sanitizer`, :mod:`.redaction`), people's names
found (:mod:`.personal`), input features and word hashes (:mod:`.features`), clean
attempt contexts (:mod:`.context`) and the event processors that apply all of it. The
lowest room: it imports no other room of the SDK (``tests/foundation/test_sdk_rooms.py``).
"""
