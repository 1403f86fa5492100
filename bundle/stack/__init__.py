"""Floor 5, below render (it runs what render made, and never imports it): the Docker boundary
(python-on-whales), run records, readiness, the front door."""
