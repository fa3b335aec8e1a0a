"""gruki: small helpers in 4 modules (arith, prices, timeutil, warehouse)."""
