"""Settings: what every stage is told to do, checked before anything runs.

Takes presets (YAML files that list only what differs from the defaults) and ``key=value``
overrides; hands on typed dataclasses with one docstring per field. :mod:`.engine` reads and
applies settings to any settings dataclass (unknown keys and bad values stop with the fix);
:mod:`.train` is ``cooper train``'s family, its sections in :mod:`.sections` (policy, data,
rollout, assistant, validation) and :mod:`.reward_sections` (reward, rm_update, judge), what
``reward.mode`` means in :mod:`.reward_modes`; :mod:`.rm` is ``cooper rm train``'s (offline BCE
training of the reward model); :mod:`.data_mix` is ``cooper data build``'s (the kinds of
completion and their weights); :mod:`.experiment` is ``cooper experiment hacking``'s (its arms,
:mod:`.arms`, are named sets of ``cooper train`` settings on top of a shared ``train`` section).
The presets shipped with cooper-rl live in ``config/presets``. A preset may start from another of
its family with ``base: NAME`` (a shipped name, or a .yaml path relative to the file that names
it): the base is read first and the file's own keys are merged on top, mapping by mapping.
"""

from cooper.config.data_mix import DataMixConfig
from cooper.config.engine import (
    ConfigError,
    apply_settings,
    get_key,
    list_presets,
    parse_overrides,
    preset_dir,
    read_settings_file,
)
from cooper.config.rm import RMTrainConfig
from cooper.config.train import TrainConfig, load_config

__all__ = ["ConfigError", "DataMixConfig", "RMTrainConfig", "TrainConfig", "apply_settings",
           "get_key", "list_presets", "load_config", "parse_overrides", "preset_dir",
           "read_settings_file"]
