"""Stage 1 providers: transcribers, rationale writers and answer generators (see ``base`` for the interfaces)."""
