"""The self-contained HTML report: `html` (the page) from `rundata` (what it reads) with `plots` and
`ttc_plots` (its figures)."""
