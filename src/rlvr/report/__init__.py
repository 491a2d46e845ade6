"""The self-contained HTML report: `html` (the page) with `plots` and `ttc_plots` (its figures)."""
