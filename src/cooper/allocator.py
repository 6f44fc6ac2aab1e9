"""Deprecated alias: the allocator setting moved to :mod:`cooper.infra.allocator`. It goes in the next release."""

import warnings

from cooper.infra.allocator import *  # noqa: F403

warnings.warn("cooper.allocator moved to cooper.infra.allocator; import from there (this alias goes in the next "
              "release)", DeprecationWarning, stacklevel=2)
