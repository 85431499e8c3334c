"""Source files to the warehouse's input tables: the Cambridge archive and a synthetic fleet."""
