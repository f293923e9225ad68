"""trainer stage."""
