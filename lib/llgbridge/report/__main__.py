"""`python -m llgbridge.report`."""

from .pages import main

raise SystemExit(main())
