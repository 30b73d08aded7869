"""`python -m llgbridge.report`."""

from .build import main

raise SystemExit(main())
