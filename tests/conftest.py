"""The test suite: one folder per estimator family (cogaps, poisson, xd, m3f) and, here, the
tests of what the estimators share. This file's folder is on the import path of every test
(pytest's default import mode), so that the helpers of ``_shared.py`` import from any folder."""
