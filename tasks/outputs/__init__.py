"""What leaves the warehouse for people: the fleet report and its HTML page, and the files an
operator bids with (settlement-resolution export)."""
