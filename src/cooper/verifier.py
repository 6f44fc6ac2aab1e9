"""Deprecated alias: the verifier moved to :mod:`cooper.verify.verifier`. It goes in the next release."""

import warnings

from cooper.verify.verifier import *  # noqa: F403

warnings.warn("cooper.verifier moved to cooper.verify.verifier; import from there (this alias goes in the next "
              "release)", DeprecationWarning, stacklevel=2)
