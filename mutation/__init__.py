"""`make mutate`: small, realistic bugs written into the code one at a time (`catalogue`), each run
against the fast tests that should catch it (`run`). Not part of `make test`: it runs the listed
tests once per mutant. Its score and every surviving mutant are written down in CONTRIBUTING.md."""
