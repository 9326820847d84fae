"""The fabricsim command line (thin layer over the public API)."""
