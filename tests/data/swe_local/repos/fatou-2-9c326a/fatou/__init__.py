"""fatou: small helpers in 3 modules (calc, prices, strings)."""
