"""Operations tooling outside the service: the scale-out parts the tests and the soak share (ops.cluster) and the
soak itself (python -m ops.soak, make soak)."""
