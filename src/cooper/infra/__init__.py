"""Infrastructure: the machinery every stage runs on, with no pipeline logic of its own.

Takes model names, conversations and rows; does model loading and caching (:mod:`.models`,
:mod:`.embedded`), sampling through one :class:`Generator` interface for local models and
OpenAI-compatible endpoints (:mod:`.generation`; :mod:`.endpoint`, whose records are in
:mod:`.endpoint_records`, with retries and a circuit breaker from :mod:`.resilience`),
collective operations of multi-process training (:mod:`.collective`), the allocator setting of
long runs (:mod:`.allocator`), worker processes whose calls have a hard deadline, from any
thread (:mod:`.procpool`, forked from the zygote of :mod:`.zygote`; the verifier's), files
written whole or not at all (:mod:`.files`; committed parquet parts of resumable jobs:
:mod:`.chunks`) and the snapshot of software and machine a result records
(:mod:`.environment`); hands on generations, loaded models, results of calls that cannot hang
and files that a crash cannot leave half-written. Nothing here imports torch or transformers before it is used.
"""

from cooper.infra.endpoint_records import ChatResult, EndpointConfig, EndpointStats
from cooper.infra.files import atomic_open, read_json, write_atomic, write_json
from cooper.infra.generation import Generation, Generator, SamplingConfig, load_generator
from cooper.infra.models import DEFAULT_MODEL, ModelNotFoundError, resolve

__all__ = ["DEFAULT_MODEL", "ChatResult", "EndpointConfig", "EndpointStats", "Generation",
           "Generator", "ModelNotFoundError", "SamplingConfig", "atomic_open", "load_generator",
           "read_json", "resolve", "write_atomic", "write_json"]
