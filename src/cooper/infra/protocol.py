"""The paper's evaluation protocol, declared once.

Cooper (Hong et al., arXiv 2508.05613; ``docs/method.md``, "The paper's numbers") scores a policy by
sampling each problem at temperature 0.7 with nucleus top-p 0.95, 8 samples per problem, and
checking every sample with the verifier. Every place that evaluates a policy takes its defaults from
here: :class:`~cooper.infra.generation.SamplingConfig`, ``cooper eval``, validation during training,
the experiment's final evaluation, the demo and ``cooper bench eval``. It lives in infra and imports
nothing, so every layer may use it.
"""

PAPER_TEMPERATURE = 0.7
"""sampling temperature of the paper's evaluation"""
PAPER_TOP_P = 0.95
"""nucleus (top-p) sampling of the paper's evaluation"""
PAPER_SAMPLES = 8
"""samples per problem in the paper's evaluation (accuracy is their mean)"""
