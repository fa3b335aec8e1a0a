"""groufi: small helpers in 2 modules (billing, results)."""
