"""What the report costs and how the product behaves under load, measured, never asserted: `make
bench` (`bench`, with `census_worker`, its Python census process, `regen`, `make report`'s own
time, and `maskpath`, the mask on the decode path), `loadtest` (llama-server under load) and
`quotes` (`make quotes`). Above every other layer: it times the analyses, the pipeline and the
report, and nothing imports it."""
