"""zapusto: small helpers in 1 module (lists)."""
