"""streams stage."""
