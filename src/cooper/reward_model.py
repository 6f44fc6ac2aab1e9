"""Deprecated alias: the reward model moved to :mod:`cooper.rm`. It goes in the next release."""

import warnings

from cooper.rm import *  # noqa: F403

warnings.warn("cooper.reward_model moved to cooper.rm; import from there (this alias goes in the next "
              "release)", DeprecationWarning, stacklevel=2)
