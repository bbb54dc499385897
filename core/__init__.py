"""What every app uses: errors, URL converters, event-loop helpers, secrets and encrypted
fields, the configuration cache, origins and outage handling. It imports no app of the
project (tests/test_layers.py)."""
