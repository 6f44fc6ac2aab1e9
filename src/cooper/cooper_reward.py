"""Deprecated alias: the Cooper step moved to :mod:`cooper.rl.step`. It goes in the next release."""

import warnings

from cooper.rl.step import *  # noqa: F403

warnings.warn("cooper.cooper_reward moved to cooper.rl.step; import from there (this alias goes in the next "
              "release)", DeprecationWarning, stacklevel=2)
