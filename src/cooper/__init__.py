"""cooper-rl: reinforcement learning for LLM reasoning with a reward model trained during RL.

Implements Cooper (Hong et al., arXiv 2508.05613): a reference-based reward model scores the
policy's samples, and every step it is updated on pairs made of verifier-confirmed positives and
assistant-written negatives, so the policy cannot hack it. See README.md for the pipeline.
"""

__version__ = "0.1.0"
