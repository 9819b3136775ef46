"""What the tests share: Pulsar's oracle and standalone brokers, the other clients' partitioners,
and Python models of the native state machines."""
