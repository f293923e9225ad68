"""What `rtrl run` leaves to look at: the console tables of its rounds, `summary.json` and the
`report.html` page that renders it."""
